//go:build bootlet_tools

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"
	"k8s.io/kubernetes/cmd/kubeadm/app/discovery"
	kubeconfigutil "k8s.io/kubernetes/cmd/kubeadm/app/util/kubeconfig"
	"k8s.io/kubernetes/cmd/kubeadm/app/util/pubkeypin"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/manifests"
)

// joinFlags are `bootlet join`'s inputs: kubeadm join's token discovery.
type joinFlags struct {
	endpoint, token string
	caCertHashes    []string
	out             string
	timeout         time.Duration
}

// validate checks the flags before anything is asked of the network, and
// names the flag of each bad value. Every join pins the CA: kubeadm's
// --discovery-token-unsafe-skip-ca-verification has no equivalent here.
func (f joinFlags) validate() error {
	var errs []error
	if host, port, err := net.SplitHostPort(f.endpoint); err != nil || host == "" || port == "" {
		errs = append(errs, fmt.Errorf("API endpoint %q: want HOST:PORT, as `bootlet join print` prints it", f.endpoint))
	}
	if !bootstraputil.IsValidBootstrapToken(f.token) {
		// The value is not repeated: it may be a real token mistyped.
		errs = append(errs, fmt.Errorf("--token: want the form [a-z0-9]{6}.[a-z0-9]{16}"))
	}
	if len(f.caCertHashes) == 0 {
		errs = append(errs, fmt.Errorf("--discovery-token-ca-cert-hash is required: the worker trusts the cluster CA only if its public key has this hash (`bootlet join print` on a master prints it)"))
	} else if err := pubkeypin.NewSet().Allow(f.caCertHashes...); err != nil {
		errs = append(errs, fmt.Errorf("--discovery-token-ca-cert-hash: %w", err))
	}
	if f.out == "" {
		errs = append(errs, fmt.Errorf("--out is required"))
	}
	if f.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--discovery-timeout must be positive"))
	}
	return errors.Join(errs...)
}

// joinConfiguration is kubeadm join's configuration for f: token
// discovery of the CA through cluster-info, and the same token for the
// TLS bootstrap.
func (f joinFlags) joinConfiguration() *kubeadmapi.JoinConfiguration {
	return &kubeadmapi.JoinConfiguration{
		Discovery: kubeadmapi.Discovery{
			BootstrapToken: &kubeadmapi.BootstrapTokenDiscovery{
				Token: f.token, APIServerEndpoint: f.endpoint, CACertHashes: f.caCertHashes,
			},
			TLSBootstrapToken: f.token,
		},
		Timeouts: &kubeadmapi.Timeouts{Discovery: &metav1.Duration{Duration: f.timeout}},
	}
}

// joinCommandLine is the worker's command for endpoint, token and the CA
// hashes (kubeadm's `kubeadm token create --print-join-command` order).
func joinCommandLine(endpoint, token string, hashes []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bootlet join %s --token %s", endpoint, token)
	for _, h := range hashes {
		fmt.Fprintf(&b, " --discovery-token-ca-cert-hash %s", h)
	}
	return b.String()
}

