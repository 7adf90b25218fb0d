package masters

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func master(name, addr string) Node {
	return Node{Name: name, Labelled: true, Ready: true, Address: addr, APIServerReady: true, ControlPlanePods: 3}
}

func worker(name, addr string) Node {
	return Node{Name: name, Ready: true, Address: addr, MemberHost: true}
}

func voter(id uint64, name, addr string, healthy bool) Member {
	return Member{ID: id, Name: name, PeerURLs: []string{"https://" + addr + ":2380"}, Healthy: healthy}
}

func learner(id uint64, name, addr string) Member {
	m := voter(id, name, addr, name != "")
	m.Learner = true
	return m
}

func rec(op *Op, masters ...string) Record { return Record{Masters: masters, Op: op} }

func TestDecide(t *testing.T) {
	promoting := func(phase Phase, started time.Time, id uint64) *Op {
		op := &Op{Kind: Promote, Node: "w1", Phase: phase, Started: started, PhaseSince: started, PeerURL: "https://10.0.0.21:2380", MemberID: id}
		if id != 0 && phase == PhaseLearner {
			// Its learner is a member: the op says how to start it.
			op.InitialCluster = "m1=https://10.0.0.11:2380,w1=https://10.0.0.21:2380"
		}
		return op
	}
	demoting := func(node string, phase Phase, id uint64, force bool) *Op {
		return &Op{Kind: Demote, Node: node, Phase: phase, Started: t0, PhaseSince: t0, MemberID: id, Force: force}
	}
	m1, m2, m3 := master("m1", "10.0.0.11"), master("m2", "10.0.0.12"), master("m3", "10.0.0.13")
	v1, v2, v3 := voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", true), voter(3, "m3", "10.0.0.13", true)
	w1 := worker("w1", "10.0.0.21")
	w1l := w1
	w1l.Labelled = true
	unlabelled := func(n Node) Node { n.Labelled = false; return n }
	leads := func(n Node) Node { n.CanLead = true; return n }
	down := func(m Member) Member { m.Healthy = false; return m }

	tests := []struct {
		name      string
		f         Facts
		act       Act
		op        *Op // nil: none after the round
		refusal   string
		why       string
		masters   []string // the record's, when checked
		failureOn string
	}{
		{
			name: "grow: a labelled worker's member is added as a learner",
			f:    Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1}, Record: rec(nil, "m1")},
			act:  Act{Kind: AddLearner, Node: "w1", PeerURL: "https://10.0.0.21:2380"},
			op:   promoting(PhaseLearner, t0, 0),
		},
		{
			name:    "grow: refused while no daemon on the node can start a member",
			f:       Facts{Nodes: []Node{m1, func(n Node) Node { n.MemberHost = false; return n }(w1l)}, Members: []Member{v1}, Record: rec(nil, "m1")},
			refusal: "no bootlet daemon on the node reports that it can start an etcd member",
		},
		{
			name: "grow: a learner not started yet is waited for",
			f:    Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1, learner(9, "", "10.0.0.21")}, Record: rec(promoting(PhaseLearner, t0, 0), "m1", "w1")},
			op:   promoting(PhaseLearner, t0, 9),
			why:  "waiting for its daemon to start learner 9",
		},
		{
			name:      "grow: a learner that never starts is removed, not left behind",
			f:         Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1, learner(9, "", "10.0.0.21")}, Record: rec(promoting(PhaseLearner, t0.Add(-LearnerStartTimeout), 9), "m1", "w1")},
			act:       Act{Kind: RemoveMember, Node: "w1", MemberID: 9},
			refusal:   "did not start within 5m0s",
			failureOn: "w1",
		},
		{
			name: "grow: a started learner is promoted",
			f:    Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1, learner(9, "w1", "10.0.0.21")}, Record: rec(promoting(PhaseLearner, t0.Add(-time.Minute), 9), "m1", "w1")},
			act:  Act{Kind: PromoteLearner, Node: "w1", MemberID: 9},
			op:   promoting(PhaseLearner, t0.Add(-time.Minute), 9),
		},
		{
			name: "grow: a voter waits for its apiserver",
			f:    Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1, voter(9, "w1", "10.0.0.21", true)}, Record: rec(promoting(PhaseLearner, t0.Add(-time.Minute), 9), "m1", "w1")},
			op:   &Op{Kind: Promote, Node: "w1", Phase: PhaseControlPlane, Started: t0.Add(-time.Minute), PhaseSince: t0, PeerURL: "https://10.0.0.21:2380", MemberID: 9, InitialCluster: "m1=https://10.0.0.11:2380,w1=https://10.0.0.21:2380"},
		},
		{
			name: "grow: done once its apiserver is Ready",
			f: Facts{Nodes: []Node{m1, func() Node { n := w1l; n.APIServerReady = true; return n }()}, Members: []Member{v1, voter(9, "w1", "10.0.0.21", true)},
				Record: rec(promoting(PhaseControlPlane, t0, 9), "m1", "w1")},
			why:     "promoted w1",
			masters: []string{"m1", "w1"},
		},
		{
			name:    "preflight: a node that is not Ready is refused",
			f:       Facts{Nodes: []Node{m1, func() Node { n := w1l; n.Ready = false; return n }()}, Members: []Member{v1}, Record: rec(nil, "m1")},
			refusal: "the node is not Ready",
		},
		{
			name:    "preflight: an unhealthy etcd is refused, naming the member",
			f:       Facts{Nodes: []Node{m1, m2, m3, w1l}, Members: []Member{v1, v2, down(v3)}, Record: rec(nil, "m1", "m2", "m3")},
			refusal: "member m3 does not answer",
		},
		{
			name:    "preflight: an upgrade's helper member is refused",
			f:       Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1, {ID: 5, Name: "m1-upgrade-helper-1", Helper: true, Healthy: true}}, Record: rec(nil, "m1")},
			refusal: "the upgrade's helper m1-upgrade-helper-1 is a member",
		},
		{
			name: "preflight: nothing begins during an upgrade step",
			f:    Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1}, Record: rec(nil, "m1"), UpgradeUnderway: true},
			why:  "an upgrade step is under way",
		},
		{
			name: "one at a time, by name",
			f: Facts{Nodes: []Node{m1, func() Node { n := w1l; n.Name, n.Address = "w2", "10.0.0.22"; return n }(), w1l},
				Members: []Member{v1}, Record: rec(nil, "m1")},
			act: Act{Kind: AddLearner, Node: "w1", PeerURL: "https://10.0.0.21:2380"},
			op:  promoting(PhaseLearner, t0, 0),
		},
		{
			name:    "late label: a first-boot master not labelled yet is not demoted",
			f:       Facts{Nodes: []Node{m1, unlabelled(m2), m3}, Members: []Member{v1, v2, v3}, Record: rec(nil, "m1", "m3")},
			why:     "steady",
			masters: []string{"m1", "m3"},
		},
		{
			name:    "late Node: a member whose Node never registered stays",
			f:       Facts{Nodes: []Node{m1, m2}, Members: []Member{v1, v2, down(v3)}, Record: rec(nil, "m1", "m2")},
			why:     "steady",
			masters: []string{"m1", "m2"},
		},
		{
			name: "dead master: its Node deleted, its member goes once it has not answered for DeadAfter",
			f:    Facts{Nodes: []Node{m1, m2}, Members: []Member{v1, v2, down(v3)}, Record: downSince(rec(nil, "m1", "m2", "m3"), 3, t0.Add(-DeadAfter))},
			act:  Act{Kind: RemoveMember, Node: "m3", MemberID: 3},
			op:   &Op{Kind: Remove, Node: "m3", Phase: PhaseRemoveMember, Started: t0, PhaseSince: t0, MemberID: 3},
		},
		{
			name:    "dead master: a member down for a reboot is not gone",
			f:       Facts{Nodes: []Node{m1, m2}, Members: []Member{v1, v2, down(v3)}, Record: downSince(rec(nil, "m1", "m2", "m3"), 3, t0.Add(-time.Minute))},
			refusal: "its member goes once it has not answered for 5m0s",
		},
		{
			name: "dead master: a site's shorter dead-after (--master-dead-after)",
			f:    Facts{Nodes: []Node{m1, m2}, Members: []Member{v1, v2, down(v3)}, Record: downSince(rec(nil, "m1", "m2", "m3"), 3, t0.Add(-2*time.Minute)), DeadAfter: 90 * time.Second},
			act:  Act{Kind: RemoveMember, Node: "m3", MemberID: 3},
			op:   &Op{Kind: Remove, Node: "m3", Phase: PhaseRemoveMember, Started: t0, PhaseSince: t0, MemberID: 3},
		},
		{
			name:    "dead master: a site's longer dead-after holds the member longer",
			f:       Facts{Nodes: []Node{m1, m2}, Members: []Member{v1, v2, down(v3)}, Record: downSince(rec(nil, "m1", "m2", "m3"), 3, t0.Add(-DeadAfter)), DeadAfter: 15 * time.Minute},
			refusal: "its member goes once it has not answered for 15m0s",
		},
		{
			name:    "dead master: not while etcd has no quorum to commit it",
			f:       Facts{Nodes: []Node{m1}, Members: []Member{down(v1), v2, down(v3)}, Record: downSince(rec(nil, "m1", "m2", "m3"), 3, t0.Add(-DeadAfter))},
			refusal: "etcd has no quorum (1 of 3 voters answer)",
		},
		{
			name:    "a Node deleted by hand while its member answers: the member stays",
			f:       Facts{Nodes: []Node{m1, m2}, Members: []Member{v1, v2, v3}, Record: rec(nil, "m1", "m2", "m3")},
			refusal: "its member still answers",
		},
		{
			name: "removed Node, member gone already: dropped from the record",
			f:    Facts{Nodes: []Node{m1}, Members: []Member{v1}, Record: rec(nil, "m1", "m2")},
			why:  "steady", masters: []string{"m1"},
		},
		{
			name: "demote: an unlabelled master is first withdrawn from the API address",
			f:    Facts{Nodes: []Node{m1, m2, unlabelled(m3)}, Members: []Member{v1, v2, v3}, Record: rec(nil, "m1", "m2", "m3")},
			op:   &Op{Kind: Demote, Node: "m3", Phase: PhaseWithdraw, Started: t0, PhaseSince: t0, PeerURL: "https://10.0.0.13:2380", MemberID: 3},
		},
		{
			name: "demote: withdrawn, it waits for its control-plane pods to leave",
			f: Facts{Nodes: []Node{m1, m2, func() Node { n := unlabelled(m3); n.Withdrawn = true; return n }()}, Members: []Member{v1, v2, v3},
				Record: rec(demoting("m3", PhaseWithdraw, 3, false), "m1", "m2", "m3")},
			op:  &Op{Kind: Demote, Node: "m3", Phase: PhaseDrain, Started: t0, PhaseSince: t0, MemberID: 3},
			why: "waiting for its 3 control-plane pods to leave",
		},
		{
			name: "demote: drained, its member is removed",
			f: Facts{Nodes: []Node{m1, m2, func() Node { n := unlabelled(m3); n.Withdrawn, n.ControlPlanePods = true, 0; return n }()}, Members: []Member{v1, v2, v3},
				Record: rec(demoting("m3", PhaseDrain, 3, false), "m1", "m2", "m3")},
			act: Act{Kind: RemoveMember, Node: "m3", MemberID: 3},
			op:  &Op{Kind: Demote, Node: "m3", Phase: PhaseRemoveMember, Started: t0, PhaseSince: t0, MemberID: 3},
		},
		{
			name: "demote: member gone, it waits for its daemon's cleanup",
			f: Facts{Nodes: []Node{m1, m2, func() Node { n := unlabelled(m3); n.Withdrawn, n.ControlPlanePods = true, 0; return n }()}, Members: []Member{v1, v2},
				Record: rec(demoting("m3", PhaseRemoveMember, 3, false), "m1", "m2", "m3")},
			op: &Op{Kind: Demote, Node: "m3", Phase: PhaseCleanup, Started: t0, PhaseSince: t0, MemberID: 3},
		},
		{
			name: "demote: cleaned up, it is no longer a master",
			f: Facts{Nodes: []Node{m1, m2, func() Node { n := unlabelled(m3); n.Withdrawn, n.ControlPlanePods, n.Cleaned = true, 0, true; return n }()}, Members: []Member{v1, v2},
				Record: rec(demoting("m3", PhaseCleanup, 3, false), "m1", "m2", "m3")},
			why: "demoted m3", masters: []string{"m1", "m2"},
		},
		{
			name: "demote: a node whose daemon never reports its withdrawal does not hold the demotion for ever",
			f: Facts{Nodes: []Node{m1, m2, func() Node { n := unlabelled(m3); n.ControlPlanePods = 0; return n }()}, Members: []Member{v1, v2, v3},
				Record: rec(&Op{Kind: Demote, Node: "m3", Phase: PhaseWithdraw, Started: t0.Add(-NodeReportTimeout), PhaseSince: t0.Add(-NodeReportTimeout), MemberID: 3}, "m1", "m2", "m3")},
			act:     Act{Kind: RemoveMember, Node: "m3", MemberID: 3},
			op:      &Op{Kind: Demote, Node: "m3", Phase: PhaseRemoveMember, Started: t0.Add(-NodeReportTimeout), PhaseSince: t0, MemberID: 3},
			refusal: "did not report leaving the API address within 5m0s",
		},
		{
			name: "demote: nor its cleanup",
			f: Facts{Nodes: []Node{m1, m2, func() Node { n := unlabelled(m3); n.Withdrawn, n.ControlPlanePods = true, 0; return n }()}, Members: []Member{v1, v2},
				Record: rec(&Op{Kind: Demote, Node: "m3", Phase: PhaseCleanup, Started: t0.Add(-time.Hour), PhaseSince: t0.Add(-NodeReportTimeout), MemberID: 3}, "m1", "m2", "m3")},
			why: "demoted m3", masters: []string{"m1", "m2"}, refusal: "its etcd data and checkpoints may remain on its disk",
		},
		{
			name: "demote: a node seen labelled that never got a member just stops being a master",
			f:    Facts{Nodes: []Node{m1, unlabelled(w1l)}, Members: []Member{v1}, Record: rec(nil, "m1", "w1")},
			why:  "steady", masters: []string{"m1"},
		},
		{
			name: "demote: two masters to one",
			f: Facts{Nodes: []Node{m1, func() Node { n := unlabelled(m2); n.Withdrawn, n.ControlPlanePods = true, 0; return n }()}, Members: []Member{v1, v2},
				Record: rec(demoting("m2", PhaseDrain, 2, false), "m1", "m2")},
			act: Act{Kind: RemoveMember, Node: "m2", MemberID: 2},
			op:  &Op{Kind: Demote, Node: "m2", Phase: PhaseRemoveMember, Started: t0, PhaseSince: t0, MemberID: 2},
		},
		{
			name:    "demote: never the last master",
			f:       Facts{Nodes: []Node{unlabelled(m1)}, Members: []Member{v1}, Record: rec(nil, "m1")},
			refusal: "it is the last master",
		},
		{
			name: "demote: never the last master that can lead the controller (render's), while a promoted one remains",
			f: Facts{Nodes: []Node{unlabelled(leads(m1)), w1l}, Members: []Member{v1, voter(4, "w1", "10.0.0.21", true)},
				Record: rec(nil, "m1", "w1")},
			refusal: "it is the last master that can lead this controller",
		},
		{
			name: "demote: a master that can lead, while another that can remains",
			f: Facts{Nodes: []Node{leads(m1), unlabelled(leads(m2)), w1l}, Members: []Member{v1, v2, voter(4, "w1", "10.0.0.21", true)},
				Record: rec(nil, "m1", "m2", "w1")},
			op: &Op{Kind: Demote, Node: "m2", Phase: PhaseWithdraw, Started: t0, PhaseSince: t0, PeerURL: "https://10.0.0.12:2380", MemberID: 2},
		},
		{
			name: "demote: never the last master that can lead while the other that can is not Ready",
			f: Facts{Nodes: []Node{unlabelled(leads(m1)), func(n Node) Node { n.Ready = false; return leads(n) }(w1l)}, Members: []Member{v1, voter(4, "w1", "10.0.0.21", true)},
				Record: rec(nil, "m1", "w1")},
			refusal: "it is the last master that can lead this controller",
		},
		{
			name: "demote: a promoted master, the one that can lead staying",
			f: Facts{Nodes: []Node{leads(m1), unlabelled(w1l)}, Members: []Member{v1, voter(4, "w1", "10.0.0.21", true)},
				Record: rec(nil, "m1", "w1")},
			op: &Op{Kind: Demote, Node: "w1", Phase: PhaseWithdraw, Started: t0, PhaseSince: t0, PeerURL: "https://10.0.0.21:2380", MemberID: 4},
		},
		{
			name:    "demote: not when the voters left would lack a quorum (etcd's strict reconfiguration check)",
			f:       Facts{Nodes: []Node{m1, unlabelled(m2), down1(m3)}, Members: []Member{v1, v2, down(v3)}, Record: rec(nil, "m1", "m2", "m3")},
			refusal: "it would leave 1 answering of 2 voters, fewer than their quorum of 2 (etcd refuses it)",
		},
		{
			name:    "demote: not when etcd has no quorum now",
			f:       Facts{Nodes: []Node{down1(m1), unlabelled(m2)}, Members: []Member{down(v1), v2}, Record: rec(nil, "m1", "m2")},
			refusal: "etcd has no quorum (1 of 2 voters answer)",
		},
		{
			name:    "demote: not a Node created again without the label while its member runs",
			f:       Facts{Nodes: []Node{m1, m2, func() Node { n := unlabelled(m3); n.UID = "new"; return n }()}, Members: []Member{v1, v2, v3}, Record: Record{Masters: []string{"m1", "m2", "m3"}, UIDs: map[string]string{"m3": "old"}}},
			refusal: "its Node was created again without the label while its member 3 runs",
		},
		{
			name: "demote: labelled again while its member was being removed, it stays",
			f:    Facts{Nodes: []Node{m1, m2, m3}, Members: []Member{v1, v2, v3}, Record: rec(demoting("m3", PhaseRemoveMember, 3, false), "m1", "m2", "m3")},
			why:  "abandoned: it is labelled again",
		},
		{
			name: "demote: a member etcd keeps refusing to remove stops the demotion after StepTimeout",
			f: Facts{Nodes: []Node{m1, down1(m2), func() Node { n := unlabelled(m3); n.Withdrawn, n.ControlPlanePods = true, 0; return n }()}, Members: []Member{v1, down(v2), v3},
				Record: rec(&Op{Kind: Demote, Node: "m3", Phase: PhaseRemoveMember, Started: t0.Add(-time.Hour), PhaseSince: t0.Add(-StepTimeout), MemberID: 3}, "m1", "m2", "m3")},
			refusal: "demotion stopped after 10m0s",
		},
		{
			name: "demote: labelled again before its member went, it stays",
			f:    Facts{Nodes: []Node{m1, m2, m3}, Members: []Member{v1, v2, v3}, Record: rec(demoting("m3", PhaseWithdraw, 3, false), "m1", "m2", "m3")},
			why:  "abandoned: it is labelled again",
		},
		{
			name: "promotion abandoned when its label goes: its learner is removed",
			f:    Facts{Nodes: []Node{m1, w1}, Members: []Member{v1, learner(9, "", "10.0.0.21")}, Record: rec(promoting(PhaseLearner, t0, 9), "m1", "w1")},
			act:  Act{Kind: RemoveMember, Node: "w1", MemberID: 9},
		},
		{
			name:    "remove: a live master is demoted by its label, not removed",
			f:       Facts{Nodes: []Node{m1, m2, m3}, Members: []Member{v1, v2, v3}, Record: rec(nil, "m1", "m2", "m3"), Removals: []Removal{{Name: "m3"}}},
			refusal: "it is a live master",
		},
		{
			name:    "remove: a member that answers needs --force",
			f:       Facts{Nodes: []Node{m1, m2}, Members: []Member{v1, v2, v3}, Record: rec(nil, "m1", "m2"), Removals: []Removal{{Name: "m3"}}},
			refusal: "remove it with --force only if its machine is gone for good",
		},
		{
			name: "remove: a dead one goes",
			f:    Facts{Nodes: []Node{m1, m2}, Members: []Member{v1, v2, down(v3)}, Record: rec(nil, "m1", "m2"), Removals: []Removal{{Name: "m3"}}},
			act:  Act{Kind: RemoveMember, Node: "m3", MemberID: 3},
			op:   &Op{Kind: Remove, Node: "m3", Phase: PhaseRemoveMember, Started: t0, PhaseSince: t0, MemberID: 3},
		},
		{
			name:    "remove: never etcd's last voter, even forced",
			f:       Facts{Nodes: nil, Members: []Member{down(v1)}, Record: rec(nil), Removals: []Removal{{Name: "m1", Force: true}}},
			refusal: "it is etcd's last voter",
		},
		{
			name: "a learner whose record was lost is resumed, not left behind",
			f:    Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1, learner(9, "w1", "10.0.0.21")}, Record: rec(nil, "m1", "w1")},
			op:   &Op{Kind: Promote, Node: "w1", Phase: PhaseLearner, Started: t0, PhaseSince: t0, PeerURL: "https://10.0.0.21:2380", MemberID: 9},
			why:  "resuming with its learner 9",
		},
		{
			name:      "grow: a learner that does not catch up is removed",
			f:         Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1, learner(9, "w1", "10.0.0.21")}, Record: rec(promoting(PhaseLearner, t0.Add(-LearnerCatchUpTimeout), 9), "m1", "w1")},
			act:       Act{Kind: RemoveMember, Node: "w1", MemberID: 9},
			refusal:   "did not catch up with the leader within 10m0s",
			failureOn: "w1",
		},
		{
			name:      "grow: an add etcd keeps refusing fails after StepTimeout",
			f:         Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1}, Record: rec(promoting(PhaseLearner, t0.Add(-StepTimeout), 0), "m1", "w1")},
			refusal:   "etcd did not take its learner within 10m0s",
			failureOn: "w1",
		},
		{
			name:    "grow: an apiserver that never becomes Ready ends the promotion with a refusal",
			f:       Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1, voter(9, "w1", "10.0.0.21", true)}, Record: rec(promoting(PhaseControlPlane, t0.Add(-StepTimeout), 9), "m1", "w1")},
			refusal: "its apiserver is not Ready after 10m0s",
		},
		{
			name:    "preflight: another learner holds etcd's one learner place",
			f:       Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1, learner(7, "", "10.0.0.99")}, Record: rec(nil, "m1")},
			refusal: "learner 7 (not started) is a member already",
		},
		{
			name:    "remove: a member that answers again is not removed",
			f:       Facts{Nodes: []Node{m1, m2}, Members: []Member{v1, v2, v3}, Record: rec(&Op{Kind: Remove, Node: "m3", Phase: PhaseRemoveMember, Started: t0, PhaseSince: t0, MemberID: 3}, "m1", "m2")},
			refusal: "its member answers again",
		},
		{
			name: "a stray learner is first only noted",
			f:    Facts{Nodes: []Node{m1}, Members: []Member{v1, learner(7, "", "10.0.0.99")}, Record: rec(nil, "m1")},
			why:  "steady",
		},
		{
			name: "a stray learner that never started is removed",
			f: Facts{Nodes: []Node{m1}, Members: []Member{v1, learner(7, "", "10.0.0.99")},
				Record: Record{Masters: []string{"m1"}, StrayLearners: map[uint64]time.Time{7: t0.Add(-LearnerStartTimeout)}}},
			act: Act{Kind: RemoveMember, MemberID: 7},
		},
		{
			name:    "etcd unreachable: nothing is decided",
			f:       Facts{Nodes: []Node{m1, unlabelled(m2)}, EtcdErr: errors.New("connection refused"), Record: rec(nil, "m1", "m2")},
			why:     "no etcd member answers (connection refused)",
			masters: []string{"m1", "m2"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.Now = t0
			d := Decide(tc.f)
			if d.Act != tc.act {
				t.Errorf("act %+v, want %+v (why: %s)", d.Act, tc.act, d.Why)
			}
			switch {
			case tc.op == nil && d.Record.Op != nil:
				t.Errorf("op %+v, want none (why: %s)", *d.Record.Op, d.Why)
			case tc.op != nil && (d.Record.Op == nil || *d.Record.Op != *tc.op):
				t.Errorf("op %+v, want %+v (why: %s)", d.Record.Op, *tc.op, d.Why)
			}
			var refusals []string
			for _, r := range d.Refusals {
				refusals = append(refusals, r.Node+": "+r.Reason)
			}
			if got := strings.Join(refusals, "\n"); (tc.refusal == "") != (got == "") || !strings.Contains(got, tc.refusal) {
				t.Errorf("refusals %q, want one with %q", got, tc.refusal)
			}
			if tc.why != "" && !strings.Contains(d.Why, tc.why) {
				t.Errorf("why %q, want %q", d.Why, tc.why)
			}
			if tc.masters != nil && strings.Join(d.Record.Masters, ",") != strings.Join(tc.masters, ",") {
				t.Errorf("masters %v, want %v", d.Record.Masters, tc.masters)
			}
			if tc.failureOn != "" {
				if _, ok := d.Record.Failures[tc.failureOn]; !ok {
					t.Errorf("no failure recorded for %s: %+v", tc.failureOn, d.Record.Failures)
				}
			}
		})
	}
}

