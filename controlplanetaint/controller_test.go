package controlplanetaint

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	btypes "github.com/bootlet/bootlet/types"
)

// TestControllerFollowsWorkers: a worker joins and the master is tainted;
// it leaves and bootlet's taint goes; an administrator's taint on another
// master stays throughout.
func TestControllerFollowsWorkers(t *testing.T) {
	master := func(name string, taints ...v1.Taint) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{btypes.LabelControlPlane: ""}}, Spec: v1.NodeSpec{Taints: taints}}
	}
	cs := fake.NewClientset(master("m1"), master("m2", Taint))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); New(Config{Client: cs, Resync: 50 * time.Millisecond}).Run(ctx) }()

	tainted := func(name string) (bool, bool) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f := FromNode(n)
		return f.Tainted, f.Managed
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting: %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if tn, _ := tainted("m1"); tn {
		t.Fatal("a cluster of masters alone got tainted")
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("m1 tainted by bootlet", func() bool { tn, m := tainted("m1"); return tn && m })
	if _, m := tainted("m2"); m {
		t.Fatal("the administrator's taint on m2 was marked bootlet's")
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, "w1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("m1 untainted", func() bool { tn, _ := tainted("m1"); return !tn })
	time.Sleep(200 * time.Millisecond)
	if tn, _ := tainted("m2"); !tn {
		t.Fatal("the administrator's taint on m2 was removed")
	}
	cancel()
	<-done
}
