package upgrade

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
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
	// Timeout is how long the gate may fail (0: GateTimeout).
	Timeout time.Duration
}

func (g Gate) timeout() time.Duration {
	if g.Timeout > 0 {
		return g.Timeout
	}
	return GateTimeout
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
	if g.Elapsed < g.timeout() {
		return Decision{Wait, fmt.Sprintf("%s: waiting for its gate (%s)", s, g.Why)}
	}
	cause := fmt.Sprintf("%s failed its gate for %s: %s", s, g.timeout(), g.Why)
	if s.Component == Etcd && !EtcdCanGoBack(members, s) {
		return Decision{Hold, cause + "; etcd cannot go back to " + s.From + " (no other member of its minor remains, so the cluster version moved on): fix the member, then set the desired version again to go on, or restore a snapshot"}
	}
	return Decision{RollBack, cause + "; putting it back to " + s.From}
}

// EtcdCanGoBack reports whether step s's member may return to s.From:
// etcd downgrades in place only while the cluster version (major.minor)
// is still From's, which holds for a patch step, and while some other
// member still runs From's minor. A helper counts only while it is Ready:
// one being removed (its pod outlives its membership by a few seconds)
// no longer holds the cluster version back.
func EtcdCanGoBack(members []EtcdMember, s Step) bool {
	from, err := parse("etcd", s.From)
	if err != nil {
		return false
	}
	if to, err := parse("etcd", s.To); err == nil && sameMinor(from, to) {
		return true
	}
	for _, m := range members {
		if m.Name == s.Node || m.Helper && !m.Healthy {
			continue
		}
		if v, err := parse("etcd", m.Version); err == nil && sameMinor(v, from) {
			return true
		}
	}
	return false
}

// ObserveGate is step s's gate as the round's objects show it:
//   - a workload's step (the control plane, kube-proxy, CoreDNS): every pod
//     of the component on the step's node (every node, for a cluster-wide
//     add-on) runs s.To and is Ready, and no pod of another version is
//     left. An apiserver's readiness is its own /readyz, through the serving
//     gate bootlet holds until its process answers on the port router;
//   - etcd's: the member runs s.To and is healthy, and the cluster has a
//     leader with every member healthy;
//   - a kubelet's: the node reports s.To and is Ready.
func ObserveGate(o Observed, s Step) Gate {
	switch s.Component {
	case Kubelet:
		for _, n := range o.Nodes {
			if n.Name != s.Node {
				continue
			}
			if v := n.Status.NodeInfo.KubeletVersion; v != s.To {
				// The node's agent replaces it (a master's daemon, a
				// worker's `bootlet upgrade agent`); without one, a person
				// does (docs/operations.md, "Upgrades").
				return Gate{Why: fmt.Sprintf("node %s reports kubelet %s: its node agent puts %s's in place (from %s)", s.Node, v, s.To, ImageOf(Kubelet, s.To))}
			}
			if !NodeReady(n) {
				return Gate{Why: fmt.Sprintf("node %s is not Ready", s.Node)}
			}
			return Gate{Passed: true}
		}
		return Gate{Why: fmt.Sprintf("node %s is not in the API", s.Node)}
	case Etcd:
		var why []string
		found := false
		for _, m := range o.EtcdMembers {
			if m.Name == s.Node {
				found = true
				if m.Version != s.To {
					why = append(why, fmt.Sprintf("the member runs %s", m.Version))
				}
			}
			if !m.Healthy {
				why = append(why, fmt.Sprintf("member %s is not healthy", m.Name))
			}
		}
		if !found {
			why = append(why, fmt.Sprintf("no member on %s", s.Node))
		}
		for _, m := range o.EtcdMembers {
			if m.Helper {
				// A step with helpers is through once they are
				// gone: the member alone, at the target.
				why = append(why, fmt.Sprintf("the step's helper member %s is still there", m.Name))
			}
		}
		if !o.EtcdLeader {
			why = append(why, "no quorum of etcd's members is Ready")
		}
		if len(why) > 0 {
			return Gate{Why: strings.Join(why, "; ")}
		}
		return Gate{Passed: true}
	}
	var seen, why, unscheduled []string
	for _, p := range o.Pods {
		if p.Spec.NodeName == "" && p.Status.Phase == v1.PodPending && p.DeletionTimestamp == nil {
			// A pod of the target that no node takes is the step's cause
			// when nothing else is: a taint, a selector, no room.
			for _, ctr := range p.Spec.Containers {
				if componentOfContainer[ctr.Name] == s.Component && VersionOfImage(ctr.Image) == s.To {
					unscheduled = append(unscheduled, fmt.Sprintf("pod %s is not scheduled%s", p.Name, unschedulableReason(p)))
				}
			}
			continue
		}
		if (s.Node != "" && p.Spec.NodeName != s.Node) || p.Spec.NodeName == "" || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			if componentOfContainer[ctr.Name] != s.Component {
				continue
			}
			v := VersionOfImage(RunningImage(p, ctr))
			seen = append(seen, p.Name)
			switch {
			case p.DeletionTimestamp != nil:
				why = append(why, fmt.Sprintf("pod %s (%s) is being deleted", p.Name, v))
			case v != s.To:
				why = append(why, fmt.Sprintf("pod %s runs %s", p.Name, v))
			case !podutil.IsPodReady(&p):
				why = append(why, fmt.Sprintf("pod %s is not Ready%s", p.Name, waitingReason(p, ctr.Name)))
			}
		}
	}
	if len(seen) == 0 && len(unscheduled) == 0 {
		return Gate{Why: "no pod of " + s.where() + " yet"}
	}
	if why = append(why, unscheduled...); len(why) > 0 {
		return Gate{Why: strings.Join(why, "; ")}
	}
	return Gate{Passed: true}
}

// unschedulableReason is the scheduler's word on a pod it has not placed
// (its PodScheduled condition: "Unschedulable: 0/1 nodes are available: 1
// node(s) had untolerated taint(s)..."), for a gate's message.
func unschedulableReason(p v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse && (c.Reason != "" || c.Message != "") {
			return ": " + strings.TrimSpace(strings.TrimPrefix(c.Reason+": "+c.Message, ": "))
		}
	}
	return ""
}

// waitingReason is why a container waits or last ended (CrashLoopBackOff,
// ImagePullBackOff, Error with its exit code), for a gate's message a
// person can act on.
func waitingReason(p v1.Pod, container string) string {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name != container {
			continue
		}
		var out []string
		if w := s.State.Waiting; w != nil && w.Reason != "" {
			out = append(out, w.Reason)
		}
		if t := s.LastTerminationState.Terminated; t != nil {
			out = append(out, fmt.Sprintf("last exit %d (%s)", t.ExitCode, t.Reason))
		}
		if s.RestartCount > 0 {
			out = append(out, fmt.Sprintf("%d restarts", s.RestartCount))
		}
		if len(out) > 0 {
			return ": " + strings.Join(out, ", ")
		}
	}
	return ""
}
