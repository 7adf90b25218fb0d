package upgrade

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestObserveGateNamesUnscheduled: a step whose new pods no node takes
// says so, with the scheduler's reason, rather than only that an old pod
// still runs.
func TestObserveGateNamesUnscheduled(t *testing.T) {
	step := Step{Component: CoreDNS, From: "v1.14.2", To: "v1.14.6"}
	old := pod("coredns-old", "m1", map[string]string{"coredns": "registry.k8s.io/coredns/coredns:v1.14.2"}, map[string]string{"coredns": "registry.k8s.io/coredns/coredns:v1.14.2"})
	old.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
	pending := func(name, image, reason, message string) v1.Pod {
		p := pod(name, "", map[string]string{"coredns": image}, nil)
		p.Status.Phase = v1.PodPending
		if reason != "" {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse, Reason: reason, Message: message}}
		}
		return p
	}
	const taint = "0/1 nodes are available: 1 node(s) had untolerated taint(s)."
	for _, tc := range []struct {
		name string
		pods []v1.Pod
		want []string // substrings of Why, in order; nil: passed
	}{
		{"the new pod unscheduled beside the old", []v1.Pod{old, pending("coredns-new", "registry.k8s.io/coredns/coredns:v1.14.6", "Unschedulable", taint)},
			[]string{"pod coredns-old runs v1.14.2", "pod coredns-new is not scheduled: Unschedulable: " + taint}},
		{"only unscheduled pods", []v1.Pod{pending("coredns-new", "registry.k8s.io/coredns/coredns:v1.14.6", "Unschedulable", taint)},
			[]string{"pod coredns-new is not scheduled: Unschedulable"}},
		{"not yet looked at by the scheduler", []v1.Pod{pending("coredns-new", "registry.k8s.io/coredns/coredns:v1.14.6", "", "")},
			[]string{"pod coredns-new is not scheduled"}},
		{"an unscheduled pod of the old version is not the step's", []v1.Pod{pending("coredns-prev", "registry.k8s.io/coredns/coredns:v1.14.2", "Unschedulable", taint)},
			[]string{"no pod of"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := ObserveGate(Observed{Pods: tc.pods}, step)
			if g.Passed {
				t.Fatalf("passed, want %q", tc.want)
			}
			rest := g.Why
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("why %q, want %q in it (in order: %q)", g.Why, w, tc.want)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}
