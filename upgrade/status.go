package upgrade

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The conditions of the desired-version object, as OpenShift's
// ClusterVersion names them.
const (
	Progressing = "Progressing"
	Available   = "Available"
	Failing     = "Failing"
)

// Progressing's reasons: Done once no step is left (what `upgrade apply
// --wait` waits for), Stopped when the upgrade stopped with steps to go.
const (
	ReasonDone    = "Done"
	ReasonStopped = "Stopped"
	// ReasonWaiting: the next step is refused for a state of the cluster
	// that clears by itself (clearsByItself); the controller begins it
	// once it has.
	ReasonWaiting = "Waiting"
)

// Condition is one condition of the desired-version object.
type Condition struct {
	Type, Status, Reason, Message string
}

// Running is one component's version on one node (Node empty: a
// cluster-wide add-on).
type Running struct {
	Component Component
	Node      string
	Version   string
}

// Status is what the desired-version object reports: every component's and
// node's version, the step under way, and the three conditions.
type Status struct {
	Desired    Versions
	Running    []Running
	Step       string
	Conditions []Condition
}

// Summarize is the status of an upgrade of c to desired: steps are
// Plan's (the rest of the upgrade), inFlight the step begun and not yet
// through its gate (nil: none), refusals Preflight's, and last the verdict
// on the step under way (nil: none yet).
func Summarize(c Cluster, desired Versions, steps []Step, inFlight *Step, refusals []Refusal, last *Decision) Status {
	s := Status{Desired: desired, Running: running(c)}
	failing := Condition{Type: Failing, Status: "False", Reason: "AsExpected"}
	switch {
	case len(refusals) > 0:
		var msgs []string
		for _, r := range refusals {
			msgs = append(msgs, r.Message)
		}
		failing = Condition{Type: Failing, Status: "True", Reason: refusals[0].Reason, Message: "refused: " + strings.Join(msgs, "; ")}
	case last != nil && last.Verdict == RollBack:
		failing = Condition{Type: Failing, Status: "True", Reason: reasonRolledBack, Message: last.Message}
	case last != nil && last.Verdict == Hold:
		failing = Condition{Type: Failing, Status: "True", Reason: reasonNeedsAPerson, Message: last.Message}
	}
	progressing := Condition{Type: Progressing, Status: "False", Reason: ReasonDone, Message: "the cluster runs " + desired.Kubernetes}
	switch {
	case inFlight != nil:
		// The step in flight, counted with the rest: a component seen at
		// its version before the gate passed is no longer in the plan, and
		// the last such step must not read as Done.
		left := len(steps)
		if !slices.ContainsFunc(steps, func(x Step) bool { return x.Component == inFlight.Component && x.Node == inFlight.Node }) {
			left++
		}
		s.Step = inFlight.String()
		progressing = Condition{Type: Progressing, Status: "True", Reason: "Upgrading", Message: fmt.Sprintf("%s (%d steps to go)", s.Step, left)}
	case len(steps) > 0:
		s.Step = steps[0].String()
		if len(refusals) > 0 && clearsByItself(refusals) {
			// The controller asks again every round and begins the step
			// once the cause is gone: it is waiting, not stopped, and
			// Failing says on what.
			progressing = Condition{Type: Progressing, Status: "True", Reason: ReasonWaiting, Message: fmt.Sprintf("waiting to begin %s (%d steps to go)", s.Step, len(steps))}
		} else if failing.Status == "True" {
			progressing = Condition{Type: Progressing, Status: "False", Reason: ReasonStopped, Message: fmt.Sprintf("stopped with %d steps to go", len(steps))}
		} else {
			progressing = Condition{Type: Progressing, Status: "True", Reason: "Upgrading", Message: fmt.Sprintf("%s (%d steps to go)", s.Step, len(steps))}
		}
	}
	available := Condition{Type: Available, Status: "True", Reason: "AsExpected"}
	var why []string
	for _, n := range c.Nodes {
		if !n.Ready {
			why = append(why, "node "+n.Name+" is not Ready")
		}
	}
	why = append(why, SkewViolations(c)...)
	if !c.EtcdLeader {
		why = append(why, "no quorum of etcd's members is Ready (their pods' readiness: etcd's own /readyz, and not Ready until a restarted kubelet probes again)")
	}
	if len(why) > 0 {
		available = Condition{Type: Available, Status: "False", Reason: "Degraded", Message: strings.Join(why, "; ")}
	}
	s.Conditions = []Condition{progressing, available, failing}
	return s
}

// clearsByItself reports whether every refusal is about the cluster's
// state right now (a node not Ready, etcd unhealthy or a member missing, a
// node without the target's images), which goes away without a new
// desired version: a node comes back, a member catches up after its own
// step, an operator imports the images. A refusal of the path itself (more
// than one minor, a skew the plan would break) does not.
func clearsByItself(rs []Refusal) bool {
	for _, r := range rs {
		switch r.Reason {
		case ReasonNodeNotReady, ReasonEtcdUnhealthy, ReasonEtcdMemberAbsent, ReasonImagesMissing:
		default:
			return false
		}
	}
	return true
}

// running lists every version c runs, sorted by component, then node.
func running(c Cluster) []Running {
	var out []Running
	for _, n := range c.Nodes {
		for comp, v := range n.Running {
			out = append(out, Running{comp, n.Name, v})
		}
	}
	for comp, v := range c.Addons {
		out = append(out, Running{Component: comp, Version: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Component != out[j].Component {
			return out[i].Component < out[j].Component
		}
		return out[i].Node < out[j].Node
	})
	return out
}