func down1(n Node) Node { n.APIServerReady = false; return n }

func downSince(r Record, id uint64, at time.Time) Record {
	r.DownSince = map[uint64]time.Time{id: at}
	return r
}

// A failed promotion is not retried before RetryAfter, and is after.
func TestDecideRetryAfterFailure(t *testing.T) {
	w1 := worker("w1", "10.0.0.21")
	w1.Labelled = true
	f := Facts{Nodes: []Node{master("m1", "10.0.0.11"), w1}, Members: []Member{voter(1, "m1", "10.0.0.11", true)},
		Record: Record{Masters: []string{"m1", "w1"}, Failures: map[string]Failure{"w1": {Reason: "x", At: t0}}}}
	f.Now = t0.Add(RetryAfter - time.Second)
	if d := Decide(f); d.Act.Kind != None {
		t.Fatalf("retried before RetryAfter: %+v", d.Act)
	}
	f.Now = t0.Add(RetryAfter)
	d := Decide(f)
	if d.Act.Kind != AddLearner {
		t.Fatalf("not retried after RetryAfter: %+v (%s)", d.Act, d.Why)
	}
	if _, ok := d.Record.Failures["w1"]; ok {
		t.Fatal("the failure stays recorded after the retry began")
	}
}

// Decide does not change the record it was given (the caller's copy is
// what it wrote last).
func TestDecideDoesNotMutateItsInput(t *testing.T) {
	op := &Op{Kind: Promote, Node: "w1", Phase: PhaseLearner, Started: t0, PhaseSince: t0, PeerURL: "https://10.0.0.21:2380"}
	w1 := worker("w1", "10.0.0.21")
	w1.Labelled = true
	f := Facts{Nodes: []Node{w1, master("m1", "10.0.0.11")}, Members: []Member{voter(1, "m1", "10.0.0.11", true), learner(9, "", "10.0.0.21")},
		Record: Record{Masters: []string{"m1"}, Op: op}, Now: t0}
	Decide(f)
	if op.MemberID != 0 || len(f.Record.Masters) != 1 || f.Nodes[0].Name != "w1" {
		t.Fatalf("input changed: op %+v, masters %v, nodes %v", *op, f.Record.Masters, f.Nodes)
	}
}

