package masters

import "fmt"

// continueOp takes the operation under way one phase further, or says
// what it waits for.
func (v view) continueOp(d *Decision) {
	op := d.Record.Op
	switch op.Kind {
	case Promote:
		v.continuePromote(d, op)
	case Demote:
		v.continueDemote(d, op)
	case Remove:
		v.continueRemove(d, op)
	default:
		d.Record.Op = nil
		d.Why = fmt.Sprintf("dropped an operation of unknown kind %q", op.Kind)
	}
}

func (v view) phase(op *Op, p Phase) {
	op.Phase, op.PhaseSince = p, v.f.Now
}

// waitedOut: op's phase has waited NodeReportTimeout for its node.
func (v view) waitedOut(op *Op) bool { return v.f.Now.Sub(op.PhaseSince) >= NodeReportTimeout }

// daemonReport is what a demotion's phase waits for from the node's
// daemon: what the daemon does, what it reports, and what may be left if
// it never does.
type daemonReport struct{ does, report, left string }

var (
	withdrawReport = daemonReport{"withdraw it from the API address", "leaving the API address", "the demotion goes on, and the address moves once its apiserver is gone"}
	cleanupReport  = daemonReport{"set its etcd data aside and drop its checkpoints", "its cleanup", "its etcd data and checkpoints may remain on its disk"}
)

// awaitsDaemon says whether op still waits for r from its node's daemon
// (not yet reported, and the node still there), saying so in d; past
// NodeReportTimeout it waits no longer and says what may be left.
func (v view) awaitsDaemon(d *Decision, op *Op, pending bool, r daemonReport) bool {
	if !pending {
		return false
	}
	if !v.waitedOut(op) {
		d.Why = fmt.Sprintf("demoting %s: waiting for its daemon to %s", op.Node, r.does)
		return true
	}
	d.Refusals = append(d.Refusals, Refusal{op.Node, fmt.Sprintf("its daemon did not report %s within %s; %s", r.report, NodeReportTimeout, r.left)})
	return false
}

// awaitsRemoval says whether op waits because etcd would refuse m's
// removal (the rule book's canRemove), saying why in d; after
// StepTimeout in its phase the demotion stops. when places the wait in
// the demotion for the refusal ("" at the removal itself).
func (v view) awaitsRemoval(d *Decision, op *Op, m Member, when string) bool {
	ok, why := v.canRemove(m)
	switch {
	case ok:
		return false
	case v.f.Now.Sub(op.PhaseSince) >= StepTimeout:
		v.stopDemotion(d, op, fmt.Sprintf("demotion stopped after %s%s: its member cannot be removed: %s", StepTimeout, when, why))
	default:
		d.Refusals = append(d.Refusals, Refusal{op.Node, "demotion waits" + when + ": removing its member: " + why})
		d.Why = fmt.Sprintf("demoting %s: waiting until its member can go", op.Node)
	}
	return true
}

// stopDemotion ends op, a demotion that cannot go on, saying why.
func (v view) stopDemotion(d *Decision, op *Op, reason string) {
	d.Record.Op = nil
	d.Refusals = append(d.Refusals, Refusal{op.Node, reason})
	d.Why = fmt.Sprintf("demotion of %s stopped", op.Node)
}

func (v view) fail(d *Decision, op *Op, reason string) {
	if d.Record.Failures == nil {
		d.Record.Failures = map[string]Failure{}
	}
	d.Record.Failures[op.Node] = Failure{Reason: reason, At: v.f.Now}
	d.Refusals = append(d.Refusals, Refusal{op.Node, fmt.Sprintf("promotion failed: %s; the next attempt in %s", reason, RetryAfter)})
	d.Record.Op = nil
}

