package servinggate

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestDecide(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name        string
		f           Facts
		m           Memory
		patch       v1.ConditionStatus
		pending     bool
		failuresNow int
	}{
		{"no gate declared: nothing", Facts{Serves: &yes}, Memory{}, "", false, 0},
		{"terminating: nothing, even serving", Facts{Declared: true, Terminating: true, Serves: &yes}, Memory{Failures: 2}, "", false, 0},
		{"terminating, stale True, not serving: left as it is", Facts{Declared: true, Terminating: true, Current: v1.ConditionTrue, Serves: &no}, Memory{}, "", false, 0},
		{"not asked, no condition: nothing, still waiting", Facts{Declared: true}, Memory{}, "", true, 0},
		{"not asked, True: nothing", Facts{Declared: true, Current: v1.ConditionTrue}, Memory{Failures: 1}, "", false, 1},
		{"new pod, serves: True", Facts{Declared: true, Serves: &yes}, Memory{}, v1.ConditionTrue, false, 0},
		{"False, serves: True", Facts{Declared: true, Current: v1.ConditionFalse, Serves: &yes}, Memory{}, v1.ConditionTrue, false, 0},
		{"Unknown, serves: True", Facts{Declared: true, Current: v1.ConditionUnknown, Serves: &yes}, Memory{}, v1.ConditionTrue, false, 0},
		{"True, serves: nothing, failures forgotten", Facts{Declared: true, Current: v1.ConditionTrue, Serves: &yes}, Memory{Failures: 2}, "", false, 0},
		{"new pod, not serving yet: False with why", Facts{Declared: true, Serves: &no, Why: "router: not serving"}, Memory{}, v1.ConditionFalse, true, 1},
		{"False, not serving: nothing, waiting", Facts{Declared: true, Current: v1.ConditionFalse, Serves: &no}, Memory{Failures: 5}, "", true, 6},
		{"True (a reboot's stale one), first failure: kept", Facts{Declared: true, Current: v1.ConditionTrue, Serves: &no}, Memory{}, "", false, 1},
		{"True, second failure: kept", Facts{Declared: true, Current: v1.ConditionTrue, Serves: &no}, Memory{Failures: 1}, "", false, 2},
		{"True, third failure in a row: False", Facts{Declared: true, Current: v1.ConditionTrue, Serves: &no}, Memory{Failures: 2}, v1.ConditionFalse, true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.f, tc.m)
			if d.Patch != tc.patch || d.Pending != tc.pending || d.Memory.Failures != tc.failuresNow {
				t.Errorf("Decide = patch %q pending %v failures %d, want %q %v %d", d.Patch, d.Pending, d.Memory.Failures, tc.patch, tc.pending, tc.failuresNow)
			}
			if d.Patch != "" && (d.Reason == "" || d.Message == "") {
				t.Errorf("a patch without a reason or message: %+v", d)
			}
			if d.Patch == v1.ConditionFalse && tc.f.Why != "" && !strings.Contains(d.Message, tc.f.Why) {
				t.Errorf("message %q does not say why (%q)", d.Message, tc.f.Why)
			}
		})
	}
}
