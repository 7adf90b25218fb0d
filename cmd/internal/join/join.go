package join

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
	"k8s.io/kubernetes/cmd/kubeadm/app/discovery"
	"k8s.io/kubernetes/cmd/kubeadm/app/util/apiclient"
	kubeconfigutil "k8s.io/kubernetes/cmd/kubeadm/app/util/kubeconfig"
	"k8s.io/kubernetes/cmd/kubeadm/app/util/pubkeypin"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/manifests"
)

// joinFlags are `bootlet join`'s inputs: kubeadm join's token discovery.
type joinFlags struct {
	endpoint, token string
	caCertHashes    []string
	out             string
	timeout         time.Duration
	// criSocket and podLogsDir are the node's own kubelet settings, set in
	// the cluster's KubeletConfiguration (kubeadm join's --cri-socket).
	criSocket, podLogsDir string
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
	if u, err := url.Parse(f.criSocket); err != nil || u.Scheme != "unix" || u.Host != "" || !filepath.IsAbs(u.Path) {
		errs = append(errs, fmt.Errorf("--cri-socket %q: want a unix:// URL with an absolute path (unix:///run/containerd/containerd.sock)", f.criSocket))
	}
	if f.podLogsDir != "" && !filepath.IsAbs(f.podLogsDir) {
		errs = append(errs, fmt.Errorf("--pod-logs-dir %q: want an absolute path", f.podLogsDir))
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

// nodeKubeletOptions are the node's own kubelet settings, its files under
// the absolute directory out.
func (f joinFlags) nodeKubeletOptions(out string) manifests.NodeKubeletOptions {
	return manifests.NodeKubeletOptions{
		ClientCAFile:             filepath.Join(out, manifests.PKIDir, manifests.KubeletClientCA+".crt"),
		ContainerRuntimeEndpoint: f.criSocket,
		PodLogsDir:               f.podLogsDir,
	}
}

// errNoKubeletConfigFix is the fix for a cluster whose kubelet-config
// ConfigMap the token cannot read: one rendered before render wrote it
// (the pivot creates join.yaml's objects only when it runs).
const errNoKubeletConfigFix = "the cluster was made by an older bootlet render, without it: on a master, run `bootlet render` again with the same flags, then " +
	"`kubectl create -f ASSET_DIR/self-hosted/join.yaml` (it creates the ConfigMap and its Role and RoleBinding kubeadm:kubelet-config; " +
	"the objects that exist already are refused as AlreadyExists and left as they are)"

// fetchKubeletConfigMap is kubeadm join's download of the cluster's
// kubelet configuration: kube-system/kubelet-config, with kubeadm's short
// retry, as the bootstrap token.
func fetchKubeletConfigMap(cs kubernetes.Interface) (*v1.ConfigMap, error) {
	cm, err := apiclient.GetConfigMapWithShortRetry(cs, metav1.NamespaceSystem, manifests.KubeletConfigMap)
	switch {
	case err == nil:
		return cm, nil
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("the cluster has no ConfigMap %s/%s, the kubelet configuration of joining nodes: %s",
			metav1.NamespaceSystem, manifests.KubeletConfigMap, errNoKubeletConfigFix)
	case apierrors.IsForbidden(err):
		// Without the Role and RoleBinding, a ConfigMap that is missing is
		// forbidden too.
		return nil, fmt.Errorf("the bootstrap token may not read ConfigMap %s/%s, the kubelet configuration of joining nodes (%v): if %s",
			metav1.NamespaceSystem, manifests.KubeletConfigMap, err, errNoKubeletConfigFix)
	default:
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", metav1.NamespaceSystem, manifests.KubeletConfigMap, err)
	}
}

// joinFiles are the files `bootlet join` writes into the absolute
// directory out, in the order they are put in place (the bootstrap
// kubeconfig last: once it is there, so is what the kubelet needs with
// it), and what to say of each.
func (f joinFlags) joinFiles(out string, kc *clientcmdapi.Config, cm *v1.ConfigMap) ([]checkpoint.AtomicFile, []string, error) {
	o := f.nodeKubeletOptions(out)
	config, clientCA, err := manifests.NodeKubeletConfig(cm, o)
	if err != nil {
		return nil, nil, err
	}
	kubeconfig, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, nil, err
	}
	_, cluster, err := kubeconfigutil.GetClusterFromKubeConfig(kc)
	if err != nil {
		return nil, nil, err
	}
	clusterCAs, err := certutil.ParseCertsPEM(cluster.CertificateAuthorityData)
	if err != nil {
		return nil, nil, err
	}
	kubeletCAs, err := certutil.ParseCertsPEM(clientCA)
	if err != nil {
		return nil, nil, err
	}
	configPath := filepath.Join(out, manifests.KubeletConfigFile)
	kubeconfigPath := filepath.Join(out, manifests.BootstrapKubeletKubeconfig)
	files := []checkpoint.AtomicFile{
		{Path: o.ClientCAFile, Data: clientCA, Mode: 0o644},
		{Path: configPath, Data: config, Mode: 0o644},
		// 0600: the token is its credential.
		{Path: kubeconfigPath, Data: kubeconfig, Mode: 0o600},
	}
	said := []string{
		fmt.Sprintf("wrote %s, the kubelet API's client CA: %s (%s)", o.ClientCAFile, kubeletCAs[0].Subject.CommonName, pubkeypin.Hash(kubeletCAs[0])),
		fmt.Sprintf("wrote %s for the kubelet's --config: %s/%s with containerRuntimeEndpoint %s, clientCAFile %s", configPath,
			metav1.NamespaceSystem, manifests.KubeletConfigMap, o.ContainerRuntimeEndpoint, o.ClientCAFile),
		fmt.Sprintf("wrote %s for the kubelet's --bootstrap-kubeconfig: server %s, cluster CA %s (%s)",
			kubeconfigPath, cluster.Server, clusterCAs[0].Subject.CommonName, pubkeypin.Hash(clusterCAs[0])),
	}
	return files, said, nil
}

// kubeletCommandLine is the worker's kubelet for the files of out: kubeadm's
// flags (its systemd drop-in's), the kubeconfig written by the TLS
// bootstrap next to the bootstrap one.
func kubeletCommandLine(out string) string {
	return fmt.Sprintf("kubelet --config=%s --bootstrap-kubeconfig=%s --kubeconfig=%s",
		filepath.Join(out, manifests.KubeletConfigFile), filepath.Join(out, manifests.BootstrapKubeletKubeconfig), filepath.Join(out, kubeadmconstants.KubeletKubeConfigFileName))
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

// NewCommand is `bootlet join`: a worker's side of kubeadm's token
// discovery, and `join print` for the master's side.
func NewCommand() *cobra.Command {
	f := joinFlags{out: cli.DefaultAssetDir, timeout: 5 * time.Minute, criSocket: manifests.DefaultKubeletRuntimeEndpoint}
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
			f.endpoint = args[0]
			if err := f.validate(); err != nil {
				return err
			}
			out, err := filepath.Abs(f.out)
			if err != nil {
				return err
			}
			kc, err := discovery.For(nil, f.joinConfiguration())
			if err != nil {
				return fmt.Errorf("refusing to join through %s: %w", f.endpoint, err)
			}
			// The kubelet configuration with the verified bootstrap
			// kubeconfig (TLS to the pinned CA, the token), as kubeadm
			// join's kubelet-start phase reads it.
			rc, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
			if err != nil {
				return err
			}
			rc.Timeout = 30 * time.Second
			cs, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return err
			}
			cm, err := fetchKubeletConfigMap(cs)
			if err != nil {
				return err
			}
			files, said, err := f.joinFiles(out, kc, cm)
			if err != nil {
				return fmt.Errorf("the cluster's kubelet configuration: %w", err)
			}
			// All or nothing, each by a durable rename: the kubelet never
			// reads half a file, nor a configuration without its CA.
			if err := checkpoint.WriteFilesAtomic(files); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, line := range said {
				fmt.Fprintln(w, line)
			}
			fmt.Fprintf(w, "Start the worker's kubelet (add --hostname-override=NAME and --node-ip=IP where the node's name or address is not the host's):\n  %s\n", kubeletCommandLine(out))
			fmt.Fprintf(w, "Then remove the token from this node once the kubelet has its own certificate:\n  bootlet join finish --out %s\n", out)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.token, "token", "", "bootstrap token (ID.SECRET): it authenticates the kubelet's CSR and has signed cluster-info")
	fl.StringSliceVar(&f.caCertHashes, "discovery-token-ca-cert-hash", nil, "sha256:HEX of the cluster CA's public key (kubeadm's format); repeat or comma-separate for several")
	fl.StringVar(&f.out, "out", f.out, "directory to write bootstrap-kubelet.conf, kubelet-config.yaml and pki/kubelet-client-ca.crt to")
	fl.StringVar(&f.criSocket, "cri-socket", f.criSocket, "the node's container runtime endpoint, the kubelet's containerRuntimeEndpoint in kubelet-config.yaml")
	fl.StringVar(&f.podLogsDir, "pod-logs-dir", "", "the node's podLogsDir in kubelet-config.yaml (empty: the cluster's, by default the kubelet's /var/log/pods)")
	fl.DurationVar(&f.timeout, "discovery-timeout", f.timeout, "how long to wait for cluster-info to carry a signature of the token")
	cmd.AddCommand(newJoinPrintCmd(), newJoinFinishCmd())
	return cmd
}

