package join

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	kubeconfigutil "k8s.io/kubernetes/cmd/kubeadm/app/util/kubeconfig"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/manifests"
)

// testKubeletConfigMap is a kubelet-config ConfigMap as render writes it:
// a configuration of the shared generator without node-local settings,
// and a CA.
func testKubeletConfigMap(t *testing.T) (*v1.ConfigMap, []byte) {
	t.Helper()
	cfg, err := manifests.KubeletConfiguration(manifests.KubeletOptions{StaticPodPath: "/m", ContainerRuntimeEndpoint: "unix:///run/c.sock", PodLogsDir: "/l",
		Port: manifests.DefaultKubeletPort, HealthzPort: manifests.DefaultKubeletHealthzPort, ClientCAFile: manifests.ClusterKubeletClientCAFile,
		ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	cfg.StaticPodPath, cfg.ContainerRuntimeEndpoint, cfg.PodLogsDir = "", "", ""
	data, err := manifests.MarshalKubeletConfiguration(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ca, _, err := certutil.GenerateSelfSignedCertKey("kubelet-client-ca", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: manifests.KubeletConfigMap, Namespace: "kube-system"},
		Data:       map[string]string{manifests.KubeletConfigMapKey: string(data), manifests.KubeletConfigMapClientCAKey: string(ca)},
	}, ca
}

// TestFetchKubeletConfigMap: the ConfigMap when the token may read it; a
// missing one, or one the token may not read (an older cluster: neither
// the ConfigMap nor its Role), says how to create it.
func TestFetchKubeletConfigMap(t *testing.T) {
	cm, _ := testKubeletConfigMap(t)
	got, err := fetchKubeletConfigMap(fake.NewClientset(cm))
	if err != nil || got.Data[manifests.KubeletConfigMapKey] != cm.Data[manifests.KubeletConfigMapKey] {
		t.Fatalf("fetch: %v", err)
	}
	forbidden := fake.NewClientset(cm)
	forbidden.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, manifests.KubeletConfigMap, errors.New("RBAC: access denied"))
	})
	failing := fake.NewClientset(cm)
	failing.PrependReactor("get", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is down")
	})
	for _, c := range []struct {
		name string
		cs   *fake.Clientset
		want []string
	}{
		{"missing", fake.NewClientset(), []string{"has no ConfigMap kube-system/kubelet-config", "bootlet render", "kubectl create -f ASSET_DIR/self-hosted/join.yaml"}},
		{"forbidden", forbidden, []string{"may not read ConfigMap kube-system/kubelet-config", "access denied", "kubectl create -f ASSET_DIR/self-hosted/join.yaml"}},
		{"unavailable", failing, []string{"reading ConfigMap kube-system/kubelet-config", "etcd is down"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := fetchKubeletConfigMap(c.cs)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestJoinFiles: the CA, the configuration (the node's CA file and CRI
// socket) and the bootstrap kubeconfig, with their modes, the kubeconfig
// put in place last; what is said of them names no secret.
func TestJoinFiles(t *testing.T) {
	cm, ca := testKubeletConfigMap(t)
	clusterCA, _, err := certutil.GenerateSelfSignedCertKey("kubernetes", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const token = "abcdef.0123456789abcdef"
	kc := kubeconfigutil.CreateWithToken("https://192.0.2.10:6443", "kubernetes", manifests.BootstrapTokenUser, clusterCA, token)
	f := Options{Endpoint: "192.0.2.10:6443", Token: token, CACertHashes: []string{testHash}, Out: "unused", Timeout: time.Minute,
		CRISocket: "unix:///run/worker/containerd.sock", PodLogsDir: "/var/log/worker-pods", StaticPodPath: "/etc/kubernetes/manifests"}
	out := t.TempDir()
	files, said, err := f.joinFiles(out, kc, cm)
	if err != nil {
		t.Fatal(err)
	}
	caPath := filepath.Join(out, "pki", "kubelet-client-ca.crt")
	want := []struct {
		path string
		mode os.FileMode
	}{{caPath, 0o644}, {filepath.Join(out, "kubelet-config.yaml"), 0o644}, {filepath.Join(out, "bootstrap-kubelet.conf"), 0o600}}
	if len(files) != len(want) {
		t.Fatalf("%d files, want %d", len(files), len(want))
	}
	for i, w := range want {
		if files[i].Path != w.path || files[i].Mode != w.mode {
			t.Errorf("file %d: %s %o, want %s %o", i, files[i].Path, files[i].Mode, w.path, w.mode)
		}
	}
	if string(files[0].Data) != string(ca) {
		t.Errorf("the CA file is not the ConfigMap's CA:\n%s", files[0].Data)
	}
	cfg, err := manifests.DecodeKubeletConfiguration(files[1].Data)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Authentication.X509.ClientCAFile != caPath || cfg.ContainerRuntimeEndpoint != f.CRISocket || cfg.PodLogsDir != f.PodLogsDir ||
		cfg.StaticPodPath != f.StaticPodPath || cfg.ClusterDomain != "cluster.local" {
		t.Errorf("the node's configuration:\n%s", files[1].Data)
	}
	got, err := clientcmd.Load(files[2].Data)
	if err != nil {
		t.Fatal(err)
	}
	if ctx := got.Contexts[got.CurrentContext]; ctx == nil || got.AuthInfos[ctx.AuthInfo].Token != token || got.Clusters[ctx.Cluster].Server != "https://192.0.2.10:6443" {
		t.Errorf("the bootstrap kubeconfig: %+v", got)
	}
	for _, line := range said {
		if strings.Contains(line, "0123456789abcdef") {
			t.Errorf("says the token's secret: %s", line)
		}
	}
	if len(said) != 3 || !strings.Contains(said[0], caPath) || !strings.Contains(said[1], "unix:///run/worker/containerd.sock") || !strings.Contains(said[2], "https://192.0.2.10:6443") {
		t.Errorf("says %q", said)
	}

	// Written, the kubelet's files are what joinFiles made.
	if err := checkpoint.WriteFilesAtomic(files); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		fi, err := os.Stat(w.path)
		if err != nil || fi.Mode().Perm() != w.mode {
			t.Errorf("%s: %v %v, want mode %o", w.path, fi, err, w.mode)
		}
	}

	// A ConfigMap the node cannot use: no files.
	bad := cm.DeepCopy()
	delete(bad.Data, manifests.KubeletConfigMapClientCAKey)
	if files, _, err := f.joinFiles(out, kc, bad); err == nil || files != nil {
		t.Errorf("a ConfigMap without the CA: %v, %d files", err, len(files))
	}
}

func TestKubeletCommandLine(t *testing.T) {
	want := "kubelet --config=/etc/kubernetes/kubelet-config.yaml --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
	if got := kubeletCommandLine("/etc/kubernetes"); got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
