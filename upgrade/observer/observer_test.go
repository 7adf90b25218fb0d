package observer

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
)

func readyPod(name, node, container, image string, ready bool) *v1.Pod {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: container, Image: image}}},
		Status:     v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: st}}},
	}
}

func TestEtcdFromPods(t *testing.T) {
	img := "registry.k8s.io/etcd:3.6.8-0"
	tests := []struct {
		name       string
		ready      []bool
		wantLeader bool
	}{
		{"one member, ready", []bool{true}, true},
		{"one member, not ready", []bool{false}, false},
		{"three, two ready", []bool{true, true, false}, true},
		{"three, one ready", []bool{true, false, false}, false},
		{"none", nil, false},
	}
	// Two pods on one node are one member; a finished pod is none.
	done := readyPod("etcd-old", "a", "etcd", "registry.k8s.io/etcd:3.5.0-0", false)
	done.Status.Phase = v1.PodSucceeded
	members, leader := EtcdFromPods([]v1.Pod{*readyPod("etcd-a", "a", "etcd", img, false), *readyPod("etcd-a2", "a", "etcd", "registry.k8s.io/etcd:3.7.0-0", true), *done})
	if len(members) != 1 || !members[0].Healthy || members[0].Version != "3.6.8" || !leader {
		t.Errorf("two pods on a node: %+v, leader %v", members, leader)
	}
	// A mirror pod whose static pod moved keeps its old spec while the
	// container runs the new image; a replaced container runs the old one
	// until it is replaced: either way the member counts at the older.
	for _, c := range []struct{ spec, runs, want string }{
		{"registry.k8s.io/etcd:3.6.8-0", "registry.k8s.io/etcd:3.7.0-0", "3.6.8"},
		{"registry.k8s.io/etcd:3.7.0-0", "registry.k8s.io/etcd:3.6.8-0", "3.6.8"},
		{"registry.k8s.io/etcd:3.7.0-0", "registry.k8s.io/etcd:3.7.0-0", "3.7.0"},
		{"registry.k8s.io/etcd:3.7.0-0", "sha256:0123", "3.7.0"},
	} {
		p := readyPod("etcd-a", "a", "etcd", c.spec, true)
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "etcd", Image: c.runs, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
		if members, _ := EtcdFromPods([]v1.Pod{*p}); len(members) != 1 || members[0].Version != c.want {
			t.Errorf("spec %s, running %s: %+v, want version %s", c.spec, c.runs, members, c.want)
		}
	}
	for _, tt := range tests {
		var pods []v1.Pod
		for i, r := range tt.ready {
			pods = append(pods, *readyPod("etcd", string(rune('a'+i)), "etcd", img, r))
		}
		members, leader := EtcdFromPods(pods)
		if len(members) != len(tt.ready) || leader != tt.wantLeader {
			t.Errorf("%s: %d members, leader %v; want %d, %v", tt.name, len(members), leader, len(tt.ready), tt.wantLeader)
		}
		for _, m := range members {
			if m.Version != "3.6.8" {
				t.Errorf("%s: member %s version %q", tt.name, m.Name, m.Version)
			}
		}
	}
}

func TestPlanReport(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m1", Labels: map[string]string{btypes.LabelControlPlane: ""}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}, NodeInfo: v1.NodeSystemInfo{KubeletVersion: "v1.36.3"}}}
	cs := fake.NewClientset(node,
		readyPod("etcd-m1", "m1", "etcd", "registry.k8s.io/etcd:3.6.8-0", true),
		readyPod("kube-apiserver-x", "m1", "kube-apiserver", "registry.k8s.io/kube-apiserver:v1.36.3", true),
	)
	r, err := PlanReport(context.Background(), cs, "v1.37.2", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Steps) != 3 { // etcd, apiserver, kubelet
		t.Errorf("steps %v", r.Steps)
	}
	var got []string
	for _, ref := range r.Refusals {
		got = append(got, ref.Reason)
	}
	if strings.Join(got, ",") != upgrade.ReasonImagesMissing {
		t.Errorf("refusals %v, want the images only", r.Refusals)
	}
	if _, err := PlanReport(context.Background(), cs, "v1.99.0", true); err == nil || !strings.Contains(err.Error(), "v1.37.2") {
		t.Errorf("an unknown target: %v", err)
	}
}

// A helper of a one-member step is a member of its own, named by its
// etcd --name, and no version of its node's: the node's member keeps its
// own version, and a quorum counts the helpers.
func TestEtcdFromPodsHelpers(t *testing.T) {
	member := readyPod("etcd-a", "a", "etcd", "registry.k8s.io/etcd:3.7.0-0", false)
	pods := []v1.Pod{*member}
	for _, name := range []string{"a-upgrade-helper-1", "a-upgrade-helper-2"} {
		h := readyPod("etcd-upgrade-"+name, "a", "etcd", "registry.k8s.io/etcd:3.6.8-0", true)
		h.Labels = map[string]string{btypes.LabelEtcdUpgradeHelper: name}
		pods = append(pods, *h)
	}
	members, leader := EtcdFromPods(pods)
	if len(members) != 3 || members[0] != (upgrade.EtcdMember{Name: "a", Version: "3.7.0"}) ||
		members[1] != (upgrade.EtcdMember{Name: "a-upgrade-helper-1", Version: "3.6.8", Healthy: true, Helper: true}) || !leader {
		t.Errorf("a member restarting beside two helpers: %+v, leader %v (two of three healthy)", members, leader)
	}
	c := upgrade.Observe(upgrade.Observed{Nodes: []v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}, Pods: pods, EtcdMembers: members}, upgrade.Versions{})
	if got := c.Nodes[0].Running[upgrade.Etcd]; got != "3.7.0" {
		t.Errorf("node a runs etcd %s, want its member's 3.7.0 (the helpers are none of its)", got)
	}
	if c.EtcdHelpersNeeded() != 2 || len(c.EtcdHelpers()) != 2 {
		t.Errorf("helpers needed %d, helpers %+v", c.EtcdHelpersNeeded(), c.EtcdHelpers())
	}
}
