package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/kubernetes/fake"
	certutil "k8s.io/client-go/util/cert"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"
	"k8s.io/kubernetes/cmd/kubeadm/app/componentconfigs"
	kubeletconfiginternal "k8s.io/kubernetes/pkg/kubelet/apis/config"
)

// renderedKubeletConfigMap is the kubelet-config ConfigMap of dir's join.yaml.
func renderedKubeletConfigMap(t *testing.T, dir string) *v1.ConfigMap {
	t.Helper()
	return findObject[*v1.ConfigMap](t, readJoinObjects(t, dir), "kube-system", KubeletConfigMap)
}

// writeTemp writes data to a new file in a temporary directory.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKubeletConfigMap: the ConfigMap's configuration is one the kubelet
// loads and validates, with the master's cluster-wide settings and none of
// its own; its CA is the kubelet client CA, certificates only; kubeadm
// join's own reader takes it.
func TestKubeletConfigMap(t *testing.T) {
	dir := rendered(t)
	cm := renderedKubeletConfigMap(t, dir)
	for k, v := range cm.Data {
		if strings.Contains(v, "PRIVATE KEY") {
			t.Errorf("key %s holds a private key", k)
		}
	}
	if len(cm.Data) != 2 {
		t.Errorf("keys %v, want %s and %s", keysOf(cm.Data), KubeletConfigMapKey, KubeletConfigMapClientCAKey)
	}

	// The CA bundle is pki/kubelet-client-ca.crt.
	cas, err := certutil.ParseCertsPEM([]byte(cm.Data[KubeletConfigMapClientCAKey]))
	if err != nil {
		t.Fatal(err)
	}
	if want := readCert(t, dir, KubeletClientCA); len(cas) != 1 || !cas[0].Equal(want) {
		t.Errorf("the ConfigMap's CA is not pki/%s.crt", KubeletClientCA)
	}

	// The kubelet's loader and validation take it.
	kc := loadKubeletConfig(t, writeTemp(t, "config.yaml", []byte(cm.Data[KubeletConfigMapKey])))
	c := testConfig()
	dns, err := c.DNSServiceIP()
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []struct {
		what      string
		got, want any
	}{
		{"authentication.anonymous.enabled", kc.Authentication.Anonymous.Enabled, false},
		{"authentication.webhook.enabled", kc.Authentication.Webhook.Enabled, true},
		{"authentication.x509.clientCAFile", kc.Authentication.X509.ClientCAFile, "/etc/kubernetes/pki/kubelet-client-ca.crt"},
		{"authorization.mode", kc.Authorization.Mode, kubeletconfiginternal.KubeletAuthorizationModeWebhook},
		{"rotateCertificates", kc.RotateCertificates, true},
		{"readOnlyPort", kc.ReadOnlyPort, int32(0)},
		{"registerNode", kc.RegisterNode, true},
		{"cgroupDriver", kc.CgroupDriver, "cgroupfs"},
		{"clusterDomain", kc.ClusterDomain, c.ClusterDomain},
		{"clusterDNS", strings.Join(kc.ClusterDNS, ","), dns.String()},
		// Not the master's: a joining node's own, or the kubelet's defaults.
		{"staticPodPath", kc.StaticPodPath, ""},
		{"podLogsDir", kc.PodLogsDir, "/var/log/pods"},
		{"containerRuntimeEndpoint", kc.ContainerRuntimeEndpoint, "unix:///run/containerd/containerd.sock"},
	} {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}

	// Every other field is the master's.
	cluster, err := DecodeKubeletConfiguration([]byte(cm.Data[KubeletConfigMapKey]))
	if err != nil {
		t.Fatal(err)
	}
	masterData, err := os.ReadFile(filepath.Join(dir, KubeletConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	master, err := DecodeKubeletConfiguration(masterData)
	if err != nil {
		t.Fatal(err)
	}
	if master.StaticPodPath == "" || master.ContainerRuntimeEndpoint == "" || master.PodLogsDir == "" {
		t.Fatalf("the master's configuration lacks its own settings:\n%s", masterData)
	}
	master.StaticPodPath, master.ContainerRuntimeEndpoint, master.PodLogsDir = "", "", ""
	master.Authentication.X509.ClientCAFile = ClusterKubeletClientCAFile
	if !apiequality.Semantic.DeepEqual(master, cluster) {
		t.Errorf("the cluster's configuration differs from the master's in more than its own settings:\nmaster:\n%s\ncluster:\n%s", masterData, cm.Data[KubeletConfigMapKey])
	}

	// kubeadm join reads it (componentconfigs.FetchFromCluster, with the
	// ConfigMap in a fake cluster) into the same configuration.
	kube := fake.NewClientset(cm)
	clusterCfg := &kubeadmapi.ClusterConfiguration{}
	if err := componentconfigs.FetchFromCluster(clusterCfg, kube); err != nil {
		t.Fatalf("kubeadm's reader: %v", err)
	}
	got, ok := clusterCfg.ComponentConfigs[componentconfigs.KubeletGroup].Get().(*kubeletconfig.KubeletConfiguration)
	if !ok {
		t.Fatalf("kubeadm read no KubeletConfiguration: %+v", clusterCfg.ComponentConfigs)
	}
	got.TypeMeta = cluster.TypeMeta
	if !apiequality.Semantic.DeepEqual(got, cluster) {
		t.Errorf("kubeadm reads another configuration:\nkubeadm: %+v\nbootlet: %+v", got, cluster)
	}
}

// TestKubeletConfigMapFollowsCABundle: during a rotation of the kubelet
// client CA (pki/kubelet-client-ca.crt holding old and new), a re-render
// puts the whole bundle into join.yaml's ConfigMap, and only certificates.
func TestKubeletConfigMapFollowsCABundle(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, rendered(t), dir)
	path := filepath.Join(dir, PKIDir, KubeletClientCA+".crt")
	own, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Another CA as the second of the bundle, and a private key pasted
	// after it by mistake: the ConfigMap must not carry the key.
	other, err := os.ReadFile(filepath.Join(dir, PKIDir, FrontProxyCA+".crt"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, PKIDir, FrontProxyCA+".key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(append(append([]byte{}, own...), other...), key...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Render(testConfig(), dir); err != nil {
		t.Fatal(err)
	}
	cm := renderedKubeletConfigMap(t, dir)
	data := cm.Data[KubeletConfigMapClientCAKey]
	if strings.Contains(data, "PRIVATE KEY") {
		t.Fatal("the ConfigMap carries the private key of the bundle's file")
	}
	cas, err := certutil.ParseCertsPEM([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(cas) != 2 || !cas[0].Equal(parseCert(t, own)) || !cas[1].Equal(parseCert(t, other)) {
		t.Errorf("the ConfigMap's CA bundle has %d certificates, want pki/%s.crt's two", len(cas), KubeletClientCA)
	}
}

// TestNodeKubeletConfig: a joining node's configuration is the cluster's
// with its own CA file, CRI socket and pod logs directory, loads and
// validates with the kubelet's code, and is the master's but for what is
// each node's own.
func TestNodeKubeletConfig(t *testing.T) {
	dir := rendered(t)
	cm := renderedKubeletConfigMap(t, dir)
	out := t.TempDir()
	o := NodeKubeletOptions{
		ClientCAFile:             filepath.Join(out, PKIDir, KubeletClientCA+".crt"),
		ContainerRuntimeEndpoint: "unix:///run/worker/containerd.sock",
		PodLogsDir:               "/var/log/worker-pods",
	}
	config, ca, err := NodeKubeletConfig(cm, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(o.ClientCAFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(o.ClientCAFile, ca, 0o644); err != nil {
		t.Fatal(err)
	}
	if want, _ := os.ReadFile(filepath.Join(dir, PKIDir, KubeletClientCA+".crt")); string(ca) != string(want) {
		t.Errorf("the node's CA file is not pki/%s.crt:\n%s", KubeletClientCA, ca)
	}
	path := filepath.Join(out, KubeletConfigFile)
	if err := os.WriteFile(path, config, 0o644); err != nil {
		t.Fatal(err)
	}
	kc := loadKubeletConfig(t, path)
	if kc.Authentication.X509.ClientCAFile != o.ClientCAFile || kc.ContainerRuntimeEndpoint != o.ContainerRuntimeEndpoint ||
		kc.PodLogsDir != o.PodLogsDir || kc.StaticPodPath != "" {
		t.Errorf("the node's configuration:\n%s", config)
	}

	// The master's, with the same node-local settings, is the same.
	masterData, err := os.ReadFile(filepath.Join(dir, KubeletConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	master, err := DecodeKubeletConfiguration(masterData)
	if err != nil {
		t.Fatal(err)
	}
	node, err := DecodeKubeletConfiguration(config)
	if err != nil {
		t.Fatal(err)
	}
	master.StaticPodPath = ""
	master.ContainerRuntimeEndpoint, master.PodLogsDir, master.Authentication.X509.ClientCAFile = o.ContainerRuntimeEndpoint, o.PodLogsDir, o.ClientCAFile
	if !apiequality.Semantic.DeepEqual(master, node) {
		t.Errorf("the node's configuration differs from the master's in more than its own settings:\nmaster:\n%s\nnode:\n%s", masterData, config)
	}

	// Without a pod logs directory the cluster's (the kubelet's default)
	// stays.
	o.PodLogsDir = ""
	config, _, err = NodeKubeletConfig(cm, o)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(config), "podLogsDir") {
		t.Errorf("podLogsDir set without the option:\n%s", config)
	}
}

// TestNodeKubeletConfigRefuses: a ConfigMap or options the node cannot
// use are refused with what is wrong.
func TestNodeKubeletConfigRefuses(t *testing.T) {
	good := renderedKubeletConfigMap(t, rendered(t))
	goodOpts := NodeKubeletOptions{ClientCAFile: "/etc/kubernetes/pki/kubelet-client-ca.crt", ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock"}
	key, err := os.ReadFile(filepath.Join(rendered(t), PKIDir, KubeletClientCA+".key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		data   func(map[string]string)
		opts   func(*NodeKubeletOptions)
		wantIn string
	}{
		{name: "no configuration", data: func(d map[string]string) { delete(d, KubeletConfigMapKey) }, wantIn: `no key "kubelet"`},
		{name: "no CA", data: func(d map[string]string) { delete(d, KubeletConfigMapClientCAKey) }, wantIn: `no key "kubelet-client-ca.crt"`},
		{name: "empty configuration", data: func(d map[string]string) { d[KubeletConfigMapKey] = " \n" }, wantIn: "empty"},
		{name: "unknown field", data: func(d map[string]string) { d[KubeletConfigMapKey] += "notAField: 1\n" }, wantIn: `unknown field "notAField"`},
		{name: "duplicate field", data: func(d map[string]string) { d[KubeletConfigMapKey] += "clusterDomain: other.local\n" }, wantIn: "clusterDomain"},
		{name: "another kind", data: func(d map[string]string) {
			d[KubeletConfigMapKey] = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
		}, wantIn: "kubeproxy.config.k8s.io"},
		{name: "another version", data: func(d map[string]string) {
			d[KubeletConfigMapKey] = strings.Replace(d[KubeletConfigMapKey], "kubelet.config.k8s.io/v1beta1", "kubelet.config.k8s.io/v1", 1)
		}, wantIn: "kubelet.config.k8s.io/v1"},
		{name: "CA not PEM", data: func(d map[string]string) { d[KubeletConfigMapClientCAKey] = "not a certificate" }, wantIn: `key "kubelet-client-ca.crt"`},
		{name: "CA a key only", data: func(d map[string]string) { d[KubeletConfigMapClientCAKey] = string(key) }, wantIn: `key "kubelet-client-ca.crt"`},
		{name: "relative CA file", opts: func(o *NodeKubeletOptions) { o.ClientCAFile = "pki/kubelet-client-ca.crt" }, wantIn: "absolute"},
		{name: "TCP runtime endpoint", opts: func(o *NodeKubeletOptions) { o.ContainerRuntimeEndpoint = "tcp://127.0.0.1:1234" }, wantIn: "unix://"},
		{name: "relative runtime socket", opts: func(o *NodeKubeletOptions) { o.ContainerRuntimeEndpoint = "unix://run/c.sock" }, wantIn: "unix://"},
		{name: "relative pod logs dir", opts: func(o *NodeKubeletOptions) { o.PodLogsDir = "logs" }, wantIn: "pod logs directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cm := good.DeepCopy()
			o := goodOpts
			if c.data != nil {
				c.data(cm.Data)
			}
			if c.opts != nil {
				c.opts(&o)
			}
			config, ca, err := NodeKubeletConfig(cm, o)
			if err == nil {
				t.Fatalf("accepted:\n%s", config)
			}
			if config != nil || ca != nil {
				t.Error("returned content with the error")
			}
			if !strings.Contains(err.Error(), c.wantIn) {
				t.Errorf("error %q does not say %q", err, c.wantIn)
			}
		})
	}
	if _, _, err := NodeKubeletConfig(good, goodOpts); err != nil {
		t.Fatal(err)
	}
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
