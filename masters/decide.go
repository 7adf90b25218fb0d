package masters

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ActKind is what the controller does to etcd's member list this round.
type ActKind string

const (
	None           ActKind = ""
	AddLearner     ActKind = "AddLearner"
	PromoteLearner ActKind = "PromoteLearner"
	RemoveMember   ActKind = "RemoveMember"
)

// Act is the one call on etcd a decision asks for.
type Act struct {
	Kind     ActKind
	Node     string
	MemberID uint64
	PeerURL  string
}

// Refusal is a reason an operation cannot begin or go on, for the node's
// Event (and `bootlet master status`).
type Refusal struct {
	Node, Reason string
}

// Decision is one round's answer: the record to keep, written before the
// act (so that a leader that dies between the two resumes the act), the
// act, and what to report.
type Decision struct {
	Record   Record
	Act      Act
	Refusals []Refusal
	// Why says, for the log, what the round waits for or did.
	Why string
}

// Decide is the rule book: the one next act for the set of masters.
func Decide(f Facts) Decision {
	d := Decision{Record: f.Record.clone()}
	if f.Members == nil {
		d.Why = fmt.Sprintf("waiting: no etcd member answers (%v)", f.EtcdErr)
		return d
	}
	v := newView(f)
	for _, n := range f.Nodes {
		if n.Labelled {
			d.Record.addMaster(n.Name)
		}
	}
	v.trackStrayLearners(&d)
	if d.Record.Op != nil {
		v.continueOp(&d)
		return d
	}
	v.next(&d)
	return d
}

// view indexes one round's facts.
type view struct {
	f     Facts
	nodes map[string]Node
}

func newView(f Facts) view {
	// Nodes in name order, so that operations begin in the same order
	// whatever order the API listed them in.
	f.Nodes = slices.Clone(f.Nodes)
	slices.SortFunc(f.Nodes, func(a, b Node) int { return compare(a.Name, b.Name) })
	v := view{f: f, nodes: map[string]Node{}}
	for _, n := range f.Nodes {
		v.nodes[n.Name] = n
	}
	return v
}

// memberOf is node's member: by name, or, for a learner that has not
// started (no name yet), by its peer URL.
func (v view) memberOf(name, peerURL string) *Member {
	for i, m := range v.f.Members {
		if m.Name != "" && m.Name == name {
			return &v.f.Members[i]
		}
	}
	if peerURL == "" {
		return nil
	}
	for i, m := range v.f.Members {
		if slices.Contains(m.PeerURLs, peerURL) {
			return &v.f.Members[i]
		}
	}
	return nil
}

func (v view) voters() []Member {
	var out []Member
	for _, m := range v.f.Members {
		if !m.Learner {
			out = append(out, m)
		}
	}
	return out
}

// quorum of n voters.
func quorum(n int) int { return n/2 + 1 }

// removal is whether a member may be removed: ok, or why not, and
// whether the operator may force it.
type removal struct {
	ok       bool
	why      string
	forcible bool
}

// allowed is whether the removal goes ahead with force.
func (r removal) allowed(force bool) bool { return r.ok || (force && r.forcible) }

// hint is what a refusal adds about forcing it.
func (r removal) hint(force bool, how string) string {
	if r.forcible && !force {
		return " (" + how + ")"
	}
	return ""
}

// canRemove says whether removing m keeps etcd able to commit and leaves
// a quorum of healthy voters among those left. Only the second can be
// forced: without a quorum now, etcd commits no member change at all.
func (v view) canRemove(m Member) removal {
	if m.Learner {
		return removal{ok: true}
	}
	voters := v.voters()
	if len(voters) <= 1 {
		return removal{why: "it is etcd's last voter"}
	}
	all, left := 0, 0
	for _, o := range voters {
		if o.Healthy {
			all++
			if o.ID != m.ID {
				left++
			}
		}
	}
	if all < quorum(len(voters)) {
		return removal{why: fmt.Sprintf("etcd has no quorum (%d of %d voters answer), and no member change commits without one: bring a member back, or recover from a snapshot (bootlet recover)", all, len(voters))}
	}
	n := len(voters) - 1
	if left < quorum(n) {
		return removal{why: fmt.Sprintf("it would leave %d healthy of %d voters, fewer than their quorum of %d", left, n, quorum(n)), forcible: true}
	}
	return removal{ok: true}
}

// etcdUnhealthy names the voters that do not answer, and any helper of an
// upgrade's step; "" when etcd may take a new member.
func (v view) etcdUnhealthy() string {
	var why []string
	for _, m := range v.f.Members {
		switch {
		case m.Helper:
			why = append(why, fmt.Sprintf("the upgrade's helper %s is a member", m.Name))
		case !m.Learner && !m.Healthy:
			why = append(why, fmt.Sprintf("member %s does not answer", memberName(m)))
		}
	}
	return strings.Join(why, "; ")
}

func memberName(m Member) string {
	if m.Name != "" {
		return m.Name
	}
	return fmt.Sprintf("%x (not started)", m.ID)
}

// trackStrayLearners records learners that no operation added (a promotion
// this controller abandoned, or someone else's), so that one that never
// starts is removed after LearnerStartTimeout rather than left behind.
func (v view) trackStrayLearners(d *Decision) {
	var ours uint64
	var oursURL string
	if op := d.Record.Op; op != nil && op.Kind == Promote {
		ours, oursURL = op.MemberID, op.PeerURL
	}
	seen := map[uint64]bool{}
	for _, m := range v.f.Members {
		if !m.Learner || m.Name != "" || m.ID == ours || slices.Contains(m.PeerURLs, oursURL) {
			continue
		}
		seen[m.ID] = true
		if _, ok := d.Record.StrayLearners[m.ID]; !ok {
			if d.Record.StrayLearners == nil {
				d.Record.StrayLearners = map[uint64]time.Time{}
			}
			d.Record.StrayLearners[m.ID] = v.f.Now
		}
	}
	for id := range d.Record.StrayLearners {
		if !seen[id] {
			delete(d.Record.StrayLearners, id)
		}
	}
}
