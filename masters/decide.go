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
	// MoveLeader hands etcd's leadership from Leader to MemberID before
	// the leader's own removal: a removed leader steps down and the
	// others wait out an election timeout, which the API's clients would
	// see as failed requests.
	MoveLeader ActKind = "MoveLeader"
)

// Act is the one call on etcd a decision asks for.
type Act struct {
	Kind     ActKind
	Node     string
	MemberID uint64
	PeerURL  string
	// Leader is etcd's leader, whose endpoint takes MoveLeader.
	Leader uint64
}

// Placement sets (ControlPlane) or removes the label the control plane's
// pods select on Node: the controller's second kind of act, on the Node
// object rather than on etcd.
type Placement struct {
	Node         string
	ControlPlane bool
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
	Record     Record
	Act        Act
	Placements []Placement
	Refusals   []Refusal
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
			d.Record.addMaster(n.Name, n.UID)
		}
	}
	v.trackDown(&d)
	v.trackStrayLearners(&d)
	switch op := d.Record.Op; {
	case op != nil && f.UpgradeUnderway:
		// Its etcd acts wait: an upgrade's step restarts members and adds
		// helpers (and the upgrade controller begins no step while an
		// operation is recorded, so this is only a race between the two).
		d.Why = fmt.Sprintf("%s of %s waits: an upgrade step is under way", strings.ToLower(string(op.Kind)), op.Node)
	case op != nil:
		v.continueOp(&d)
	default:
		v.next(&d)
	}
	v.place(&d)
	return d
}

// place keeps the control plane's pods where they belong: on a labelled
// node whose member votes, and during a demotion until its Drain, where a
// promotion's pods wait for its member's vote (an apiserver on a learner
// serves nothing). A node unlabelled with a member and no operation (the
// last master, a demotion etcd refuses, a first-boot master before its
// pivot labels it) keeps what it has: its pods still serve. Nothing moves
// during an upgrade's step but an operation's own.
func (v view) place(d *Decision) {
	op := d.Record.Op
	for _, n := range v.f.Nodes {
		m := v.memberOf(n.Name, n.PeerURL())
		var want bool
		switch {
		case op != nil && op.Node == n.Name && op.Kind == Demote:
			if op.Phase == PhaseWithdraw {
				continue // what it runs stays until its drain
			}
			want = false
		case op != nil && op.Node == n.Name && op.Kind == Promote:
			want = op.Phase == PhaseControlPlane
		case v.f.UpgradeUnderway:
			continue
		case n.Labelled:
			want = m != nil && !m.Learner
		case m != nil:
			continue
		}
		// A master that runs the control plane can lead: the label that
		// says so is added wherever it lacks it (a cluster grown before
		// it existed, a label taken by hand), and taken only with the
		// control plane, since a first-boot master's daemon labels itself
		// again.
		if want != n.RunsControlPlane || (want && !n.CanLead) {
			d.Placements = append(d.Placements, Placement{Node: n.Name, ControlPlane: want})
		}
	}
}

// removeAct is the act that removes m: the removal itself, or first the
// hand-over of etcd's leadership when m leads and another voter answers.
func (v view) removeAct(node string, m Member) Act {
	if m.Learner || m.ID != v.f.Leader || !m.Healthy {
		// etcd takes a leadership move only from a leader that answers.
		return Act{Kind: RemoveMember, Node: node, MemberID: m.ID}
	}
	for _, o := range v.voters() {
		if o.ID != m.ID && o.Healthy && !o.Helper {
			return Act{Kind: MoveLeader, Node: node, MemberID: o.ID, Leader: m.ID}
		}
	}
	return Act{Kind: RemoveMember, Node: node, MemberID: m.ID}
}

// initialCluster is etcd's --initial-cluster for the learner id of node:
// every member's name=peer URL, the learner's under the node's name.
func (v view) initialCluster(node string, id uint64) string {
	var parts []string
	for _, m := range v.f.Members {
		name := m.Name
		if m.ID == id {
			name = node
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, name+"="+u)
		}
	}
	return strings.Join(parts, ",")
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
// started (no name yet), by its peer URL. A named member is never matched
// by address: a new node may be given a dead master's address.
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
		if m.Name == "" && slices.Contains(m.PeerURLs, peerURL) {
			return &v.f.Members[i]
		}
	}
	return nil
}