func (v view) continuePromote(d *Decision, op *Op) {
	n, ok := v.nodes[op.Node]
	m := v.memberByID(op.MemberID)
	if op.MemberID == 0 {
		m = v.memberOf(op.Node, op.PeerURL)
	}
	if !ok || !n.Labelled {
		// The label went (or the Node) while it was being promoted.
		switch {
		case m == nil:
			d.Record.Op = nil
			d.Why = fmt.Sprintf("promotion of %s abandoned: its label is gone, and it has no member", op.Node)
		case m.Learner:
			d.Record.Op = nil
			d.Act = Act{Kind: RemoveMember, Node: op.Node, MemberID: m.ID}
			d.Why = fmt.Sprintf("promotion of %s abandoned: its label is gone; removing its learner", op.Node)
		case ok:
			// A voter already: it leaves the way every master leaves.
			*op = Op{Kind: Demote, Node: op.Node, PeerURL: op.PeerURL, MemberID: m.ID, Started: v.f.Now}
			v.phase(op, PhaseWithdraw)
			d.Why = fmt.Sprintf("promotion of %s reversed: its label is gone after its member became a voter", op.Node)
		default:
			// Its Node is deleted: the rules of a deleted master's
			// member apply (removeDeleted), not a demotion's.
			d.Record.Op = nil
			d.Why = fmt.Sprintf("promotion of %s ended: its Node is deleted after its member became a voter", op.Node)
		}
		return
	}
	switch op.Phase {
	case PhaseLearner:
		if m == nil {
			if op.MemberID != 0 {
				v.fail(d, op, fmt.Sprintf("its learner %x left etcd's member list", op.MemberID))
				return
			}
			if v.f.Now.Sub(op.Started) >= StepTimeout {
				v.fail(d, op, fmt.Sprintf("etcd did not take its learner within %s", StepTimeout))
				return
			}
			// The add was recorded but not done, or its answer lost: ask
			// again (etcd refuses a peer URL twice, and the next round
			// finds the learner by it).
			d.Act = Act{Kind: AddLearner, Node: op.Node, PeerURL: op.PeerURL}
			d.Why = fmt.Sprintf("promoting %s: adding its member as a learner", op.Node)
			return
		}
		if op.MemberID == 0 {
			// The learner's clock starts when etcd shows it.
			op.MemberID = m.ID
			v.phase(op, PhaseLearner)
		}
		if !m.Learner {
			v.phase(op, PhaseControlPlane)
			d.Why = fmt.Sprintf("promoting %s: its member votes; waiting for its apiserver", op.Node)
			return
		}
		op.InitialCluster = v.initialCluster(op.Node, m.ID)
		since := v.f.Now.Sub(op.PhaseSince)
		if m.Name == "" {
			if since >= LearnerStartTimeout {
				d.Act = Act{Kind: RemoveMember, Node: op.Node, MemberID: m.ID}
				v.fail(d, op, fmt.Sprintf("its etcd member did not start within %s; its learner is removed", LearnerStartTimeout))
				return
			}
			d.Why = fmt.Sprintf("promoting %s: waiting for its daemon to start learner %x", op.Node, m.ID)
			return
		}
		if since >= LearnerCatchUpTimeout {
			d.Act = Act{Kind: RemoveMember, Node: op.Node, MemberID: m.ID}
			v.fail(d, op, fmt.Sprintf("its learner did not catch up with the leader within %s; it is removed", LearnerCatchUpTimeout))
			return
		}
		// etcd refuses while the learner lags; the next round asks again.
		d.Act = Act{Kind: PromoteLearner, Node: op.Node, MemberID: m.ID}
		d.Why = fmt.Sprintf("promoting %s: promoting learner %x to voter", op.Node, m.ID)
	case PhaseControlPlane:
		if n.APIServerReady {
			d.Record.Op = nil
			d.Why = fmt.Sprintf("promoted %s: its member votes and its apiserver is Ready", op.Node)
			return
		}
		if v.f.Now.Sub(op.PhaseSince) >= StepTimeout {
			d.Record.Op = nil
			d.Refusals = append(d.Refusals, Refusal{op.Node, fmt.Sprintf("its member votes, but its apiserver is not Ready after %s: see its kubelet and the apiserver DaemonSet's pod on it", StepTimeout)})
			d.Why = fmt.Sprintf("promotion of %s ended without its apiserver", op.Node)
			return
		}
		d.Why = fmt.Sprintf("promoting %s: waiting for its apiserver to be Ready", op.Node)
	default:
		d.Record.Op = nil
		d.Why = fmt.Sprintf("dropped a promotion in unknown phase %q", op.Phase)
	}
}

