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
	// RollingBack is a step being put back after its gate failed.
	RollingBack *Step
	// StoppedFor is the generation of the desired version the upgrade
	// stopped on (rolled back, or held for a person): it stays stopped
	// until a person sets the desired version again (a new generation).
	StoppedFor int64
	// Stopped is why, for the Failing condition.
	Stopped *Decision
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
	if p.StoppedFor != 0 && p.StoppedFor == r.Generation && p.Stopped != nil {
		return Action{Kind: DoStop, Message: p.Stopped.Message, Progress: p}, nil
	}
	if p.StoppedFor != 0 && p.StoppedFor != r.Generation {
		// A person set the desired version again: start over from what runs.
		p = Progress{}
	}
	if rb := p.RollingBack; rb != nil {
		if runs(r.Cluster, rb.Component, rb.Node, rb.From) {
			d := Decision{RollBack, fmt.Sprintf("%s failed its gate and was put back to %s", rb, rb.From)}
			if p.Stopped != nil {
				d = *p.Stopped
			}
			return Action{Kind: DoStop, Step: rb, Message: d.Message, Progress: Progress{StoppedFor: r.Generation, Stopped: &d}}, nil
		}
		return Action{Kind: DoWait, Step: rb, Message: fmt.Sprintf("putting %s back to %s", rb, rb.From), Progress: p}, nil
	}
	if s := p.InFlight; s != nil {
		g := r.Gate
		g.Elapsed = r.Now.Sub(p.Began)
		d := DecideGate(*s, g, r.Cluster.EtcdMembers)
		switch d.Verdict {
		case Next:
			return Action{Kind: DoComplete, Step: s, Message: d.Message, Progress: Progress{}}, nil
		case Wait:
			return Action{Kind: DoWait, Step: s, Message: d.Message, Progress: p}, nil
		case RollBack:
			return Action{Kind: DoRollBack, Step: s, Message: d.Message, Progress: Progress{RollingBack: s, Stopped: &d}}, nil
		default: // Hold
			return Action{Kind: DoStop, Step: s, Message: d.Message, Progress: Progress{StoppedFor: r.Generation, Stopped: &d}}, nil
		}
	}
	steps, err := Plan(r.Cluster, r.Desired, EtcdReleases())
	if err != nil {
		return Action{}, err
	}
	if len(steps) == 0 {
		return Action{Kind: DoNothing, Message: "the cluster runs " + r.Desired.Kubernetes, Progress: Progress{}}, nil
	}
	current, err := Current(r.Cluster)
	if err != nil {
		return Action{}, err
	}
	refusals := Preflight(r.Cluster, current, r.Desired)
	if current.Kubernetes == r.Desired.Kubernetes {
		// The apiservers are all through; what is left (add-ons,
		// kubelets) is not refused for "already runs".
		refusals = dropReason(refusals, ReasonNotOneMinor)
	}
	if len(refusals) > 0 {
		return Action{Kind: DoRefuse, Refusals: refusals, Message: fmt.Sprintf("refused: %d reasons", len(refusals)), Progress: Progress{}}, nil
	}
	s := steps[0]
	return Action{Kind: DoBegin, Step: &s, Message: "beginning " + s.String(), Progress: Progress{InFlight: &s, Began: r.Now}}, nil
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

func dropReason(rs []Refusal, reason string) []Refusal {
	var out []Refusal
	for _, r := range rs {
		if r.Reason != reason {
			out = append(out, r)
		}
	}
	return out
}
