package upgrade

import (
	"strconv"
	"strings"
	"testing"
)

func condition(s Status, typ string) Condition {
	for _, c := range s.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return Condition{}
}

func TestSummarize(t *testing.T) {
	c := cluster(v136, master("m1", v136), worker("w1", v136))
	steps, err := Plan(c, v137, nil)
	if err != nil {
		t.Fatal(err)
	}
	notReady := cluster(v136, master("m1", v136), worker("w1", v136))
	notReady.Nodes[1].Ready = false
	done := cluster(v137, master("m1", v137), worker("w1", v137))
	tests := []struct {
		name                           string
		c                              Cluster
		steps                          []Step
		inFlight                       *Step
		refusals                       []Refusal
		last                           *Decision
		progressing, available, failed string
		says                           string
	}{
		{"under way", c, steps, nil, nil, &Decision{Wait, "waiting"}, "True", "True", "False", "etcd on m1"},
		// A refusal that clears by itself: the controller begins the step
		// once the node is back, so the upgrade waits, and Failing says on
		// what (apply --wait keeps waiting).
		{"refused until a node is back", notReady, steps, nil, Preflight(notReady, v136, v137), nil, "True", "False", "True", "node w1 is not Ready"},
		{"waiting names the step", notReady, steps, nil, Preflight(notReady, v136, v137), nil, "True", "False", "True", "waiting to begin " + steps[0].String()},
		{"refused until a member is healthy again", c, steps, nil, []Refusal{{ReasonEtcdUnhealthy, "etcd member m1 is unhealthy"}}, nil, "True", "True", "True", "etcd member m1 is unhealthy"},
		// A refusal of the path itself stops the upgrade.
		{"refused for good", c, steps, nil, []Refusal{{ReasonNotOneMinor, "v1.36 to v1.38 is more than one minor"}}, nil, "False", "True", "True", "stopped with"},
		{"one refusal for good among passing ones", notReady, steps, nil, append(Preflight(notReady, v136, v137), Refusal{ReasonSkew, "skew"}), nil, "False", "False", "True", "stopped with"},
		{"rolled back", c, steps, nil, nil, &Decision{RollBack, "kube-apiserver on m1 failed its gate"}, "False", "True", "True", "failed its gate"},
		{"held", c, steps, nil, nil, &Decision{Hold, "etcd cannot go back"}, "False", "True", "True", "cannot go back"},
		{"done", done, nil, nil, nil, nil, "False", "True", "False", "runs v1.37.2"},
		{"a step in flight still in the plan", c, steps, &steps[0], nil, &Decision{Wait, "waiting"}, "True", "True", "False", steps[0].String() + " (" + strconv.Itoa(len(steps)) + " steps to go)"},
		// The last step's component reports its version before its gate
		// passed: the plan is empty, the upgrade is not Done.
		{"the last step in flight, out of the plan", done, nil, &steps[len(steps)-1], nil, &Decision{Wait, "waiting"}, "True", "True", "False", steps[len(steps)-1].String() + " (1 steps to go)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(tc.c, v137, tc.steps, tc.inFlight, tc.refusals, tc.last)
			p, a, f := condition(s, Progressing), condition(s, Available), condition(s, Failing)
			if p.Status != tc.progressing || a.Status != tc.available || f.Status != tc.failed {
				t.Errorf("Progressing %s, Available %s, Failing %s; want %s %s %s: %+v", p.Status, a.Status, f.Status, tc.progressing, tc.available, tc.failed, s.Conditions)
			}
			all := p.Message + " | " + a.Message + " | " + f.Message
			if !strings.Contains(all, tc.says) {
				t.Errorf("conditions say %q, want %q", all, tc.says)
			}
		})
	}
	if s := Summarize(c, v137, steps, nil, nil, nil); len(s.Running) != 8 || s.Running[0].Component != CoreDNS || s.Running[7].Node != "w1" {
		t.Errorf("running %+v", s.Running)
	}
}