func (v view) continueDemote(d *Decision, op *Op) {
	n, present := v.nodes[op.Node]
	m := v.memberByID(op.MemberID)
	if present && n.Labelled && m != nil {
		// Labelled again before its member went: it stays a master, and
		// its daemon offers it for the API address again.
		d.Record.Op = nil
		d.Why = fmt.Sprintf("demotion of %s abandoned: it is labelled again", op.Node)
		return
	}
	switch op.Phase {
	case PhaseWithdraw:
		if v.awaitsDaemon(d, op, present && !n.Withdrawn, withdrawReport) {
			return
		}
		// Drained only if its member can then go: a node drained whose
		// member stays would serve no apiserver for nothing.
		if m != nil && v.awaitsRemoval(d, op, *m, " before its drain") {
			return
		}
		v.phase(op, PhaseDrain)
		fallthrough
	case PhaseDrain:
		if present && n.ControlPlanePods > 0 && !v.waitedOut(op) {
			d.Why = fmt.Sprintf("demoting %s: waiting for its %d control-plane pods to leave", op.Node, n.ControlPlanePods)
			return
		}
		v.phase(op, PhaseRemoveMember)
		fallthrough
	case PhaseRemoveMember:
		if m != nil {
			if v.awaitsRemoval(d, op, *m, "") {
				return
			}
			if v.f.Now.Sub(op.PhaseSince) >= StepTimeout {
				// etcd kept refusing the removal itself.
				v.stopDemotion(d, op, fmt.Sprintf("demotion stopped: etcd did not remove its member %x within %s", m.ID, StepTimeout))
				return
			}
			d.Act = v.removeAct(op.Node, *m)
			d.Why = fmt.Sprintf("demoting %s: removing its member %x", op.Node, m.ID)
			if d.Act.Kind == MoveLeader {
				d.Why = fmt.Sprintf("demoting %s: its member %x leads etcd; handing the leadership to %x first", op.Node, m.ID, d.Act.MemberID)
			}
			return
		}
		v.phase(op, PhaseCleanup)
		fallthrough
	case PhaseCleanup:
		if v.awaitsDaemon(d, op, present && !n.Cleaned, cleanupReport) {
			return
		}
		d.Record.Op = nil
		d.Record.dropMaster(op.Node)
		d.Why = fmt.Sprintf("demoted %s", op.Node)
	default:
		d.Record.Op = nil
		d.Why = fmt.Sprintf("dropped a demotion in unknown phase %q", op.Phase)
	}
}

func (v view) continueRemove(d *Decision, op *Op) {
	m := v.memberByID(op.MemberID)
	if m == nil {
		d.Record.Op = nil
		d.Record.dropMaster(op.Node)
		d.Why = fmt.Sprintf("removed %s's member", op.Node)
		return
	}
	if m.Healthy && !op.Force {
		d.Record.Op = nil
		d.Refusals = append(d.Refusals, Refusal{op.Node, "its member answers again: it is not removed"})
		return
	}
	if ok, why := v.canRemove(*m); !ok {
		d.Record.Op = nil
		d.Refusals = append(d.Refusals, Refusal{op.Node, "its member is not removed: " + why})
		return
	}
	if v.f.Now.Sub(op.PhaseSince) >= StepTimeout {
		d.Record.Op = nil
		d.Refusals = append(d.Refusals, Refusal{op.Node, fmt.Sprintf("etcd did not remove its member %x within %s", m.ID, StepTimeout)})
		return
	}
	d.Act = v.removeAct(op.Node, *m)
	d.Why = fmt.Sprintf("removing %s's member %x", op.Node, m.ID)
}