// The control plane's pods follow the controller's label, not the
// administrator's: a demoted master keeps them until it has left the API
// address, a promoted one gets them once its member votes.
func TestPlacements(t *testing.T) {
	runs := func(n Node) Node { n.RunsControlPlane = true; return n }
	leads := func(n Node) Node { n.CanLead = true; return n }
	m1, m2 := leads(runs(master("m1", "10.0.0.11"))), leads(runs(master("m2", "10.0.0.12")))
	v1, v2 := voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", true)
	w1 := worker("w1", "10.0.0.21")
	w1l := w1
	w1l.Labelled = true
	unlabelled := func(n Node) Node { n.Labelled = false; return n }
	demoting := func(phase Phase) *Op {
		return &Op{Kind: Demote, Node: "m2", Phase: phase, Started: t0, PhaseSince: t0, MemberID: 2}
	}
	tests := []struct {
		name string
		f    Facts
		want []Placement
	}{
		{"steady: nothing moves", Facts{Nodes: []Node{m1, m2, w1}, Members: []Member{v1, v2}, Record: rec(nil, "m1", "m2")}, nil},
		{"a labelled voter without the label gets it (a first-boot master labelled by hand)", Facts{Nodes: []Node{m1, master("m2", "10.0.0.12")}, Members: []Member{v1, v2}, Record: rec(nil, "m1", "m2")}, []Placement{{"m2", true}}},
		{"withdrawing: the pods stay", Facts{Nodes: []Node{m1, unlabelled(m2)}, Members: []Member{v1, v2}, Record: rec(demoting(PhaseWithdraw), "m1", "m2")}, nil},
		{"withdrawn: the drain takes the label", Facts{Nodes: []Node{m1, func(n Node) Node { n.Withdrawn = true; return n }(unlabelled(m2))}, Members: []Member{v1, v2}, Record: rec(demoting(PhaseWithdraw), "m1", "m2")}, []Placement{{"m2", false}}},
		{"the last master unlabelled keeps its pods", Facts{Nodes: []Node{unlabelled(m1)}, Members: []Member{v1}, Record: rec(nil, "m1")}, nil},
		{"a learner gets no pods", Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1, learner(9, "w1", "10.0.0.21")}, Record: rec(&Op{Kind: Promote, Node: "w1", Phase: PhaseLearner, Started: t0, PhaseSince: t0, PeerURL: "https://10.0.0.21:2380", MemberID: 9}, "m1", "w1")}, nil},
		{"its member votes: the pods follow", Facts{Nodes: []Node{m1, w1l}, Members: []Member{v1, voter(9, "w1", "10.0.0.21", true)}, Record: rec(&Op{Kind: Promote, Node: "w1", Phase: PhaseLearner, Started: t0, PhaseSince: t0, PeerURL: "https://10.0.0.21:2380", MemberID: 9}, "m1", "w1")}, []Placement{{"w1", true}}},
		{"a worker carrying the label by hand loses it", Facts{Nodes: []Node{m1, runs(w1)}, Members: []Member{v1}, Record: rec(nil, "m1")}, []Placement{{"w1", false}}},
		{"no repair during an upgrade's step", Facts{Nodes: []Node{m1, runs(w1)}, Members: []Member{v1}, Record: rec(nil, "m1"), UpgradeUnderway: true}, nil},
		{"etcd silent: nothing moves", Facts{Nodes: []Node{m1, runs(w1)}, EtcdErr: errors.New("down"), Record: rec(nil, "m1")}, nil},
		{"a master that runs the control plane without the leader label gets it (grown before the label)", Facts{Nodes: []Node{m1, runs(master("m2", "10.0.0.12"))}, Members: []Member{v1, v2}, Record: rec(nil, "m1", "m2")}, []Placement{{"m2", true}}},
		{"a demoted master's leader label is not put back (its placement is not wanted)", Facts{Nodes: []Node{m1, func(n Node) Node { n.CanLead = false; n.RunsControlPlane = false; return n }(unlabelled(m2))}, Members: []Member{v1}, Record: rec(nil, "m1")}, nil},
	}
	for _, tt := range tests {
		tt.f.Now = t0.Add(time.Minute)
		d := Decide(tt.f)
		if fmt.Sprint(d.Placements) != fmt.Sprint(tt.want) {
			t.Errorf("%s: placements %v, want %v (why: %s)", tt.name, d.Placements, tt.want, d.Why)
		}
	}
}

