package masters

import (
	"fmt"
	"slices"
)

// next begins the next operation, if any: removals of the gone first
// (they restore the health a promotion's preflight needs), then
// demotions, then promotions; within each, by name.
func (v view) next(d *Decision) {
	if v.f.UpgradeUnderway {
		d.Why = "waiting: an upgrade step is under way"
		return
	}
	if v.removeStrayLearner(d) || v.removeRequested(d) || v.removeDeleted(d) || v.demote(d) || v.promote(d) {
		return
	}
	if d.Why == "" {
		d.Why = fmt.Sprintf("steady: masters %v", d.Record.Masters)
	}
}

func (v view) begin(d *Decision, op Op) {
	op.Started, op.PhaseSince = v.f.Now, v.f.Now
	d.Record.Op = &op
}

func (v view) removeStrayLearner(d *Decision) bool {
	for _, m := range v.f.Members {
		since, ok := d.Record.StrayLearners[m.ID]
		if !ok || v.f.Now.Sub(since) < LearnerStartTimeout {
			continue
		}
		delete(d.Record.StrayLearners, m.ID)
		d.Act = Act{Kind: RemoveMember, MemberID: m.ID}
		d.Why = fmt.Sprintf("removing learner %s: no operation owns it, and it has been left for %s", memberName(m), LearnerStartTimeout)
		return true
	}
	return false
}

// removeRequested begins an operator's `bootlet master remove`, or says
// why it cannot.
func (v view) removeRequested(d *Decision) bool {
	rs := slices.Clone(v.f.Removals)
	slices.SortFunc(rs, func(a, b Removal) int { return compare(a.Name, b.Name) })
	for _, r := range rs {
		m := v.memberOf(r.Name, "")
		if m == nil {
			continue
		}
		if n, ok := v.nodes[r.Name]; ok && n.Labelled && n.Ready {
			// Its member may be restarting (an upgrade's step): a
			// labelled, Ready node is a master, answering or not.
			d.Refusals = append(d.Refusals, Refusal{r.Name, "it is a live master: remove its label to demote it"})
			continue
		}
		if m.Healthy && !r.Force {
			d.Refusals = append(d.Refusals, Refusal{r.Name, "its member still answers: remove it with --force only if its machine is gone for good"})
			continue
		}
		if ok, why := v.canRemove(*m); !ok {
			d.Refusals = append(d.Refusals, Refusal{r.Name, "its member is not removed: " + why})
			continue
		}
		v.begin(d, Op{Kind: Remove, Node: r.Name, Phase: PhaseRemoveMember, MemberID: m.ID, Force: r.Force})
		d.Act = v.removeAct(r.Name, *m)
		d.Why = fmt.Sprintf("removing %s's member %x, as asked", r.Name, m.ID)
		return true
	}
	return false
}

// removeDeleted removes the member of a master seen labelled whose Node
// is gone, once it has not answered for Facts.deadAfter. A member whose Node
// the record never saw labelled stays: a master born at first boot runs
// its member before its Node registers.
func (v view) removeDeleted(d *Decision) bool {
	for _, name := range slices.Clone(d.Record.Masters) {
		if _, ok := v.nodes[name]; ok {
			continue
		}
		m := v.memberOf(name, "")
		if m == nil {
			d.Record.dropMaster(name)
			continue
		}
		if m.Healthy {
			// A Node deleted by hand while its machine runs: removing a
			// member that answers would stop a live master's apiserver.
			d.Refusals = append(d.Refusals, Refusal{name, "its Node is deleted, but its member still answers: it goes once it has stopped answering (or `bootlet master remove --force`)"})
			continue
		}
		if since, ok := d.Record.DownSince[m.ID]; !ok || v.f.Now.Sub(since) < v.f.deadAfter() {
			d.Refusals = append(d.Refusals, Refusal{name, fmt.Sprintf("its Node is deleted; its member goes once it has not answered for %s", v.f.deadAfter())})
			continue
		}
		if ok, why := v.canRemove(*m); !ok {
			d.Refusals = append(d.Refusals, Refusal{name, "its Node is deleted, but its member stays: " + why})
			continue
		}
		v.begin(d, Op{Kind: Remove, Node: name, Phase: PhaseRemoveMember, MemberID: m.ID})
		d.Act = v.removeAct(name, *m)
		d.Why = fmt.Sprintf("removing %s's member %x: its Node is deleted and its member has not answered for %s", name, m.ID, v.f.deadAfter())
		return true
	}
	return false
}

