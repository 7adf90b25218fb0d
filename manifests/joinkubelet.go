package manifests

import (
	"bytes"
	"fmt"
	"net/url"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	certutil "k8s.io/client-go/util/cert"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
)

// A joining node's kubelet configuration comes from the cluster, as with
// kubeadm (docs/cluster.md, "Workers join"): the kube-system/kubelet-config
// ConfigMap holds the cluster-wide KubeletConfiguration under the key
// "kubelet", and kubeadm's Role and RoleBinding kubeadm:kubelet-config let
// the bootstrap token's group and system:nodes get it. `bootlet join`
// downloads it with the token and adds what is the node's own.
const (
	// KubeletConfigMap and KubeletConfigMapKey are kubeadm's: the
	// ConfigMap in kube-system and its key with the KubeletConfiguration.
	KubeletConfigMap    = kubeadmconstants.KubeletBaseConfigurationConfigMap
	KubeletConfigMapKey = kubeadmconstants.KubeletBaseConfigurationConfigMapKey
	// KubeletConfigMapClientCAKey is bootlet's own key of that ConfigMap:
	// the CA bundle of the kubelet API's authentication.x509.clientCAFile.
	// kubeadm's kubelets trust the cluster CA, whose certificate cluster-info
	// carries; bootlet's trust a CA of their own (KubeletClientCA, which
	// signs the apiserver's kubelet client and nothing else), which a worker
	// has no other way to learn. Public certificates only.
	KubeletConfigMapClientCAKey = KubeletClientCA + ".crt"
	// kubeletConfigRBACName is kubeadm's Role and RoleBinding of the
	// ConfigMap.
	kubeletConfigRBACName = kubeadmconstants.KubeletBaseConfigMapRole
)

// ClusterKubeletClientCAFile is the clientCAFile of the ConfigMap's
// configuration: where the kubelet client CA is in kubeadm's layout
// (/etc/kubernetes/pki), the default --out of `bootlet join`. A join
// replaces it with the file it writes.
var ClusterKubeletClientCAFile = filepath.Join(kubeadmconstants.KubernetesDir, PKIDir, KubeletClientCA+".crt")

// clusterKubeletConfiguration is the KubeletConfiguration of the
// kubelet-config ConfigMap: the master's (the same generator and options,
// so the cluster-wide fields cannot drift apart) without what is the
// master's own: its staticPodPath (where bootlet puts its control-plane
// pods), its containerRuntimeEndpoint and podLogsDir (set by `bootlet join`
// flags; empty means the kubelet's defaults), and its clientCAFile path
// (ClusterKubeletClientCAFile).
func clusterKubeletConfiguration(c Config) (*kubeletconfig.KubeletConfiguration, error) {
	o, err := kubeletOptions(c, kubeadmconstants.KubernetesDir)
	if err != nil {
		return nil, err
	}
	cfg, err := KubeletConfiguration(o)
	if err != nil {
		return nil, err
	}
	cfg.StaticPodPath = ""
	cfg.ContainerRuntimeEndpoint = ""
	cfg.PodLogsDir = ""
	cfg.Authentication.X509.ClientCAFile = ClusterKubeletClientCAFile
	return cfg, nil
}

// kubeletConfigObjects are the ConfigMap (the configuration, the kubelet
// client CA bundle kubeletCAPEM, certificates only) and kubeadm's Role and
// RoleBinding that let the token's group and system:nodes get it and no
// other ConfigMap.
func kubeletConfigObjects(c Config, kubeletCAPEM []byte) ([]runtime.Object, error) {
	cfg, err := clusterKubeletConfiguration(c)
	if err != nil {
		return nil, err
	}
	data, err := MarshalKubeletConfiguration(cfg)
	if err != nil {
		return nil, err
	}
	// Parsed and encoded again: whatever else the file holds (a key pasted
	// into it by hand) never reaches a ConfigMap every node can read.
	cas, err := certutil.ParseCertsPEM(kubeletCAPEM)
	if err != nil {
		return nil, fmt.Errorf("%s.crt: %w", KubeletClientCA, err)
	}
	caPEM, err := certutil.EncodeCertificates(cas...)
	if err != nil {
		return nil, err
	}
	return []runtime.Object{
		&v1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: KubeletConfigMap, Namespace: metav1.NamespaceSystem},
			Data:       map[string]string{KubeletConfigMapKey: string(data), KubeletConfigMapClientCAKey: string(caPEM)},
		},
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: kubeletConfigRBACName, Namespace: metav1.NamespaceSystem},
			Rules: []rbacv1.PolicyRule{{
				Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"},
				ResourceNames: []string{KubeletConfigMap},
			}},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: kubeletConfigRBACName, Namespace: metav1.NamespaceSystem},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: kubeletConfigRBACName},
			// kubeadm's order: the nodes, then the token's group.
			Subjects: []rbacv1.Subject{
				{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: kubeadmconstants.NodesGroup},
				{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: NodeBootstrapTokenGroup},
			},
		},
	}, nil
}

