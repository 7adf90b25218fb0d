package join

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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
	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/manifests"
)

// Options are `bootlet join`'s inputs: kubeadm join's token discovery.
type Options struct {
	// Endpoint is the apiserver's HOST:PORT.
	Endpoint, Token string
	CACertHashes    []string
	// Out is the directory the files are written to.
	Out string
	// Timeout bounds the discovery.
	Timeout time.Duration
	// CRISocket, PodLogsDir and StaticPodPath are the node's own kubelet
	// settings, set in the cluster's KubeletConfiguration (kubeadm join's
	// --cri-socket; kubeadm's staticPodPath).
	CRISocket, PodLogsDir, StaticPodPath string
}

// Validate checks the flags before anything is asked of the network, and
// names the flag of each bad value. Every join pins the CA: kubeadm's
// --discovery-token-unsafe-skip-ca-verification has no equivalent here.
func (f Options) Validate() error {
	var errs []error
	if host, port, err := net.SplitHostPort(f.Endpoint); err != nil || host == "" || port == "" {
		errs = append(errs, fmt.Errorf("API endpoint %q: want HOST:PORT, as `bootlet join print` prints it", f.Endpoint))
	}
	if !bootstraputil.IsValidBootstrapToken(f.Token) {
		// The value is not repeated: it may be a real token mistyped.
		errs = append(errs, fmt.Errorf("--token: want the form [a-z0-9]{6}.[a-z0-9]{16}"))
	}
	if len(f.CACertHashes) == 0 {
		errs = append(errs, fmt.Errorf("--discovery-token-ca-cert-hash is required: the worker trusts the cluster CA only if its public key has this hash (`bootlet join print` on a master prints it)"))
	} else if err := pubkeypin.NewSet().Allow(f.CACertHashes...); err != nil {
		errs = append(errs, fmt.Errorf("--discovery-token-ca-cert-hash: %w", err))
	}
	if f.Out == "" {
		errs = append(errs, fmt.Errorf("--out is required"))
	}
	if u, err := url.Parse(f.CRISocket); err != nil || u.Scheme != "unix" || u.Host != "" || !filepath.IsAbs(u.Path) {
		errs = append(errs, fmt.Errorf("--cri-socket %q: want a unix:// URL with an absolute path (unix:///run/containerd/containerd.sock)", f.CRISocket))
	}
	if f.PodLogsDir != "" && !filepath.IsAbs(f.PodLogsDir) {
		errs = append(errs, fmt.Errorf("--pod-logs-dir %q: want an absolute path", f.PodLogsDir))
	}
	if f.StaticPodPath != "" && !filepath.IsAbs(f.StaticPodPath) {
		errs = append(errs, fmt.Errorf("--kubelet-static-pod-path %q: want an absolute path", f.StaticPodPath))
	}
	if f.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("--discovery-timeout must be positive"))
	}
	return errors.Join(errs...)
}

// joinConfiguration is kubeadm join's configuration for f: token
// discovery of the CA through cluster-info, and the same token for the
// TLS bootstrap.
func (f Options) joinConfiguration() *kubeadmapi.JoinConfiguration {
	return &kubeadmapi.JoinConfiguration{
		Discovery: kubeadmapi.Discovery{
			BootstrapToken: &kubeadmapi.BootstrapTokenDiscovery{
				Token: f.Token, APIServerEndpoint: f.Endpoint, CACertHashes: f.CACertHashes,
			},
			TLSBootstrapToken: f.Token,
		},
		Timeouts: &kubeadmapi.Timeouts{Discovery: &metav1.Duration{Duration: f.Timeout}},
	}
}

// nodeKubeletOptions are the node's own kubelet settings, its files under
// the absolute directory out.
func (f Options) nodeKubeletOptions(out string) manifests.NodeKubeletOptions {
	return manifests.NodeKubeletOptions{
		ClientCAFile:             filepath.Join(out, manifests.PKIDir, manifests.KubeletClientCA+".crt"),
		ContainerRuntimeEndpoint: f.CRISocket,
		PodLogsDir:               f.PodLogsDir,
		StaticPodPath:            f.StaticPodPath,
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
func (f Options) joinFiles(out string, kc *clientcmdapi.Config, cm *v1.ConfigMap) ([]checkpoint.AtomicFile, []string, error) {
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

// Run is `bootlet join` on a worker: kubeadm's token discovery of the
// cluster CA through Endpoint, then the cluster's kubelet configuration
// read with the token, written into Out with the bootstrap kubeconfig, all
// or nothing; what it did and the kubelet's command line go to w.
func Run(f Options, w io.Writer) error {
	if err := f.Validate(); err != nil {
		return err
	}
	out, err := filepath.Abs(f.Out)
	if err != nil {
		return err
	}
	kc, err := discovery.For(nil, f.joinConfiguration())
	if err != nil {
		return fmt.Errorf("refusing to join through %s: %w", f.Endpoint, err)
	}
	// The kubelet configuration with the verified bootstrap
	// kubeconfig (TLS to the pinned CA, the token), as kubeadm
	// join's kubelet-start phase reads it.
	_, cs, err := kubeclient.ForConfig(*kc, userAgent, 30*time.Second)
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
	for _, line := range said {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "Start the worker's kubelet (add --hostname-override=NAME and --node-ip=IP where the node's name or address is not the host's):\n  %s\n", kubeletCommandLine(out))
	fmt.Fprintf(w, "Then remove the token from this node once the kubelet has its own certificate:\n  bootlet join finish --out %s\n", out)
	return nil
}