// apiEndpoint is HOST:PORT of an apiserver URL (what join and kubeadm
// take), with the https default port when it names none.
func apiEndpoint(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return "", fmt.Errorf("apiserver URL %q: want https://HOST[:PORT]", server)
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// newJoinCmd is `bootlet join`: a worker's side of kubeadm's token
// discovery, and `join print` for the master's side.
func newJoinCmd() *cobra.Command {
	f := joinFlags{out: defaultAssetDir, timeout: 5 * time.Minute}
	cmd := &cobra.Command{
		Use:   joinUse,
		Short: joinShort,
		Long: `Run on a worker with what ` + "`bootlet join print`" + ` printed on a master. It reads the kube-public
cluster-info ConfigMap from API_ENDPOINT without credentials, accepts it only if it carries the
bootstrapsigner's JWS signature made with --token and its CA's public key has the hash of
--discovery-token-ca-cert-hash (kubeadm's token discovery, by kubeadm's code), then writes
--out/bootstrap-kubelet.conf (0600): the server and CA of cluster-info, and the token. Start the
worker's kubelet with --bootstrap-kubeconfig on it and --kubeconfig on a file that does not exist
yet: the kubelet posts a CSR with the token, the controller-manager approves and signs it, and the
kubelet writes its own kubeconfig and certificate. Nothing is written when the check fails.

The token is a secret: it is never printed or logged. Workers run no bootlet daemon: containerd
and the kubelet are enough (docs/cluster.md, "Workers join").`,
		Example: `  bootlet join 192.0.2.10:6443 --token abcdef.0123456789abcdef \
    --discovery-token-ca-cert-hash sha256:0f1e... --out /etc/kubernetes`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("want one argument, the API endpoint HOST:PORT (`bootlet join print` on a master prints the whole command), got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f.endpoint = args[0]
			if err := f.validate(); err != nil {
				return err
			}
			kc, err := discovery.For(nil, f.joinConfiguration())
			if err != nil {
				return fmt.Errorf("refusing to join through %s: %w", f.endpoint, err)
			}
			data, err := clientcmd.Write(*kc)
			if err != nil {
				return err
			}
			// 0600 by a durable rename: the kubelet never reads half of
			// a file that holds the token.
			path := filepath.Join(f.out, manifests.BootstrapKubeletKubeconfig)
			if _, err := checkpoint.WriteFileAtomic(path, data); err != nil {
				return err
			}
			_, cluster, err := kubeconfigutil.GetClusterFromKubeConfig(kc)
			if err != nil {
				return err
			}
			cas, err := certutil.ParseCertsPEM(cluster.CertificateAuthorityData)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s for the kubelet's --bootstrap-kubeconfig: server %s, cluster CA %s (%s)\n",
				path, cluster.Server, cas[0].Subject.CommonName, pubkeypin.Hash(cas[0]))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.token, "token", "", "bootstrap token (ID.SECRET): it authenticates the kubelet's CSR and has signed cluster-info")
	fl.StringSliceVar(&f.caCertHashes, "discovery-token-ca-cert-hash", nil, "sha256:HEX of the cluster CA's public key (kubeadm's format); repeat or comma-separate for several")
	fl.StringVar(&f.out, "out", f.out, "directory to write bootstrap-kubelet.conf to")
	fl.DurationVar(&f.timeout, "discovery-timeout", f.timeout, "how long to wait for cluster-info to carry a signature of the token")
	cmd.AddCommand(newJoinPrintCmd())
	return cmd
}

// newJoinPrintCmd is `bootlet join print`: the master's side, as kubeadm's
// `kubeadm token create --print-join-command`.
func newJoinPrintCmd() *cobra.Command {
	assetDir := defaultAssetDir
	var create bool
	ttl := manifests.DefaultBootstrapTokenTTL
	cmd := &cobra.Command{
		Use:   "print",
		Short: "Print the command that joins a worker: API endpoint, bootstrap token, CA hash",
		Long: `Print the ` + "`bootlet join`" + ` command for a worker: the apiserver's address and the cluster CA's hash
from --asset-dir (admin.conf, pki/ca.crt), and a bootstrap token.

The token is the one ` + "`bootlet render`" + ` wrote (self-hosted/join.yaml, created in the cluster at the
pivot) unless it has expired; --create-token makes a new one valid for --ttl in the cluster through
admin.conf, as ` + "`kubeadm token create`" + ` does. The output holds the token: a secret until it expires.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			admin, err := clientcmd.LoadFromFile(filepath.Join(assetDir, manifests.AdminKubeconfig))
			if err != nil {
				return err
			}
			_, cluster, err := kubeconfigutil.GetClusterFromKubeConfig(admin)
			if err != nil {
				return fmt.Errorf("%s: %w", manifests.AdminKubeconfig, err)
			}
			endpoint, err := apiEndpoint(cluster.Server)
			if err != nil {
				return err
			}
			cas, err := certutil.CertsFromFile(filepath.Join(assetDir, manifests.PKIDir, manifests.CA+".crt"))
			if err != nil {
				return err
			}
			// Every CA of ca.crt (two during a CA rotation): a worker then
			// accepts either.
			hashes := make([]string, 0, len(cas))
			for _, ca := range cas {
				hashes = append(hashes, manifests.CACertHash(ca))
			}
			var token string
			if create {
				if ttl <= 0 {
					return fmt.Errorf("--ttl must be positive")
				}
				t, err := manifests.NewBootstrapToken(time.Now().Add(ttl))
				if err != nil {
					return err
				}
				rc, err := clientcmd.NewDefaultClientConfig(*admin, nil).ClientConfig()
				if err != nil {
					return err
				}
				rc.Timeout = 30 * time.Second
				cs, err := kubernetes.NewForConfig(rc)
				if err != nil {
					return err
				}
				_, err = cs.CoreV1().Secrets(metav1.NamespaceSystem).Create(context.Background(), manifests.BootstrapTokenSecret(t), metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return fmt.Errorf("a bootstrap token with ID %s exists already; run again", t.Token.ID)
				} else if err != nil {
					return fmt.Errorf("creating a bootstrap token: %w", err)
				}
				token = t.Token.String()
			} else {
				t, err := manifests.ReadBootstrapToken(assetDir)
				if err != nil {
					return fmt.Errorf("%w (render writes it; or make one in the cluster with --create-token)", err)
				}
				if t.Expires != nil && !time.Now().Before(t.Expires.Time) {
					return fmt.Errorf("the rendered bootstrap token %s expired at %s: make a new one with --create-token, or render again", t.Token.ID, t.Expires.UTC().Format(time.RFC3339))
				}
				token = t.Token.String()
			}
			fmt.Fprintln(cmd.OutOrStdout(), joinCommandLine(endpoint, token, hashes))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&assetDir, "asset-dir", assetDir, "bootlet render's asset directory")
	fl.BoolVar(&create, "create-token", false, "make a new bootstrap token in the cluster (through admin.conf) instead of printing the rendered one")
	fl.DurationVar(&ttl, "ttl", ttl, "lifetime of the token --create-token makes")
	return cmd
}
