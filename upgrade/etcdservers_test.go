package upgrade

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEtcdClientURLs(t *testing.T) {
	etcd := func(name string, cmd ...string) v1.Pod {
		return v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "etcd", Command: append([]string{"etcd"}, cmd...)}}}}
	}
	pods := []v1.Pod{
		etcd("etcd-m1", "--name=m1", "--advertise-client-urls=https://10.0.0.1:2379"),
		// A member's two pods (a static pod beside its mirror's successor):
		// one URL.
		etcd("etcd-m1b", "--advertise-client-urls=https://10.0.0.1:2379"),
		etcd("etcd-m2", "--advertise-client-urls=https://10.0.0.2:2379,https://[fd00::2]:2379"),
		{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "kube-apiserver", Command: []string{"kube-apiserver", "--advertise-client-urls=https://x:1"}}}}},
		etcd("etcd-m3"),
	}
	want := []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379", "https://[fd00::2]:2379"}
	if got := EtcdClientURLs(pods); !slices.Equal(got, want) {
		t.Errorf("EtcdClientURLs = %q, want %q", got, want)
	}
}

func TestWidenAndSetEtcdServers(t *testing.T) {
	cmd := []string{"kube-apiserver", "--advertise-address=$(HOST_IP)", "--etcd-servers=https://127.0.0.1:2379", "--v=2"}
	members := []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379", "https://10.0.0.3:2379"}
	wide, changed := WidenEtcdServers(cmd, members)
	if !changed || wide[2] != "--etcd-servers=https://127.0.0.1:2379,https://10.0.0.1:2379,https://10.0.0.2:2379,https://10.0.0.3:2379" || cmd[2] != "--etcd-servers=https://127.0.0.1:2379" {
		t.Errorf("widened %q (changed %v); the original %q must not change", wide, changed, cmd)
	}
	if again, changed := WidenEtcdServers(wide, members[:2]); changed || !slices.Equal(again, wide) {
		t.Errorf("widening what names every member: %q, changed %v", again, changed)
	}
	if _, changed := WidenEtcdServers([]string{"kube-apiserver"}, members); changed {
		t.Errorf("a command without --etcd-servers was changed")
	}
	back, changed := SetEtcdServers(wide, EtcdServersOf(cmd))
	if !changed || !slices.Equal(back, cmd) {
		t.Errorf("set back: %q (changed %v), want %q", back, changed, cmd)
	}
	if _, changed := SetEtcdServers(cmd, "https://127.0.0.1:2379"); changed {
		t.Errorf("setting the value it has changed it")
	}
}
