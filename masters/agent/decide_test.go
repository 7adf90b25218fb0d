package agent

import (
	"fmt"
	"testing"

	"github.com/bootlet/bootlet/masters"
)

func TestDecide(t *testing.T) {
	tr := true
	fl := false
	demote := func(phase masters.Phase) *masters.Op {
		return &masters.Op{Kind: masters.Demote, Node: "m2", Phase: phase, MemberID: 2}
	}
	learner := &masters.Op{Kind: masters.Promote, Node: "m2", Phase: masters.PhaseLearner, MemberID: 9, InitialCluster: "m1=https://10.0.0.11:2380,m2=https://10.0.0.12:2380"}
	host := map[string]string{masters.AnnotationMemberHost: "true"}
	tests := []struct {
		name         string
		f            Facts
		annotate     map[string]bool
		withdraw     *bool
		setAside     bool
		startLearner string
	}{
		{"a master says it can host a member", Facts{Labelled: true, Stored: true}, map[string]bool{masters.AnnotationMemberHost: true}, nil, false, ""},
		{"a worker without a member says nothing", Facts{}, map[string]bool{}, nil, false, ""},
		{"steady", Facts{Labelled: true, Stored: true, Annotations: host}, map[string]bool{}, nil, false, ""},
		{"first-boot master before its label: the address stays open", Facts{Stored: true, Annotations: host}, map[string]bool{}, nil, false, ""},
		{"withdraw: the file first", Facts{Op: demote(masters.PhaseWithdraw), Stored: true, Annotations: host, HoldsAddress: true}, map[string]bool{}, &tr, false, ""},
		{"withdrawing: the address has not left", Facts{Op: demote(masters.PhaseWithdraw), Stored: true, Annotations: host, Withdrawn: true, HoldsAddress: true}, map[string]bool{}, nil, false, ""},
		{"withdrawn: said once the address left", Facts{Op: demote(masters.PhaseWithdraw), Stored: true, Annotations: host, Withdrawn: true}, map[string]bool{masters.AnnotationWithdrawn: true}, nil, false, ""},
		{"cleanup: set aside", Facts{Op: demote(masters.PhaseCleanup), Stored: true, Annotations: map[string]string{masters.AnnotationMemberHost: "true", masters.AnnotationWithdrawn: "true"}, Withdrawn: true}, map[string]bool{}, nil, true, ""},
		{"cleaned: said", Facts{Op: demote(masters.PhaseCleanup), Aside: true, Annotations: map[string]string{masters.AnnotationMemberHost: "true", masters.AnnotationWithdrawn: "true"}, Withdrawn: true}, map[string]bool{masters.AnnotationCleaned: true}, nil, false, ""},
		{"demoted and idle: nothing changes", Facts{Aside: true, Annotations: map[string]string{masters.AnnotationMemberHost: "true", masters.AnnotationWithdrawn: "true", masters.AnnotationCleaned: "true"}, Withdrawn: true}, map[string]bool{}, nil, false, ""},
		{"labelled again: back in the address, reports cleared", Facts{Labelled: true, Aside: true, Annotations: map[string]string{masters.AnnotationMemberHost: "true", masters.AnnotationWithdrawn: "true", masters.AnnotationCleaned: "true"}, Withdrawn: true},
			map[string]bool{masters.AnnotationWithdrawn: false, masters.AnnotationCleaned: false}, &fl, false, ""},
		{"its learner added: started", Facts{Labelled: true, Op: learner, Aside: true, Annotations: host}, map[string]bool{}, nil, false, learner.InitialCluster},
		{"its learner started: nothing more", Facts{Labelled: true, Op: learner, Stored: true, StoredLearner: 9, Annotations: host}, map[string]bool{}, nil, false, ""},
		{"a removed learner's member stored: set aside first", Facts{Labelled: true, Op: learner, Stored: true, StoredLearner: 7, Annotations: host}, map[string]bool{}, nil, true, ""},
		{"a first boot's member whose member etcd removed: set aside first", Facts{Labelled: true, Op: learner, Stored: true, Annotations: host}, map[string]bool{}, nil, true, ""},
		{"no learner yet: nothing", Facts{Labelled: true, Op: &masters.Op{Kind: masters.Promote, Node: "m2", Phase: masters.PhaseLearner}, Aside: true, Annotations: host}, map[string]bool{}, nil, false, ""},
		{"nothing set aside: nothing to start", Facts{Labelled: true, Op: learner}, map[string]bool{}, nil, false, ""},
	}
	for _, tt := range tests {
		d := Decide(tt.f)
		if fmt.Sprint(d.Annotate) != fmt.Sprint(tt.annotate) || fmt.Sprint(deref(d.Withdraw)) != fmt.Sprint(deref(tt.withdraw)) || d.SetAside != tt.setAside || d.StartLearner != tt.startLearner {
			t.Errorf("%s: annotate %v withdraw %v setAside %v start %q; want %v %v %v %q (%s)", tt.name, d.Annotate, deref(d.Withdraw), d.SetAside, d.StartLearner,
				tt.annotate, deref(tt.withdraw), tt.setAside, tt.startLearner, d.Why)
		}
	}
}

func deref(b *bool) string {
	if b == nil {
		return "unchanged"
	}
	return fmt.Sprint(*b)
}
