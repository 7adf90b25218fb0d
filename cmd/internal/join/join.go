package join

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/join"
	"github.com/bootlet/bootlet/manifests"
)

// NewCommand is `bootlet join`: a worker's side of kubeadm's token
// discovery, and `join print` for the master's side.
func NewCommand() *cobra.Command {
	f := join.Options{Out: cli.DefaultAssetDir, Timeout: 5 * time.Minute, CRISocket: manifests.DefaultKubeletRuntimeEndpoint}
	cmd := &cobra.Command{
		Use:   cli.JoinUse,
		Short: cli.JoinShort,
		Long: `Run on a worker with what ` + "`bootlet join print`" + ` printed on a master. It reads the kube-public
cluster-info ConfigMap from API_ENDPOINT without credentials, accepts it only if it carries the
bootstrapsigner's JWS signature made with --token and its CA's public key has the hash of
--discovery-token-ca-cert-hash (kubeadm's token discovery, by kubeadm's code). Then, over TLS to
that CA and with the token, it reads the cluster's kubelet configuration, the kube-system/kubelet-config
ConfigMap (kubeadm's), and writes into --out, all or nothing, each file by a durable rename:
  pki/kubelet-client-ca.crt  (0644) the CA of the kubelet API's client certificates (the apiserver's)
  kubelet-config.yaml        (0644) the cluster's KubeletConfiguration with the node's own settings:
                             clientCAFile the file above, containerRuntimeEndpoint --cri-socket,
                             podLogsDir --pod-logs-dir when given
  bootstrap-kubelet.conf     (0600) the server and CA of cluster-info, and the token
Start the worker's kubelet with --config and --bootstrap-kubeconfig on them and --kubeconfig on a file
that does not exist yet (the command is printed): the kubelet posts a CSR with the token, the
controller-manager approves and signs it, and the kubelet writes its own kubeconfig and certificate. Then ` + "`bootlet join finish`" + ` removes
bootstrap-kubelet.conf, the token's copy on the worker, once that certificate is accepted.
Per-node kubelet flags (--hostname-override, --node-ip) stay flags, as with kubeadm. Nothing is written
when a check fails or the cluster has no kubelet-config ConfigMap (a cluster rendered by an older
bootlet: the error says how to create it).

The token is a secret: it is never printed or logged. Workers run no bootlet daemon: containerd
and the kubelet are enough (docs/cluster.md, "Workers join").`,
		Example: `  bootlet join 192.0.2.10:6443 --token abcdef.0123456789abcdef \
    --discovery-token-ca-cert-hash sha256:0f1e... --out /etc/kubernetes \
    --cri-socket unix:///run/containerd/containerd.sock`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want one argument, the API endpoint HOST:PORT (`bootlet join print` on a master prints the whole command), got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f.Endpoint = args[0]
			return join.Run(f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.Token, "token", "", "bootstrap token (ID.SECRET): it authenticates the kubelet's CSR and has signed cluster-info")
	fl.StringSliceVar(&f.CACertHashes, "discovery-token-ca-cert-hash", nil, "sha256:HEX of the cluster CA's public key (kubeadm's format); repeat or comma-separate for several")
	fl.StringVar(&f.Out, "out", f.Out, "directory to write bootstrap-kubelet.conf, kubelet-config.yaml and pki/kubelet-client-ca.crt to")
	fl.StringVar(&f.CRISocket, "cri-socket", f.CRISocket, "the node's container runtime endpoint, the kubelet's containerRuntimeEndpoint in kubelet-config.yaml")
	fl.StringVar(&f.PodLogsDir, "pod-logs-dir", "", "the node's podLogsDir in kubelet-config.yaml (empty: the cluster's, by default the kubelet's /var/log/pods)")
	fl.StringVar(&f.StaticPodPath, "kubelet-static-pod-path", manifests.DefaultKubeletStaticPodPath, "the node's staticPodPath in kubelet-config.yaml: where the node's bootlet daemon hands its pods to the kubelet (its handoff's kubeletStaticPodPath), so that the node can be made a master later without a kubelet restart; empty: none")
	fl.DurationVar(&f.Timeout, "discovery-timeout", f.Timeout, "how long to wait for cluster-info to carry a signature of the token")
	cmd.AddCommand(newPrintCmd(), newFinishCmd())
	return cmd
}

// newPrintCmd is `bootlet join print`: the master's side, as kubeadm's
// `kubeadm token create --print-join-command`.
func newPrintCmd() *cobra.Command {
	assetDir := cli.DefaultAssetDir
	var create bool
	ttl := join.CreatedTokenTTL
	cmd := &cobra.Command{
		Use:   "print",
		Short: "Print the command that joins a worker: API endpoint, bootstrap token, CA hash",
		Long: `Print the ` + "`bootlet join`" + ` command for a worker: the apiserver's address and the cluster CA's hash
from --asset-dir (admin.conf, pki/ca.crt), and a bootstrap token.

The token is the one ` + "`bootlet render`" + ` wrote (self-hosted/join.yaml, created in the cluster at the
pivot) unless it has expired; --create-token makes a new one valid for --ttl (1h; at most 24h) in
the cluster through admin.conf, as ` + "`kubeadm token create`" + ` does. The output holds the token: a
secret until it expires.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The lifetime is checked before anything is read or made.
			if !create && cmd.Flags().Changed("ttl") {
				return fmt.Errorf("--ttl is the lifetime of the token --create-token makes: give both, or neither")
			}
			return join.PrintCommand(context.Background(), assetDir, create, ttl, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&assetDir, "asset-dir", assetDir, "bootlet render's asset directory")
	fl.BoolVar(&create, "create-token", false, "make a new bootstrap token in the cluster (through admin.conf) instead of printing the rendered one")
	fl.DurationVar(&ttl, "ttl", ttl, fmt.Sprintf("lifetime of the token --create-token makes (at most %s)", manifests.MaxBootstrapTokenTTL))
	return cmd
}

// newFinishCmd is `bootlet join finish`: kubeadm join's wait for the
// kubelet's TLS bootstrap, and its removal of the bootstrap kubeconfig.
// It is a step of its own because `bootlet join` does not start the
// kubelet, and workers run no bootlet daemon.
func newFinishCmd() *cobra.Command {
	out := cli.DefaultAssetDir
	var kubeconfig string
	timeout := 5 * time.Minute
	cmd := &cobra.Command{
		Use:   "finish",
		Short: "Remove the worker's bootstrap kubeconfig (the token) once its kubelet has its own certificate",
		Long: `Run on a worker after ` + "`bootlet join`" + ` and the kubelet's start. It waits (up to --timeout) until the
kubelet's kubeconfig (--kubeconfig, by default --out/kubelet.conf) names a client certificate and key
of its own that are a pair, valid now, and that the apiserver authenticates as a node
(system:node:NAME in system:nodes), then removes --out/bootstrap-kubelet.conf, the bootstrap token's
copy on the worker, as kubeadm join does after the TLS bootstrap. Until then the file is kept: a
kubelet without a valid certificate needs it. Running it again, or after the file is gone, does
no harm.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout < 0 {
				return fmt.Errorf("--timeout must not be negative")
			}
			dir, err := filepath.Abs(out)
			if err != nil {
				return err
			}
			kc := kubeconfig
			if kc == "" {
				kc = filepath.Join(dir, kubeadmconstants.KubeletKubeConfigFileName)
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			return join.Finish(ctx, cmd.OutOrStdout(), dir, kc, timeout, 2*time.Second, join.ReviewUser)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", out, "the directory `bootlet join` wrote to")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "the kubelet's --kubeconfig (default: --out/kubelet.conf)")
	fl.DurationVar(&timeout, "timeout", timeout, "how long to wait for the kubelet's certificate (0: look once)")
	return cmd
}
