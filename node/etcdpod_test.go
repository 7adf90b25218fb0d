package node

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/podapi"
	"github.com/bootlet/bootlet/runner"
	btypes "github.com/bootlet/bootlet/types"
)

// etcdImage is the image the member's stored pod runs, as the node
// agent reads it.
func etcdImage(e etcdPod) (string, error) {
	p, err := e.MemberPod()
	if err != nil {
		return "", err
	}
	return p.Spec.Containers[0].Image, nil
}

// newEtcdPod is an empty store of m1 and the etcd step's view of it.
func newEtcdPod(t *testing.T) (*podapi.Registry, etcdPod) {
	t.Helper()
	store, err := checkpoint.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := podapi.NewRegistry("m1", store)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetRuntime(&runner.RuntimeGate{})
	return reg, etcdPod{reg}
}

// The etcd step's write: the stored etcd pod's image changes, nothing else
// of it, and a store without an etcd pod says so.
func TestEtcdPodImage(t *testing.T) {
	reg, e := newEtcdPod(t)
	if _, err := etcdImage(e); err == nil {
		t.Errorf("an empty store gave an etcd image")
	}
	in := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: metav1.NamespaceSystem},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.8-0", Command: []string{"etcd"}}}}}
	created, err := reg.CreatePod(in, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := etcdImage(e); err != nil || got != "registry.k8s.io/etcd:3.6.8-0" {
		t.Fatalf("the member's image = %q, %v", got, err)
	}
	if err := e.SetEtcdImage("registry.k8s.io/etcd:3.7.0-0"); err != nil {
		t.Fatal(err)
	}
	p, err := reg.GetPod(metav1.NamespaceSystem, "etcd")
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Spec.Containers[0]; c.Image != "registry.k8s.io/etcd:3.7.0-0" || len(c.Command) != 1 || p.UID != created.UID {
		t.Errorf("after SetEtcdImage: %+v, UID %s (was %s)", c, p.UID, created.UID)
	}
}

// A one-member step's helper pods: stored beside the member's, never
// taken for it, and only a helper's pod is created or deleted through
// them.
func TestEtcdHelperPods(t *testing.T) {
	reg, e := newEtcdPod(t)
	mk := func(name string, labels map[string]string, image string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, Labels: labels},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "etcd", Image: image, Command: []string{"etcd"}}}}}
	}
	helper := mk("etcd-upgrade-helper-1", map[string]string{btypes.LabelEtcdUpgradeHelper: "m1-upgrade-helper-1"}, "registry.k8s.io/etcd:3.6.8-0")
	if err := e.CreateHelper(helper); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateHelper(mk("etcd-other", nil, "x")); err == nil {
		t.Errorf("a pod with no helper label was created as a helper")
	}
	if _, err := reg.CreatePod(mk("etcd", nil, "registry.k8s.io/etcd:3.7.0-0"), false); err != nil {
		t.Fatal(err)
	}
	if got, err := etcdImage(e); err != nil || got != "registry.k8s.io/etcd:3.7.0-0" {
		t.Errorf("the member's image = %q, %v: the helper was taken for the member", got, err)
	}
	if hp, err := e.HelperPods(); err != nil || len(hp) != 1 || hp["etcd-upgrade-helper-1"] == nil {
		t.Errorf("HelperPods = %v, %v", hp, err)
	}
	if err := e.DeleteHelper("etcd"); err == nil {
		t.Errorf("the member's pod was deleted as a helper")
	}
	if err := e.DeleteHelper("etcd-upgrade-helper-1"); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteHelper("etcd-upgrade-helper-1"); err != nil {
		t.Errorf("deleting a helper already gone: %v", err)
	}
	if _, err := reg.GetPod(metav1.NamespaceSystem, "etcd"); err != nil {
		t.Errorf("the member's pod: %v", err)
	}
}