// NodeKubeletOptions are what a joining node sets in the cluster's
// KubeletConfiguration: what kubeadm takes from the node's own flags
// (its --cri-socket) or files, never from the cluster.
type NodeKubeletOptions struct {
	// ClientCAFile is where the node writes the ConfigMap's CA bundle
	// (absolute).
	ClientCAFile string
	// ContainerRuntimeEndpoint is the node's CRI socket (unix://, absolute).
	ContainerRuntimeEndpoint string
	// PodLogsDir is the node's podLogsDir; "" leaves the cluster's (none:
	// the kubelet's default, /var/log/pods).
	PodLogsDir string
	// StaticPodPath is the node's staticPodPath (absolute), where its
	// bootlet daemon hands the kubelet the pods it starts; "" none.
	StaticPodPath string
}

// Validate names each bad option.
func (o NodeKubeletOptions) Validate() error {
	if !filepath.IsAbs(o.ClientCAFile) {
		return fmt.Errorf("kubelet client CA file %q: want an absolute path", o.ClientCAFile)
	}
	if u, err := url.Parse(o.ContainerRuntimeEndpoint); err != nil || u.Scheme != "unix" || u.Host != "" || !filepath.IsAbs(u.Path) {
		return fmt.Errorf("container runtime endpoint %q: want a unix:// URL with an absolute path", o.ContainerRuntimeEndpoint)
	}
	if o.PodLogsDir != "" && !filepath.IsAbs(o.PodLogsDir) {
		return fmt.Errorf("pod logs directory %q: want an absolute path", o.PodLogsDir)
	}
	if o.StaticPodPath != "" && !filepath.IsAbs(o.StaticPodPath) {
		return fmt.Errorf("static pod path %q: want an absolute path", o.StaticPodPath)
	}
	return nil
}

// NodeKubeletConfig turns the cluster's kubelet-config ConfigMap into a
// joining node's files: its kubelet configuration with o applied, and the
// kubelet client CA bundle for o.ClientCAFile (certificates only). It
// refuses a ConfigMap without either key, a configuration that is not a
// kubelet.config.k8s.io/v1beta1 KubeletConfiguration or has a field that
// version does not know (decoded strictly, with the kubelet's own types),
// and a bundle without a certificate.
func NodeKubeletConfig(cm *v1.ConfigMap, o NodeKubeletOptions) (config, clientCA []byte, err error) {
	if err := o.Validate(); err != nil {
		return nil, nil, err
	}
	what := fmt.Sprintf("ConfigMap %s/%s", cm.Namespace, cm.Name)
	data, ok := cm.Data[KubeletConfigMapKey]
	if !ok {
		return nil, nil, fmt.Errorf("%s has no key %q (the KubeletConfiguration)", what, KubeletConfigMapKey)
	}
	caData, ok := cm.Data[KubeletConfigMapClientCAKey]
	if !ok {
		return nil, nil, fmt.Errorf("%s has no key %q (the CA of the kubelet API's client certificates)", what, KubeletConfigMapClientCAKey)
	}
	cfg, err := DecodeKubeletConfiguration([]byte(data))
	if err != nil {
		return nil, nil, fmt.Errorf("%s, key %q: %w", what, KubeletConfigMapKey, err)
	}
	cas, err := certutil.ParseCertsPEM([]byte(caData))
	if err != nil {
		return nil, nil, fmt.Errorf("%s, key %q: %w", what, KubeletConfigMapClientCAKey, err)
	}
	if clientCA, err = certutil.EncodeCertificates(cas...); err != nil {
		return nil, nil, err
	}
	cfg.Authentication.X509.ClientCAFile = o.ClientCAFile
	cfg.ContainerRuntimeEndpoint = o.ContainerRuntimeEndpoint
	if o.PodLogsDir != "" {
		cfg.PodLogsDir = o.PodLogsDir
	}
	cfg.StaticPodPath = o.StaticPodPath
	if config, err = MarshalKubeletConfiguration(cfg); err != nil {
		return nil, nil, err
	}
	return config, clientCA, nil
}

// DecodeKubeletConfiguration decodes a kubelet.config.k8s.io/v1beta1
// KubeletConfiguration strictly (an unknown or duplicate field is an
// error), without defaulting: what the file says, nothing more.
func DecodeKubeletConfiguration(data []byte) (*kubeletconfig.KubeletConfiguration, error) {
	scheme := runtime.NewScheme()
	if err := kubeletconfig.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("empty")
	}
	cfg := &kubeletconfig.KubeletConfiguration{}
	_, gvk, err := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer().Decode(data, nil, cfg)
	if err != nil {
		return nil, err
	}
	if want := kubeletconfig.SchemeGroupVersion.WithKind("KubeletConfiguration"); *gvk != want {
		return nil, fmt.Errorf("%s, want %s", gvk, want)
	}
	return cfg, nil
}