// demote begins the demotion of a master seen labelled whose label is
// gone from the same Node object.
func (v view) demote(d *Decision) bool {
	for _, name := range slices.Clone(d.Record.Masters) {
		n, ok := v.nodes[name]
		if !ok || n.Labelled {
			continue
		}
		m := v.memberOf(name, n.PeerURL())
		if uid := d.Record.UIDs[name]; uid != "" && n.UID != uid {
			// Deleted and registered again: the kubelet cannot set the
			// label, so its absence is no one's decision.
			if m != nil {
				d.Refusals = append(d.Refusals, Refusal{name, fmt.Sprintf("its Node was created again without the label while its member %x runs: label it again (or remove the label from this Node to demote it)", m.ID)})
				continue
			}
			d.Record.dropMaster(name)
			continue
		}
		if m == nil {
			// No member to remove (a promotion that never got one): it
			// is no longer a master; its daemon drops what it held when
			// it sees the label gone.
			d.Record.dropMaster(name)
			continue
		}
		if v.labelledCount() == 0 {
			d.Refusals = append(d.Refusals, Refusal{name, "it is the last master: label another node first"})
			continue
		}
		if n.CanLead && !v.anotherLeader(name) {
			d.Refusals = append(d.Refusals, Refusal{name, fmt.Sprintf("it is the last master that can lead this controller (%s); no other master can, so demoting it would leave no one to promote, demote or remove a master: label it again, and demote it once another master's member votes", LabelLeader)})
			continue
		}
		if ok, why := v.canRemove(*m); !ok {
			d.Refusals = append(d.Refusals, Refusal{name, "not demoted: removing its member: " + why})
			continue
		}
		v.begin(d, Op{Kind: Demote, Node: name, Phase: PhaseWithdraw, PeerURL: n.PeerURL(), MemberID: m.ID})
		d.Why = fmt.Sprintf("demoting %s: its label is gone; withdrawing it from the API address", name)
		return true
	}
	return false
}

// anotherLeader: a labelled master other than name, Ready, can lead the
// controller (LabelLeader): a node that is down leads no one. Only nodes
// that carry the label count at all: a cluster where none does (its
// daemons older than the label) refuses nothing for it.
func (v view) anotherLeader(name string) bool {
	for _, n := range v.f.Nodes {
		if n.Name != name && n.Labelled && n.CanLead && n.Ready {
			return true
		}
	}
	return false
}

func (v view) labelledCount() int {
	c := 0
	for _, n := range v.f.Nodes {
		if n.Labelled {
			c++
		}
	}
	return c
}

// promote begins the promotion of a labelled node without a voter, after
// the preflight, or resumes one whose learner is already there.
func (v view) promote(d *Decision) bool {
	for _, n := range v.f.Nodes {
		if !n.Labelled {
			continue
		}
		m := v.memberOf(n.Name, n.PeerURL())
		if m != nil && !m.Learner {
			continue
		}
		if fl, ok := d.Record.Failures[n.Name]; ok {
			if v.f.Now.Sub(fl.At) < RetryAfter {
				continue
			}
			delete(d.Record.Failures, n.Name)
		}
		if m != nil {
			// Its learner outlived a lost record (a leader that died
			// between writing and acting): the promotion goes on.
			v.begin(d, Op{Kind: Promote, Node: n.Name, Phase: PhaseLearner, PeerURL: n.PeerURL(), MemberID: m.ID})
			d.Why = fmt.Sprintf("promoting %s: resuming with its learner %x", n.Name, m.ID)
			return true
		}
		var why []string
		if !n.Ready {
			why = append(why, "the node is not Ready")
		}
		if n.Address == "" {
			why = append(why, "the node has no InternalIP for its member's peer URL")
		}
		if !n.MemberHost {
			why = append(why, fmt.Sprintf("no bootlet daemon on the node reports that it can start an etcd member (annotation %s)", AnnotationMemberHost))
		}
		if bad := v.etcdUnhealthy(); bad != "" {
			why = append(why, "etcd is not ready for a member: "+bad)
		}
		if len(why) > 0 {
			d.Refusals = append(d.Refusals, Refusal{n.Name, "not promoted yet: " + joinReasons(why)})
			continue
		}
		v.begin(d, Op{Kind: Promote, Node: n.Name, Phase: PhaseLearner, PeerURL: n.PeerURL()})
		d.Act = Act{Kind: AddLearner, Node: n.Name, PeerURL: n.PeerURL()}
		d.Why = fmt.Sprintf("promoting %s: adding its member as a learner", n.Name)
		return true
	}
	return false
}

func joinReasons(why []string) string {
	out := why[0]
	for _, w := range why[1:] {
		out += "; " + w
	}
	return out
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
