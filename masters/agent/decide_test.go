package agent

import (
	"fmt"
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootlet/bootlet/masters"
	btypes "github.com/bootlet/bootlet/types"
)

func TestDecide(t *testing.T) {
	tr := true
	fl := false
	demote := func(phase masters.Phase) *masters.Op {
		return &masters.Op{Kind: masters.Demote, Node: "m2", Phase: phase, MemberID: 2}
	}
	learner := &masters.Op{Kind: masters.Promote, Node: "m2", Phase: masters.PhaseLearner, MemberID: 9, InitialCluster: "m1=https://10.0.0.11:2380,m2=https://10.0.0.12:2380"}
	host := map[string]string{masters.AnnotationMemberHost: "true"}
	ip := netip.MustParseAddr("10.0.0.21")
	tests := []struct {
		name         string
		f            Facts
		annotate     map[string]bool
		withdraw     *bool
		setAside     bool
		startLearner string
		prepare      bool
	}{
		{"a master says it can host a member", Facts{Labelled: true, Stored: true}, map[string]bool{masters.AnnotationMemberHost: true}, nil, false, "", false},
		{"a worker without a member says nothing", Facts{}, map[string]bool{}, nil, false, "", false},
		{"steady", Facts{Labelled: true, Stored: true, Annotations: host}, map[string]bool{}, nil, false, "", false},
		{"first-boot master before its label: the address stays open", Facts{Stored: true, Annotations: host}, map[string]bool{}, nil, false, "", false},
		{"withdraw: the file first", Facts{Op: demote(masters.PhaseWithdraw), Stored: true, Annotations: host, HoldsAddress: true}, map[string]bool{}, &tr, false, "", false},
		{"withdrawing: the address has not left", Facts{Op: demote(masters.PhaseWithdraw), Stored: true, Annotations: host, Withdrawn: true, HoldsAddress: true}, map[string]bool{}, nil, false, "", false},
		{"withdrawn: said once the address left", Facts{Op: demote(masters.PhaseWithdraw), Stored: true, Annotations: host, Withdrawn: true}, map[string]bool{masters.AnnotationWithdrawn: true}, nil, false, "", false},
		{"cleanup: set aside", Facts{Op: demote(masters.PhaseCleanup), Stored: true, Annotations: map[string]string{masters.AnnotationMemberHost: "true", masters.AnnotationWithdrawn: "true"}, Withdrawn: true}, map[string]bool{}, nil, true, "", false},
		{"cleaned: said", Facts{Op: demote(masters.PhaseCleanup), Aside: true, Annotations: map[string]string{masters.AnnotationMemberHost: "true", masters.AnnotationWithdrawn: "true"}, Withdrawn: true}, map[string]bool{masters.AnnotationCleaned: true}, nil, false, "", false},
		{"demoted and idle: nothing changes", Facts{Aside: true, Annotations: map[string]string{masters.AnnotationMemberHost: "true", masters.AnnotationWithdrawn: "true", masters.AnnotationCleaned: "true"}, Withdrawn: true}, map[string]bool{}, nil, false, "", false},
		{"labelled again: back in the address, reports cleared", Facts{Labelled: true, Aside: true, Annotations: map[string]string{masters.AnnotationMemberHost: "true", masters.AnnotationWithdrawn: "true", masters.AnnotationCleaned: "true"}, Withdrawn: true},
			map[string]bool{masters.AnnotationWithdrawn: false, masters.AnnotationCleaned: false}, &fl, false, "", false},
		{"its learner added: started", Facts{Labelled: true, Op: learner, Aside: true, Annotations: host}, map[string]bool{}, nil, false, learner.InitialCluster, false},
		{"its learner started: nothing more", Facts{Labelled: true, Op: learner, Stored: true, StoredLearner: 9, Annotations: host}, map[string]bool{}, nil, false, "", false},
		{"a removed learner's member stored: set aside first", Facts{Labelled: true, Op: learner, Stored: true, StoredLearner: 7, Annotations: host}, map[string]bool{}, nil, true, "", false},
		{"a first boot's member whose member etcd removed: set aside first", Facts{Labelled: true, Op: learner, Stored: true, Annotations: host}, map[string]bool{}, nil, true, "", false},
		{"no learner yet: nothing", Facts{Labelled: true, Op: &masters.Op{Kind: masters.Promote, Node: "m2", Phase: masters.PhaseLearner}, Aside: true, Annotations: host}, map[string]bool{}, nil, false, "", false},
		{"nothing set aside: nothing to start, a pod to prepare", Facts{Labelled: true, Op: learner, InternalIP: ip}, map[string]bool{}, nil, false, "", true},
		{"a labelled worker: its member's pod prepared", Facts{Labelled: true, InternalIP: ip}, map[string]bool{}, nil, false, "", true},
		{"a labelled worker with no address yet: nothing to prepare with", Facts{Labelled: true}, map[string]bool{}, nil, false, "", false},
		{"a labelled worker, prepared: it says it can host a member", Facts{Labelled: true, Aside: true}, map[string]bool{masters.AnnotationMemberHost: true}, nil, false, "", false},
		{"an unlabelled worker prepares nothing", Facts{Annotations: map[string]string{}}, map[string]bool{}, nil, false, "", false},
		{"a demoted master with its member aside prepares nothing", Facts{Aside: true, Op: demote(masters.PhaseCleanup), Annotations: map[string]string{masters.AnnotationMemberHost: "true", masters.AnnotationWithdrawn: "true"}, Withdrawn: true}, map[string]bool{masters.AnnotationCleaned: true}, nil, false, "", false},
	}
	for _, tt := range tests {
		d := Decide(tt.f)
		if fmt.Sprint(d.Annotate) != fmt.Sprint(tt.annotate) || fmt.Sprint(deref(d.Withdraw)) != fmt.Sprint(deref(tt.withdraw)) || d.SetAside != tt.setAside || d.StartLearner != tt.startLearner || d.Prepare != tt.prepare {
			t.Errorf("%s: annotate %v withdraw %v setAside %v start %q prepare %v; want %v %v %v %q %v (%s)", tt.name, d.Annotate, deref(d.Withdraw), d.SetAside, d.StartLearner, d.Prepare,
				tt.annotate, deref(tt.withdraw), tt.setAside, tt.startLearner, tt.prepare, d.Why)
		}
	}
}

