package masters

import (
	"fmt"
	"strings"
)

// ConditionType is the Node condition the controller keeps on each node
// it has something to say about, so that `kubectl describe node` and
// `kubectl get node -o yaml` show where the node stands as a master and
// why an operation does not begin.
const ConditionType = "BootletMaster"

// The condition's reasons.
const (
	// ReasonMaster (True): labelled, its member votes, its apiserver is
	// Ready.
	ReasonMaster    = "Master"
	ReasonPromoting = "Promoting"
	ReasonDemoting  = "Demoting"
	ReasonRemoving  = "Removing"
	// ReasonRefused: an operation cannot begin or go on; the message says
	// why, as the node's Event does.
	ReasonRefused = "Refused"
	// ReasonPending: labelled, not a master yet, and nothing refused this
	// round (another operation goes first, or its apiserver starts).
	ReasonPending = "Pending"
	// ReasonUnlabelled: its member runs but its Node is not labelled (a
	// first-boot master before its pivot labels it).
	ReasonUnlabelled = "Unlabelled"
	// ReasonNotMaster: not labelled and no member.
	ReasonNotMaster = "NotMaster"
)

// Condition is what a node's condition should say.
type Condition struct {
	Status          bool
	Reason, Message string
}

// Conditions are the conditions after d of every node f saw: the
// controller writes one only where it changes, and ReasonNotMaster only
// on a node that carries the condition already.
func Conditions(f Facts, d Decision) map[string]Condition {
	v := newView(f)
	refused := map[string][]string{}
	for _, r := range d.Refusals {
		refused[r.Node] = append(refused[r.Node], r.Reason)
	}
	out := make(map[string]Condition, len(v.f.Nodes))
	for _, n := range v.f.Nodes {
		m := v.memberOf(n.Name, n.PeerURL())
		var c Condition
		switch op := d.Record.Op; {
		case len(refused[n.Name]) > 0:
			c = Condition{false, ReasonRefused, strings.Join(refused[n.Name], "; ")}
		case op != nil && op.Node == n.Name:
			reason := map[OpKind]string{Promote: ReasonPromoting, Demote: ReasonDemoting, Remove: ReasonRemoving}[op.Kind]
			c = Condition{false, reason, fmt.Sprintf("%s, phase %s: %s", strings.ToLower(string(op.Kind)), op.Phase, d.Why)}
		case n.Labelled && m != nil && !m.Learner && n.APIServerReady:
			c = Condition{true, ReasonMaster, fmt.Sprintf("etcd voter %x; its apiserver is Ready", m.ID)}
		case n.Labelled:
			c = Condition{false, ReasonPending, pending(n, m, d)}
		case m != nil:
			c = Condition{false, ReasonUnlabelled, fmt.Sprintf("its etcd member %x runs, but the Node is not labelled %s", m.ID, Label)}
		default:
			c = Condition{false, ReasonNotMaster, "not labelled " + Label}
		}
		out[n.Name] = c
	}
	return out
}

func pending(n Node, m *Member, d Decision) string {
	if fl, ok := d.Record.Failures[n.Name]; ok {
		return fmt.Sprintf("its last promotion failed at %s (%s); the next attempt %s after it", fl.At.UTC().Format("15:04:05Z"), fl.Reason, RetryAfter)
	}
	switch {
	case m != nil && !m.Learner:
		return fmt.Sprintf("etcd voter %x; waiting for its apiserver to be Ready", m.ID)
	case d.Record.Op != nil:
		return fmt.Sprintf("waiting: %s %s goes first", strings.ToLower(string(d.Record.Op.Kind)), d.Record.Op.Node)
	}
	return d.Why
}
