package upgrade

import (
	"fmt"
	"time"
)

// Progress is what the controller keeps of an upgrade between rounds, in
// the desired-version object's status: so a new leader, or the same one
// after a reboot, resumes where the last one was.
type Progress struct {
	// InFlight is the step begun and not yet through its gate, and when
	// it began (the gate's timeout runs from there, across restarts).
	InFlight *Step
	Began    time.Time
	// RollingBack is a step being put back after its gate failed, since
	// Began.
	RollingBack *Step
	// Stopped is why the upgrade stopped (rolled back, or held for a
	// person), for the Failing condition; StoppedFor is the generation of
	// the desired version it stopped on. It stays stopped until a person
	// sets the desired version again (a new generation).
	Stopped    *Decision
	StoppedFor int64
}

// Round is one round's input: the cluster as observed, the desired
// version and its generation, the progress kept, the gate of the step in
// flight, and the time.
type Round struct {
	Cluster    Cluster
	Desired    Versions
	Generation int64
	Progress   Progress
	// Gate is the in-flight step's gate as observed this round (zero when
	// nothing is in flight).
	Gate Gate
	Now  time.Time
	// GateTimeout is how long a gate, or a rollback, may take (0:
	// GateTimeout).
	GateTimeout time.Duration
}

// ActionKind is what the controller does after a round.
type ActionKind string

// The actions.
const (
	// DoNothing: nothing is asked, or the cluster runs the desired version.
	DoNothing ActionKind = "Idle"
	// DoRefuse: the preflight refuses the next step; nothing changes, and
	// the next round asks again (a node may be imported its images).
	DoRefuse ActionKind = "Refuse"
	// DoBegin: take Step (change the component's spec), and record it in
	// flight.
	DoBegin ActionKind = "Begin"
	// DoWait: the step in flight, or the rollback, is not through yet.
	DoWait ActionKind = "Wait"
	// DoComplete: the step in flight passed its gate; record it, and the
	// checkpointer may now keep its version.
	DoComplete ActionKind = "Complete"
	// DoRollBack: put Step's component back to its last good spec.
	DoRollBack ActionKind = "RollBack"
	// DoStop: the upgrade stopped (rolled back, or held for a person) and
	// stays so until the desired version is set again.
	DoStop ActionKind = "Stop"
)

// Action is a round's decision.
type Action struct {
	Kind     ActionKind
	Step     *Step
	Refusals []Refusal
	Message  string
	// Progress is what to keep for the next round.
	Progress Progress
}

