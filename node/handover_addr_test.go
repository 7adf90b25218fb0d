package node

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func apiserverPod(command ...string) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "kube-apiserver", Command: command}}}}
}

func TestBootstrapAPIServerAddress(t *testing.T) {
	etcd := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "etcd", Command: []string{"etcd", "--advertise-address=192.0.2.99"}}}}}
	for _, tc := range []struct {
		name string
		pods []*v1.Pod
		want string
	}{
		{"render's bootstrap apiserver", []*v1.Pod{etcd, apiserverPod("kube-apiserver", "--advertise-address=192.0.2.11", "--secure-port=6443")}, "192.0.2.11:6443"},
		{"IPv6", []*v1.Pod{apiserverPod("/usr/local/bin/kube-apiserver", "--secure-port=6443", "--advertise-address=2001:db8::11")}, "[2001:db8::11]:6443"},
		{"no apiserver", []*v1.Pod{etcd}, ""},
		{"no advertise address", []*v1.Pod{apiserverPod("kube-apiserver", "--secure-port=6443")}, ""},
		{"advertise address from the downward API", []*v1.Pod{apiserverPod("kube-apiserver", "--advertise-address=$(HOST_IP)", "--secure-port=6443")}, ""},
		{"no port", []*v1.Pod{apiserverPod("kube-apiserver", "--advertise-address=192.0.2.11")}, ""},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := bootstrapAPIServerAddress(tc.pods)
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("got %q %v, want %q", got, ok, tc.want)
			}
		})
	}
}

func TestReadManifestPods(t *testing.T) {
	dir := t.TempDir()
	pod := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-apiserver\nspec:\n  containers:\n  - name: kube-apiserver\n    command: [kube-apiserver, --advertise-address=192.0.2.11, --secure-port=6443]\n"
	for name, data := range map[string]string{"kube-apiserver.yaml": pod, "secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n", "notes.txt": pod, "broken.yaml": "{"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pods := readManifestPods(dir)
	if len(pods) != 1 {
		t.Fatalf("read %d pods", len(pods))
	}
	if got, ok := bootstrapAPIServerAddress(pods); !ok || got != "192.0.2.11:6443" {
		t.Fatalf("got %q %v", got, ok)
	}
	if readManifestPods("") != nil || readManifestPods(filepath.Join(dir, "missing")) != nil {
		t.Fatal("pods from no dir")
	}
}