func deref(b *bool) string {
	if b == nil {
		return "unchanged"
	}
	return fmt.Sprint(*b)
}

func TestTemplateOf(t *testing.T) {
	pod := func(name, node string, mirror, ready bool, labels map[string]string) v1.Pod {
		p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{}}, Spec: v1.PodSpec{NodeName: node}}
		if mirror {
			p.Annotations[v1.MirrorPodAnnotationKey] = "hash"
		}
		status := v1.ConditionFalse
		if ready {
			status = v1.ConditionTrue
		}
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: status}}
		return p
	}
	helper := map[string]string{btypes.LabelEtcdUpgradeHelper: "m1-upgrade-helper-1"}
	tests := []struct {
		name string
		pods []v1.Pod
		want string
	}{
		{"none", nil, ""},
		{"another master's, first by name", []v1.Pod{pod("etcd-m2", "m2", true, true, nil), pod("etcd-m1", "m1", true, true, nil)}, "etcd-m1"},
		{"not its own", []v1.Pod{pod("etcd-w1", "w1", true, true, nil)}, ""},
		{"not one that is not Ready", []v1.Pod{pod("etcd-m1", "m1", true, false, nil), pod("etcd-m2", "m2", true, true, nil)}, "etcd-m2"},
		{"not a pod the apiserver schedules (no mirror)", []v1.Pod{pod("etcd-x", "m1", false, true, nil)}, ""},
		{"not an upgrade helper", []v1.Pod{pod("etcd-upgrade-helper-1-m1", "m1", true, true, helper)}, ""},
	}
	for _, tt := range tests {
		got := TemplateOf(tt.pods, "w1")
		if name := func() string {
			if got == nil {
				return ""
			}
			return got.Name
		}(); name != tt.want {
			t.Errorf("%s: TemplateOf = %q; want %q", tt.name, name, tt.want)
		}
	}
}

// A daemon that can lead labels its Node once; one that cannot never does,
// whatever else the round decides.
func TestDecideLeaderLabel(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    Facts
		want bool
	}{
		{"a first-boot master's daemon, not labelled yet", Facts{Labelled: true, Stored: true, CanLead: true}, true},
		{"labelled already", Facts{Labelled: true, Stored: true, CanLead: true, LeaderLabelled: true}, false},
		{"a demoted first-boot master keeps saying so", Facts{Aside: true, CanLead: true}, true},
		{"a promoted worker's daemon", Facts{Labelled: true, Aside: true}, false},
		{"a promoted worker whose Node someone labelled: left alone", Facts{Labelled: true, Aside: true, LeaderLabelled: true}, false},
	} {
		if got := Decide(tc.f).LabelLeader; got != tc.want {
			t.Errorf("%s: LabelLeader %v, want %v", tc.name, got, tc.want)
		}
	}
}