func (v view) memberByID(id uint64) *Member {
	for i, m := range v.f.Members {
		if m.ID == id {
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

// canRemove says whether etcd will take m's removal, and why not: a
// member change commits only with a quorum, and etcd's strict
// reconfiguration check (on by default) refuses to remove a voter when the
// voters left that answer would be fewer than their quorum. No operator's
// force gets past either; the way back from a lost quorum is a recovery.
func (v view) canRemove(m Member) (bool, string) {
	if m.Learner {
		return true, ""
	}
	voters := v.voters()
	if len(voters) <= 1 {
		return false, "it is etcd's last voter"
	}
	all, left := 0, 0
	for _, o := range voters {
		// An upgrade's helper counts against the quorum but not for it:
		// it goes when its step ends.
		if o.Healthy && !o.Helper {
			all++
			if o.ID != m.ID {
				left++
			}
		}
	}
	if all < quorum(len(voters)) {
		return false, fmt.Sprintf("etcd has no quorum (%d of %d voters answer), and no member change commits without one: bring a member back, or recover from a snapshot (bootlet recover)", all, len(voters))
	}
	if n := len(voters) - 1; left < quorum(n) {
		return false, fmt.Sprintf("it would leave %d answering of %d voters, fewer than their quorum of %d (etcd refuses it): bring the others back first", left, n, quorum(n))
	}
	return true, ""
}

// etcdUnhealthy names the voters that do not answer, and any helper of an
// upgrade's step; "" when etcd may take a new member.
func (v view) etcdUnhealthy() string {
	var why []string
	for _, m := range v.f.Members {
		switch {
		case m.Helper:
			why = append(why, fmt.Sprintf("the upgrade's helper %s is a member", m.Name))
		case m.Learner:
			why = append(why, fmt.Sprintf("learner %s is a member already (etcd takes one at a time)", memberName(m)))
		case !m.Healthy:
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

// trackDown records since when each voter has not answered (DeadAfter).
func (v view) trackDown(d *Decision) {
	down := map[uint64]bool{}
	for _, m := range v.f.Members {
		if !m.Learner && !m.Healthy {
			down[m.ID] = true
		}
	}
	d.Record.DownSince = firstSeen(d.Record.DownSince, down, v.f.Now)
}

// trackStrayLearners records learners that no operation owns: not the
// promotion's under way, and not one a labelled node could resume (whose
// promotion has not just failed). One left behind (a promotion abandoned,
// a removal whose act was lost, someone else's add) is removed after
// LearnerStartTimeout rather than kept for ever, holding etcd's one
// learner place.
func (v view) trackStrayLearners(d *Decision) {
	owned := map[uint64]bool{}
	if op := d.Record.Op; op != nil && op.Kind == Promote {
		if m := v.memberOf(op.Node, op.PeerURL); m != nil {
			owned[m.ID] = true
		}
		owned[op.MemberID] = true
	}
	for _, n := range v.f.Nodes {
		if _, failed := d.Record.Failures[n.Name]; n.Labelled && !failed {
			if m := v.memberOf(n.Name, n.PeerURL()); m != nil {
				owned[m.ID] = true
			}
		}
	}
	stray := map[uint64]bool{}
	for _, m := range v.f.Members {
		if m.Learner && !m.Helper && !owned[m.ID] {
			stray[m.ID] = true
		}
	}
	d.Record.StrayLearners = firstSeen(d.Record.StrayLearners, stray, v.f.Now)
}

// firstSeen keeps, for each of ids, when it was first seen (now, if not
// before), and forgets every other; nil when ids is empty.
func firstSeen(since map[uint64]time.Time, ids map[uint64]bool, now time.Time) map[uint64]time.Time {
	if len(ids) == 0 {
		return nil
	}
	out := make(map[uint64]time.Time, len(ids))
	for id := range ids {
		if at, ok := since[id]; ok {
			out[id] = at
		} else {
			out[id] = now
		}
	}
	return out
}