// newJoinPrintCmd is `bootlet join print`: the master's side, as kubeadm's
// `kubeadm token create --print-join-command`.
func newJoinPrintCmd() *cobra.Command {
	assetDir := cli.DefaultAssetDir
	var create bool
	ttl := createdTokenTTL
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
			if why := manifests.ValidateBootstrapTokenTTL(ttl); create && why != "" {
				return fmt.Errorf("--ttl %s: %s", ttl, why)
			}
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
	fl.DurationVar(&ttl, "ttl", ttl, fmt.Sprintf("lifetime of the token --create-token makes (at most %s)", manifests.MaxBootstrapTokenTTL))
	return cmd
}

// createdTokenTTL is the default lifetime of a --create-token token: it is
// made for a worker that joins now, with the line pasted at once.
const createdTokenTTL = time.Hour

// userReviewer is who the apiserver says a client of rc is (a
// SelfSubjectReview).
type userReviewer func(ctx context.Context, rc *rest.Config) (authenticationv1.UserInfo, error)

// reviewUser is the apiserver's SelfSubjectReview of rc's credentials.
func reviewUser(ctx context.Context, rc *rest.Config) (authenticationv1.UserInfo, error) {
	rc = rest.CopyConfig(rc)
	rc.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return authenticationv1.UserInfo{}, err
	}
	return r.Status.UserInfo, nil
}

