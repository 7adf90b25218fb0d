package upgrade

import (
	"fmt"
	"time"
)

// GateTimeout is how long a step's gate may fail before the step is put
// back: kubeadm's 5 minutes for a static pod to come back, for every
// component; a kubelet step adds its drain.
const GateTimeout = 5 * time.Minute

// Verdict is what to do after observing a step's gate.
type Verdict string

// The verdicts.
const (
	// Wait: the gate does not pass yet, and the step still has time.
	Wait Verdict = "Wait"
	// Next: the gate passed; the step's version may be checkpointed and
	// the next step may begin.
	Next Verdict = "Next"
	// RollBack: the gate failed for GateTimeout; put the component back to
	// its last good spec, then stop with Failing=True.
	RollBack Verdict = "RollBack"
	// Hold: the gate failed and the component cannot go back (etcd, once
	// no member of the old version remains); stop with Failing=True and
	// wait for a person, saying so.
	Hold Verdict = "Hold"
)

// Gate is what the controller observed of a step's health gate.
type Gate struct {
	// Passed: the gate's condition holds (etcd: the member is healthy,
	// the cluster has a leader and every member answers; an apiserver:
	// its new process serves /readyz through the port router; a kubelet:
	// the node is Ready at the target).
	Passed bool
	// Why it does not pass, for the Failing condition.
	Why string
	// Elapsed since the step began.
	Elapsed time.Duration
}

// Decision is a verdict and the message for the upgrade's conditions.
type Decision struct {
	Verdict Verdict
	Message string
}

// DecideGate is the verdict on step s given its gate g and the etcd
// members (for whether etcd can still go back).
func DecideGate(s Step, g Gate, members []EtcdMember) Decision {
	if g.Passed {
		return Decision{Next, fmt.Sprintf("%s passed its gate after %s", s, g.Elapsed.Round(time.Second))}
	}
	if g.Elapsed < GateTimeout {
		return Decision{Wait, fmt.Sprintf("%s: waiting for its gate (%s)", s, g.Why)}
	}
	cause := fmt.Sprintf("%s failed its gate for %s: %s", s, GateTimeout, g.Why)
	if s.Component == Etcd && !EtcdCanGoBack(members, s.From) {
		return Decision{Hold, cause + "; etcd cannot go back to " + s.From + " (no member of that version remains): fix the member and the upgrade goes on, or restore a snapshot"}
	}
	return Decision{RollBack, cause + "; putting it back to " + s.From}
}

// EtcdCanGoBack reports whether a member may return to version old: etcd
// downgrades in place only while the cluster version is still old's,
// which holds while some other member still runs old.
func EtcdCanGoBack(members []EtcdMember, old string) bool {
	for _, m := range members {
		if m.Version == old {
			return true
		}
	}
	return false
}
