package servinggate

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Facts is what Decide looks at for one pod of this node.
type Facts struct {
	// Declared: the pod's spec.readinessGates names the condition.
	Declared bool
	// Terminating: the pod is being deleted. Its readiness no longer
	// decides anything (the DaemonSet already replaced it), and its
	// process stops serving on purpose.
	Terminating bool
	// Current is the condition's status in the pod's stored status, ""
	// when it has none. The kubelet keeps a condition it does not own as
	// it is, so after a reboot a True from before the reboot is still here.
	Current v1.ConditionStatus
	// Serves: whether the pod's own process answered its readiness
	// endpoint this round; nil when not asked (a recheck that found no
	// verdict): then nothing changes.
	Serves *bool
	// Why it does not serve (for the condition's message).
	Why string
}

// Memory is what Decide remembers of a pod between rounds.
type Memory struct {
	// Failures counts the consecutive checks its own process did not
	// answer.
	Failures int
}

// Decision is what to do with one pod's condition.
type Decision struct {
	// Patch is the status to write ("" nothing).
	Patch   v1.ConditionStatus
	Reason  string
	Message string
	// Pending: the condition is not True and the process may serve soon:
	// worth asking again before the next full round.
	Pending bool
	Memory  Memory
}

// FailureThreshold is how many consecutive checks must find a pod's own
// process not serving before a True condition is set False, as a probe's
// failureThreshold: one slow answer on a loaded node must not make the only
// apiserver NotReady (the checkpointer's withdrawal and the pivot count how
// long it has been Ready).
const FailureThreshold = 3

// Reasons of the condition.
const (
	ReasonServes     = "OwnProcessServes"
	ReasonNotServing = "OwnProcessNotServing"
)

// Decide turns one pod's facts into the condition to patch, if any:
//   - a pod without the gate, or one being deleted: nothing;
//   - not asked this round: nothing;
//   - its own process serves: True, unless it already is;
//   - it does not serve and the condition is absent (or Unknown): False,
//     with why (the pod is not Ready either way; this says why in
//     kubectl describe);
//   - it does not serve and the condition is True (a reboot's stale True,
//     or a process that stopped serving): False after FailureThreshold
//     consecutive checks.
func Decide(f Facts, m Memory) Decision {
	if !f.Declared || f.Terminating {
		return Decision{}
	}
	if f.Serves == nil {
		return Decision{Pending: f.Current != v1.ConditionTrue, Memory: m}
	}
	if *f.Serves {
		d := Decision{}
		if f.Current != v1.ConditionTrue {
			d.Patch, d.Reason, d.Message = v1.ConditionTrue, ReasonServes, "its own process answers its readiness endpoint"
		}
		return d
	}
	m.Failures++
	d := Decision{Memory: m, Pending: true}
	msg := "its own process does not answer its readiness endpoint"
	if f.Why != "" {
		msg += ": " + f.Why
	}
	switch f.Current {
	case v1.ConditionFalse:
	case v1.ConditionTrue:
		if m.Failures < FailureThreshold {
			d.Pending = false
			return d
		}
		d.Patch, d.Reason, d.Message = v1.ConditionFalse, ReasonNotServing, fmt.Sprintf("%s (%d checks in a row)", msg, m.Failures)
	default:
		d.Patch, d.Reason, d.Message = v1.ConditionFalse, ReasonNotServing, msg
	}
	return d
}