// etcd's leader is never removed as leader: its leadership goes first to
// a voter that answers, and the removal follows in the next round.
func TestMoveLeaderBeforeRemoval(t *testing.T) {
	m1, m2 := master("m1", "10.0.0.11"), master("m2", "10.0.0.12")
	m2.Labelled, m2.Withdrawn = false, true
	v1, v2 := voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", true)
	op := &Op{Kind: Demote, Node: "m2", Phase: PhaseRemoveMember, Started: t0, PhaseSince: t0, MemberID: 2}
	f := Facts{Nodes: []Node{m1, m2}, Members: []Member{v1, v2}, Leader: 2, Record: rec(op, "m1", "m2"), Now: t0.Add(time.Minute)}
	d := Decide(f)
	if want := (Act{Kind: MoveLeader, Node: "m2", MemberID: 1, Leader: 2}); d.Act != want {
		t.Fatalf("act %+v, want %+v (%s)", d.Act, want, d.Why)
	}
	f.Leader, f.Record = 1, d.Record
	if d = Decide(f); d.Act.Kind != RemoveMember || d.Act.MemberID != 2 {
		t.Errorf("after the hand-over: act %+v, want the removal of 2", d.Act)
	}
	// The command removes at once.
	f = Facts{Nodes: []Node{m1}, Members: []Member{v1, v2}, Leader: 2, Now: t0}
	if act, refusals := DecideRemoval(f, Removal{Name: "m2", Force: true}); act.Kind != RemoveMember || act.MemberID != 2 || len(refusals) > 0 {
		t.Errorf("bootlet master remove --force of the leader: %+v %v", act, refusals)
	}
}