// kubeletHasOwnCertificate says why the kubelet of kubeconfig cannot do
// without its bootstrap kubeconfig yet ("" when it can), and who it is: the
// kubeconfig names a client certificate and key that load as a pair, the
// certificate is valid at now (the kubelet's own test before it falls back
// to the bootstrap kubeconfig), and the apiserver, reached as the
// kubeconfig says (its CA), authenticates it as a node.
func kubeletHasOwnCertificate(ctx context.Context, kubeconfig string, now time.Time, review userReviewer) (who, why string) {
	if _, err := os.Stat(kubeconfig); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Sprintf("the kubelet has not written %s yet", kubeconfig)
		}
		return "", err.Error()
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err == nil {
		err = rest.LoadTLSFiles(rc)
	}
	if err != nil {
		return "", fmt.Sprintf("%s: %v", kubeconfig, err)
	}
	if len(rc.CertData) == 0 || len(rc.KeyData) == 0 || rc.BearerToken != "" || rc.BearerTokenFile != "" {
		return "", fmt.Sprintf("%s names no client certificate and key of the kubelet's own", kubeconfig)
	}
	pair, err := tls.X509KeyPair(rc.CertData, rc.KeyData)
	if err != nil {
		return "", fmt.Sprintf("the client certificate of %s: %v", kubeconfig, err)
	}
	cert := pair.Leaf
	switch {
	case now.Before(cert.NotBefore):
		return "", fmt.Sprintf("the client certificate of %s is not valid before %s", kubeconfig, cert.NotBefore.UTC().Format(time.RFC3339))
	case !now.Before(cert.NotAfter):
		return "", fmt.Sprintf("the client certificate of %s expired at %s", kubeconfig, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	u, err := review(ctx, rc)
	if err != nil {
		return "", fmt.Sprintf("the apiserver does not accept the client certificate of %s: %v", kubeconfig, err)
	}
	if !strings.HasPrefix(u.Username, "system:node:") || !slices.Contains(u.Groups, user.NodesGroup) {
		return "", fmt.Sprintf("the client certificate of %s authenticates as %q in %v, not as a node", kubeconfig, u.Username, u.Groups)
	}
	return fmt.Sprintf("%s (certificate valid until %s)", u.Username, cert.NotAfter.UTC().Format(time.RFC3339)), ""
}

// finishJoin removes out's bootstrap kubeconfig, the worker's copy of the
// token, once the kubelet holds a certificate of its own
// (kubeletHasOwnCertificate), as kubeadm join removes it after its
// kubelet's TLS bootstrap; it looks again every interval until timeout
// (once when timeout is 0), and keeps the file if the kubelet never does:
// without it, a kubelet without a valid certificate could not bootstrap.
func finishJoin(ctx context.Context, w io.Writer, out, kubeconfig string, timeout, interval time.Duration, review userReviewer) error {
	bootstrapPath := filepath.Join(out, manifests.BootstrapKubeletKubeconfig)
	deadline := time.Now().Add(timeout)
	said := ""
	for {
		if _, err := os.Stat(bootstrapPath); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(w, "%s is gone already: no token on this node\n", bootstrapPath)
			return nil
		}
		who, why := kubeletHasOwnCertificate(ctx, kubeconfig, time.Now(), review)
		if why == "" {
			if err := os.Remove(bootstrapPath); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			// The removal survives a power cut that follows.
			if d, err := os.Open(out); err == nil {
				_ = d.Sync()
				d.Close()
			}
			fmt.Fprintf(w, "removed %s, the bootstrap token's copy on this node: the kubelet authenticates with its own certificate as %s\n", bootstrapPath, who)
			return nil
		}
		if !time.Now().Add(interval).Before(deadline) {
			return fmt.Errorf("kept %s: %s (after %s; start the kubelet, then run `bootlet join finish` again)", bootstrapPath, why, timeout)
		}
		if why != said {
			fmt.Fprintf(w, "waiting for the kubelet's TLS bootstrap: %s\n", why)
			said = why
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kept %s: %s: %w", bootstrapPath, why, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// newJoinFinishCmd is `bootlet join finish`: kubeadm join's wait for the
// kubelet's TLS bootstrap, and its removal of the bootstrap kubeconfig.
// It is a step of its own because `bootlet join` does not start the
// kubelet, and workers run no bootlet daemon.
func newJoinFinishCmd() *cobra.Command {
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
			return finishJoin(ctx, cmd.OutOrStdout(), dir, kc, timeout, 2*time.Second, reviewUser)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", out, "the directory `bootlet join` wrote to")
	fl.StringVar(&kubeconfig, "kubeconfig", "", "the kubelet's --kubeconfig (default: --out/kubelet.conf)")
	fl.DurationVar(&timeout, "timeout", timeout, "how long to wait for the kubelet's certificate (0: look once)")
	return cmd
}
