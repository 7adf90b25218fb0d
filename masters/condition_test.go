package masters

import (
	"strings"
	"testing"
	"time"
)

func TestConditions(t *testing.T) {
	m1, w1 := master("m1", "10.0.0.11"), worker("w1", "10.0.0.21")
	w1l := w1
	w1l.Labelled = true
	notReady := m1
	notReady.APIServerReady = false
	v1, v2 := voter(1, "m1", "10.0.0.11", true), voter(2, "w1", "10.0.0.21", true)
	op := &Op{Kind: Promote, Node: "w1", Phase: PhaseLearner, PeerURL: "https://10.0.0.21:2380"}
	tests := []struct {
		name   string
		f      Facts
		d      Decision
		node   string
		want   Condition
		inText string
	}{
		{"a master", Facts{Nodes: []Node{m1}, Members: []Member{v1}}, Decision{}, "m1", Condition{Status: true, Reason: ReasonMaster}, "etcd voter 1"},
		{"a master whose apiserver is not Ready", Facts{Nodes: []Node{notReady}, Members: []Member{v1}}, Decision{}, "m1", Condition{Reason: ReasonPending}, "waiting for its apiserver"},
		{"a refusal wins", Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1}}, Decision{Refusals: []Refusal{{"w1", "not promoted yet: a"}, {"w1", "b"}}}, "w1", Condition{Reason: ReasonRefused}, "not promoted yet: a; b"},
		{"the operation's node", Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1}}, Decision{Record: Record{Op: op}, Why: "promoting w1: adding its member as a learner"}, "w1", Condition{Reason: ReasonPromoting}, "promote, phase Learner: promoting w1"},
		{"another waits for the operation", Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1}}, Decision{Record: Record{Op: &Op{Kind: Demote, Node: "m2"}}}, "w1", Condition{Reason: ReasonPending}, "demote m2 goes first"},
		{"a failed promotion waits", Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1}}, Decision{Record: Record{Failures: map[string]Failure{"w1": {Reason: "its learner did not start", At: t0}}}}, "w1", Condition{Reason: ReasonPending}, "its last promotion failed at 12:00:00Z (its learner did not start)"},
		{"a member before its label", Facts{Nodes: []Node{w1}, Members: []Member{v2}}, Decision{}, "w1", Condition{Reason: ReasonUnlabelled}, "member 2 runs"},
		{"a worker", Facts{Nodes: []Node{m1, w1}, Members: []Member{v1}}, Decision{}, "w1", Condition{Reason: ReasonNotMaster}, Label},
	}
	for _, tt := range tests {
		tt.f.Now = t0.Add(time.Minute)
		got := Conditions(tt.f, tt.d)[tt.node]
		if got.Status != tt.want.Status || got.Reason != tt.want.Reason || !strings.Contains(got.Message, tt.inText) {
			t.Errorf("%s: %+v, want %v %s with %q", tt.name, got, tt.want.Status, tt.want.Reason, tt.inText)
		}
	}
}

func TestBudgets(t *testing.T) {
	for n, want := range map[int]int{0: 1, 1: 1, 2: 1, 3: 2, 5: 4} {
		if got := BudgetMinAvailable(n); got != want {
			t.Errorf("BudgetMinAvailable(%d) = %d, want %d", n, got, want)
		}
	}
	m1, m2, w1 := master("m1", "10.0.0.11"), master("m2", "10.0.0.12"), worker("w1", "10.0.0.21")
	w1.Labelled = true
	f := Facts{Nodes: []Node{m1, m2, w1}, Members: []Member{voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", false), learner(9, "w1", "10.0.0.21")}}
	if got := MasterCount(f); got != 2 {
		t.Errorf("MasterCount = %d, want 2 (a voter that does not answer counts, a learner does not)", got)
	}
	unlabelled := m2
	unlabelled.Labelled = false
	if got := MasterCount(Facts{Nodes: []Node{m1, unlabelled}, Members: []Member{voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", true)}}); got != 0 {
		t.Errorf("MasterCount with a voter whose Node is not labelled = %d, want 0 (unsettled)", got)
	}
	if got := MasterCount(Facts{Nodes: []Node{m1}}); got != 0 {
		t.Errorf("MasterCount without etcd = %d, want 0", got)
	}
}
