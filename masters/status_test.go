package masters

import (
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStatusRows(t *testing.T) {
	m1, m2 := master("m1", "10.0.0.11"), master("m2", "10.0.0.12")
	m2.APIServerReady = false
	w1, w2 := worker("w1", "10.0.0.21"), worker("w2", "10.0.0.22")
	w2.Ready = false
	members := []Member{voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", false), learner(9, "", "10.0.0.21"), voter(3, "m3", "10.0.0.13", false)}
	got := StatusRows([]Node{w2, m2, w1, m1}, members, 1)
	var lines []string
	for _, r := range got {
		lines = append(lines, fmt.Sprintf("%s|%s|%s|%s|%s|%s", r.Node, r.Role, r.Ready, r.Member, r.Etcd, r.APIServer))
	}
	want := []string{
		"m1|master|Ready|1|voter, leader|Ready",
		"m2|master|Ready|2|voter, not answering|not Ready",
		"w1|worker|Ready|9|learner, not started|-",
		"w2|worker|NotReady|-|-|-",
		"m3|-|-|3|voter, not answering, no Node|-",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

func TestDecideRemoval(t *testing.T) {
	m1, m2 := master("m1", "10.0.0.11"), master("m2", "10.0.0.12")
	tests := []struct {
		name    string
		f       Facts
		r       Removal
		id      uint64
		refusal string
	}{
		{"a dead master's member", Facts{Nodes: []Node{m1, m2}, Members: []Member{voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", true), voter(3, "m3", "10.0.0.13", false)}}, Removal{Name: "m3"}, 3, ""},
		{"no such member", Facts{Nodes: []Node{m1}, Members: []Member{voter(1, "m1", "10.0.0.11", true)}}, Removal{Name: "m9"}, 0, "etcd has no member of that name"},
		{"etcd does not answer", Facts{Nodes: []Node{m1}, EtcdErr: fmt.Errorf("refused")}, Removal{Name: "m3"}, 0, "no etcd member answers (refused)"},
		{"an upgrade under way does not matter to a removal", Facts{Nodes: []Node{m1, m2}, UpgradeUnderway: true, Members: []Member{voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", true), voter(3, "m3", "10.0.0.13", false)}}, Removal{Name: "m3"}, 3, ""},
		{"one of two down: no quorum to commit the removal, even forced", Facts{Nodes: []Node{m1}, Members: []Member{voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", false)}}, Removal{Name: "m2", Force: true}, 0, "etcd has no quorum (1 of 2 voters answer)"},
		{"two of three down: no quorum, even forced", Facts{Nodes: []Node{m1}, Members: []Member{voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", false), voter(3, "m3", "10.0.0.13", false)}}, Removal{Name: "m3", Force: true}, 0, "etcd has no quorum (1 of 3 voters answer)"},
		{"an answering member, its Node gone, another down: not without force", Facts{Nodes: []Node{m1}, Members: []Member{voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", false), voter(3, "m3", "10.0.0.13", true)}}, Removal{Name: "m3"}, 0, "its member still answers"},
		{"an answering member, its Node gone, another down: forced, etcd would still refuse it", Facts{Nodes: []Node{m1}, Members: []Member{voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", false), voter(3, "m3", "10.0.0.13", true)}}, Removal{Name: "m3", Force: true}, 0, "fewer than their quorum of 2 (etcd refuses it)"},
		{"an answering member, its Node gone, the others up: forced, it goes", Facts{Nodes: []Node{m1, m2}, Members: []Member{voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", true), voter(3, "m3", "10.0.0.13", true)}}, Removal{Name: "m3", Force: true}, 3, ""},
		{"a labelled, Ready master whose member restarts is still live", Facts{Nodes: []Node{m1, m2}, Members: []Member{voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", false), voter(3, "m3", "10.0.0.13", true)}}, Removal{Name: "m2"}, 0, "it is a live master"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			act, refusals := DecideRemoval(tc.f, tc.r)
			if act.MemberID != tc.id || (tc.id != 0 && act.Kind != RemoveMember) {
				t.Errorf("act %+v, want removal of %x", act, tc.id)
			}
			var why []string
			for _, r := range refusals {
				why = append(why, r.Reason)
			}
			if got := strings.Join(why, "; "); (tc.refusal == "") != (got == "") || !strings.Contains(got, tc.refusal) {
				t.Errorf("refusals %q, want %q", got, tc.refusal)
			}
		})
	}
}

func TestNodeOf(t *testing.T) {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", UID: "u1", Labels: map[string]string{Label: ""},
		// Only "true" is a report: an empty or other value says nothing.
		Annotations: map[string]string{AnnotationMemberHost: "true", AnnotationWithdrawn: "", AnnotationCleaned: "yes"}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			Addresses: []v1.NodeAddress{{Type: v1.NodeHostName, Address: "w1"}, {Type: v1.NodeInternalIP, Address: "10.0.0.21"}}}}
	pod := func(node, container string, ready bool) v1.Pod {
		st := v1.ConditionFalse
		if ready {
			st = v1.ConditionTrue
		}
		return v1.Pod{Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: container}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: st}}}}
	}
	deleted := pod("w1", "kube-scheduler", true)
	deleted.DeletionTimestamp = &metav1.Time{}
	got := NodeOf(n, []v1.Pod{pod("w1", "kube-apiserver", false), pod("w1", "kube-apiserver", true), pod("w1", "kube-controller-manager", true),
		pod("w1", "coredns", true), pod("m1", "kube-scheduler", true), deleted})
	// The deleted scheduler counts until it is gone.
	want := Node{Name: "w1", UID: "u1", Labelled: true, Ready: true, Address: "10.0.0.21", ControlPlanePods: 4, APIServerReady: true, MemberHost: true}
	if got != want {
		t.Errorf("NodeOf: %+v, want %+v", got, want)
	}
	leaving := pod("w1", "kube-apiserver", true)
	leaving.DeletionTimestamp = &metav1.Time{}
	if got := NodeOf(n, nil); got.CanLead {
		t.Errorf("a Node without %s can lead", LabelLeader)
	}
	n.Labels[LabelLeader] = ""
	if got := NodeOf(n, nil); !got.CanLead {
		t.Errorf("a Node with %s cannot lead", LabelLeader)
	}
	delete(n.Labels, LabelLeader)
	if got := NodeOf(n, []v1.Pod{leaving}); got.APIServerReady || got.ControlPlanePods != 1 {
		t.Errorf("a deleted Ready apiserver: %+v, want one pod and not Ready", got)
	}
	if got.PeerURL() != "https://10.0.0.21:2380" {
		t.Errorf("PeerURL %s", got.PeerURL())
	}
}