// A learner's promotion carries the --initial-cluster its node starts it
// with: every member, the learner under its node's name.
func TestInitialCluster(t *testing.T) {
	m1, w1 := master("m1", "10.0.0.11"), worker("w1", "10.0.0.21")
	w1.Labelled = true
	op := &Op{Kind: Promote, Node: "w1", Phase: PhaseLearner, Started: t0, PhaseSince: t0, PeerURL: "https://10.0.0.21:2380"}
	d := Decide(Facts{Nodes: []Node{m1, w1}, Members: []Member{voter(1, "m1", "10.0.0.11", true), learner(9, "", "10.0.0.21")}, Record: rec(op, "m1", "w1"), Now: t0})
	if want := "m1=https://10.0.0.11:2380,w1=https://10.0.0.21:2380"; d.Record.Op == nil || d.Record.Op.InitialCluster != want {
		t.Errorf("op %+v, want --initial-cluster %s", d.Record.Op, want)
	}
}

// The review's cases: what an operation under way may and may not do.
func TestOperationBounds(t *testing.T) {
	m1, m2, m3 := master("m1", "10.0.0.11"), master("m2", "10.0.0.12"), master("m3", "10.0.0.13")
	v1, v2, v3 := voter(1, "m1", "10.0.0.11", true), voter(2, "m2", "10.0.0.12", true), voter(3, "m3", "10.0.0.13", true)
	gone := m2
	gone.Labelled, gone.Withdrawn = false, true
	demoting := func(phase Phase, since time.Time) *Op {
		return &Op{Kind: Demote, Node: "m2", Phase: phase, Started: since, PhaseSince: since, MemberID: 2}
	}
	down := func(m Member) Member { m.Healthy = false; return m }
	now := t0.Add(time.Minute)

	t.Run("held during an upgrade's step", func(t *testing.T) {
		d := Decide(Facts{Nodes: []Node{m1, gone, m3}, Members: []Member{v1, v2, v3}, Record: rec(demoting(PhaseRemoveMember, t0), "m1", "m2", "m3"), UpgradeUnderway: true, Now: now})
		if d.Act.Kind != None || d.Record.Op == nil || !strings.Contains(d.Why, "upgrade step") {
			t.Errorf("act %+v op %+v why %q", d.Act, d.Record.Op, d.Why)
		}
	})
	t.Run("not drained while its member cannot go", func(t *testing.T) {
		d := Decide(Facts{Nodes: []Node{m1, gone, m3}, Members: []Member{v1, v2, down(v3)}, Record: rec(demoting(PhaseWithdraw, t0), "m1", "m2", "m3"), Now: now})
		if d.Record.Op == nil || d.Record.Op.Phase != PhaseWithdraw || placedOn(d, "m2") || len(d.Refusals) == 0 {
			t.Errorf("op %+v placements %v refusals %v", d.Record.Op, d.Placements, d.Refusals)
		}
		d = Decide(Facts{Nodes: []Node{m1, gone, m3}, Members: []Member{v1, v2, down(v3)}, Record: rec(demoting(PhaseWithdraw, t0), "m1", "m2", "m3"), Now: t0.Add(StepTimeout)})
		if d.Record.Op != nil || placedOn(d, "m2") {
			t.Errorf("after StepTimeout: op %+v placements %v, want stopped and nothing drained", d.Record.Op, d.Placements)
		}
	})
	t.Run("a removal etcd keeps refusing ends", func(t *testing.T) {
		d := Decide(Facts{Nodes: []Node{m1, gone, m3}, Members: []Member{v1, v2, v3}, Record: rec(demoting(PhaseRemoveMember, t0), "m1", "m2", "m3"), Now: t0.Add(StepTimeout)})
		if d.Record.Op != nil || d.Act.Kind != None || len(d.Refusals) == 0 {
			t.Errorf("op %+v act %+v refusals %v", d.Record.Op, d.Act, d.Refusals)
		}
		op := &Op{Kind: Remove, Node: "m9", Phase: PhaseRemoveMember, Started: t0, PhaseSince: t0, MemberID: 9, Force: true}
		d = Decide(Facts{Nodes: []Node{m1, m2, m3}, Members: []Member{v1, v2, v3, voter(9, "m9", "10.0.0.19", true)}, Record: rec(op, "m1", "m2", "m3"), Now: t0.Add(StepTimeout)})
		if d.Record.Op != nil || d.Act.Kind != None {
			t.Errorf("a forced removal after StepTimeout: op %+v act %+v", d.Record.Op, d.Act)
		}
	})
	t.Run("no leadership move from a leader that does not answer, nor to a helper", func(t *testing.T) {
		d := Decide(Facts{Nodes: []Node{m1, gone, m3}, Members: []Member{v1, down(v2), v3}, Leader: 2, Record: rec(demoting(PhaseRemoveMember, t0), "m1", "m2", "m3"), Now: now})
		if d.Act.Kind != RemoveMember || d.Act.MemberID != 2 {
			t.Errorf("leader down: act %+v, want its removal", d.Act)
		}
		helper := voter(11, "m1-upgrade-helper-1", "10.0.0.11", true)
		helper.Helper = true
		d = Decide(Facts{Nodes: []Node{m1, gone}, Members: []Member{helper, v1, v2}, Leader: 2, Record: rec(demoting(PhaseRemoveMember, t0), "m1", "m2"), Now: now})
		if d.Act.Kind == MoveLeader && d.Act.MemberID == 11 {
			t.Errorf("leadership moved to a helper: %+v", d.Act)
		}
	})
	t.Run("a demotion's Withdraw adds no control plane", func(t *testing.T) {
		bare := gone
		bare.RunsControlPlane, bare.Withdrawn = false, false
		d := Decide(Facts{Nodes: []Node{m1, bare, m3}, Members: []Member{v1, learner(2, "m2", "10.0.0.12"), v3}, Record: rec(demoting(PhaseWithdraw, t0), "m1", "m2", "m3"), Now: now})
		for _, p := range d.Placements {
			if p.Node == "m2" && p.ControlPlane {
				t.Errorf("placements %v: the control plane put on a node being demoted", d.Placements)
			}
		}
	})
}

func placedOn(d Decision, node string) bool {
	for _, p := range d.Placements {
		if p.Node == node {
			return true
		}
	}
	return false
}