// Decide decides one round of the controller. It is the whole state
// machine; the controller only observes, calls it, and does what it says.
func Decide(r Round) (Action, error) {
	p := r.Progress
	if r.Desired.Kubernetes == "" {
		return Action{Kind: DoNothing, Message: "no upgrade asked", Progress: Progress{}}, nil
	}
	if p.Stopped != nil && p.RollingBack == nil {
		if p.StoppedFor == r.Generation {
			return Action{Kind: DoStop, Message: p.Stopped.Message, Progress: p}, nil
		}
		// A person set the desired version again: start over from what runs.
		p = Progress{}
	}
	if rb := p.RollingBack; rb != nil {
		why := "its gate failed"
		if p.Stopped != nil {
			why = p.Stopped.Message
		}
		if runs(r.Cluster, rb.Component, rb.Node, rb.From) && (rb.Component != Etcd || len(r.Cluster.EtcdHelpers()) == 0) {
			d := Decision{RollBack, fmt.Sprintf("%s was put back to %s: %s", rb.where(), rb.From, why)}
			return Action{Kind: DoStop, Step: rb, Message: d.Message, Progress: Progress{Stopped: &d, StoppedFor: r.Generation}}, nil
		}
		if timeout := stepTimeout(r, *rb); r.Now.Sub(p.Began) >= timeout {
			d := Decision{Hold, fmt.Sprintf("%s did not come back to %s within %s: a person must look (%s)", rb.where(), rb.From, timeout, why)}
			return Action{Kind: DoStop, Step: rb, Message: d.Message, Progress: Progress{Stopped: &d, StoppedFor: r.Generation}}, nil
		}
		msg := fmt.Sprintf("putting %s back to %s", rb.where(), rb.From)
		if rb.Component == Etcd && runs(r.Cluster, rb.Component, rb.Node, rb.From) {
			msg += ": the member runs it, its step's helpers are being removed"
		}
		return Action{Kind: DoWait, Step: rb, Message: msg, Progress: p}, nil
	}
	if s := p.InFlight; s != nil {
		g := r.Gate
		g.Elapsed = r.Now.Sub(p.Began)
		g.Timeout = stepTimeout(r, *s)
		if g.Passed && !runs(r.Cluster, s.Component, s.Node, s.To) {
			// A gate is not passed until the component is seen at the
			// step's version: otherwise the next round's plan would
			// begin the same step again.
			g.Passed, g.Why = false, fmt.Sprintf("not yet seen running %s", s.To)
		}
		d := DecideGate(*s, g, r.Cluster.EtcdMembers)
		switch d.Verdict {
		case Next:
			return Action{Kind: DoComplete, Step: s, Message: d.Message, Progress: Progress{}}, nil
		case Wait:
			return Action{Kind: DoWait, Step: s, Message: d.Message, Progress: p}, nil
		case RollBack:
			return Action{Kind: DoRollBack, Step: s, Message: d.Message, Progress: Progress{RollingBack: s, Began: r.Now, Stopped: &d}}, nil
		default: // Hold
			return Action{Kind: DoStop, Step: s, Message: d.Message, Progress: Progress{Stopped: &d, StoppedFor: r.Generation}}, nil
		}
	}
	steps, err := Plan(r.Cluster, r.Desired, EtcdReleases())
	if err != nil {
		return refuse([]Refusal{{Reason: ReasonInvalidVersion, Message: err.Error()}}), nil
	}
	if len(steps) == 0 {
		return Action{Kind: DoNothing, Message: "the cluster runs " + r.Desired.Kubernetes, Progress: Progress{}}, nil
	}
	current, err := Current(r.Cluster)
	if err != nil {
		return refuse([]Refusal{{Reason: ReasonInvalidVersion, Message: err.Error()}}), nil
	}
	refusals := Preflight(r.Cluster, current, r.Desired)
	if current.Kubernetes == r.Desired.Kubernetes {
		// The apiservers are all through; what is left (add-ons,
		// kubelets) is not refused for "already runs".
		refusals = dropReason(refusals, ReasonAlreadyRuns)
	}
	// The whole rest of the plan must keep the policy, not only the
	// cluster as it is: a step that is fine now may strand a later one.
	for _, v := range PlanSkew(r.Cluster, steps) {
		refusals = append(refusals, Refusal{Reason: ReasonSkew, Message: v})
	}
	if len(refusals) > 0 {
		return refuse(refusals), nil
	}
	s := steps[0]
	return Action{Kind: DoBegin, Step: &s, Message: "beginning " + s.String(), Progress: Progress{InFlight: &s, Began: r.Now}}, nil
}

// EtcdHelpedTimeoutFactor is how many gate timeouts an etcd step with
// helpers (one or two members) has: it is three steps' work in one (its
// helpers up and the apiservers rolled to name them; the member's restart;
// the apiservers rolled back and the helpers removed), of which the two
// rolls take about what an apiserver's step takes.
const EtcdHelpedTimeoutFactor = 2

// stepTimeout is how long step s (or its rollback) may take: the gate's
// timeout, EtcdHelpedTimeoutFactor times it for an etcd step with helpers.
func stepTimeout(r Round, s Step) time.Duration {
	t := (Gate{Timeout: r.GateTimeout}).timeout()
	if s.Component == Etcd && r.Cluster.EtcdNeedsHelpers() {
		t *= EtcdHelpedTimeoutFactor
	}
	return t
}

func refuse(rs []Refusal) Action {
	return Action{Kind: DoRefuse, Refusals: rs, Message: "refused: " + reasonCount(len(rs)), Progress: Progress{}}
}

// runs reports whether comp runs version v on node (a cluster-wide add-on
// when node is empty).
func runs(c Cluster, comp Component, node, v string) bool {
	if node == "" {
		return c.Addons[comp] == v
	}
	for _, n := range c.Nodes {
		if n.Name == node {
			return n.Running[comp] == v
		}
	}
	return false
}

func onlyReason(rs []Refusal, reason string) []Refusal {
	var out []Refusal
	for _, r := range rs {
		if r.Reason == reason {
			out = append(out, r)
		}
	}
	return out
}

func dropReason(rs []Refusal, reason string) []Refusal {
	var out []Refusal
	for _, r := range rs {
		if r.Reason != reason {
			out = append(out, r)
		}
	}
	return out
}
