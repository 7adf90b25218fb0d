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
	if s.Component == Etcd && !EtcdCanGoBack(members, s) {
		return Decision{Hold, cause + "; etcd cannot go back to " + s.From + " (no other member of its minor remains, so the cluster version moved on): fix the member, then set the desired version again to go on, or restore a snapshot"}
	}
	return Decision{RollBack, cause + "; putting it back to " + s.From}
}

// EtcdCanGoBack reports whether step s's member may return to s.From:
// etcd downgrades in place only while the cluster version (major.minor)
// is still From's, which holds for a patch step, and while some other
// member still runs From's minor.
func EtcdCanGoBack(members []EtcdMember, s Step) bool {
	from, err := parse("etcd", s.From)
	if err != nil {
		return false
	}
	if to, err := parse("etcd", s.To); err == nil && sameMinor(from, to) {
		return true
	}
	for _, m := range members {
		if m.Name == s.Node {
			continue
		}
		if v, err := parse("etcd", m.Version); err == nil && sameMinor(v, from) {
			return true
		}
	}
	return false
}
