package agent

import (
	"fmt"
	"net/netip"

	"github.com/bootlet/bootlet/masters"
)

// Facts are what one round of the agent observed of its node.
type Facts struct {
	// Labelled: its Node carries masters.Label.
	Labelled bool
	// Op is the record's operation when it is this node's; nil otherwise.
	Op *masters.Op
	// Annotations are its Node's.
	Annotations map[string]string
	// Stored: bootlet's store holds its member's pod; Aside: a demotion
	// set it aside. StoredLearner is the learner the stored pod was
	// started as (0: a first boot's member, or none).
	Stored, Aside bool
	StoredLearner uint64
	// Withdrawn: the file keepalived's check reads is there.
	Withdrawn bool
	// HoldsAddress: one of the node's interfaces has the API address.
	HoldsAddress bool
	// InternalIP is its Node's, where its member listens (invalid: none).
	InternalIP netip.Addr
	// CanLead: this daemon runs a candidate of the masters' controller
	// (Config.CanLead); LeaderLabelled: its Node carries
	// masters.LabelLeader.
	CanLead, LeaderLabelled bool
}

// Decision is what the agent does this round.
type Decision struct {
	// Annotate sets ("true") or removes (false) each annotation that
	// changes.
	Annotate map[string]bool
	// Withdraw writes (true) or removes (false) the file; nil leaves it.
	Withdraw *bool
	// SetAside: the member's pod and data go aside (Cleanup).
	SetAside bool
	// Prepare: make this node's member's pod from a master's and keep it
	// aside, so that it can host a member (a labelled node that never was
	// a master).
	Prepare bool
	// StartLearner is the --initial-cluster to start the member with as
	// learner Learner; "" none.
	StartLearner string
	Learner      uint64
	// LabelLeader sets masters.LabelLeader on its Node. Never removed
	// here: a daemon that can lead keeps that identity.
	LabelLeader bool
	Why         string
}

// Decide is the agent's rule book.
func Decide(f Facts) Decision {
	d := Decision{Annotate: map[string]bool{}, LabelLeader: f.CanLead && !f.LeaderLabelled}
	demoting := f.Op != nil && f.Op.Kind == masters.Demote
	promoting := f.Op != nil && f.Op.Kind == masters.Promote

	withdraw := f.Withdrawn
	switch {
	case demoting:
		withdraw = true
	case f.Labelled:
		withdraw = false
	}
	if withdraw != f.Withdrawn {
		d.Withdraw = &withdraw
	}

	want := map[string]bool{masters.AnnotationMemberHost: f.Stored || f.Aside}
	switch {
	case demoting:
		want[masters.AnnotationWithdrawn] = f.Withdrawn && !f.HoldsAddress
		cleaning := f.Op.Phase == masters.PhaseCleanup
		want[masters.AnnotationCleaned] = cleaning && !f.Stored
		if cleaning && f.Stored {
			d.SetAside = true
			d.Why = "demoted: setting the member aside"
		} else if !f.HoldsAddress && f.Withdrawn {
			d.Why = "demoting: out of the API address"
		} else {
			d.Why = "demoting: leaving the API address"
		}
	case f.Labelled:
		want[masters.AnnotationWithdrawn] = false
		want[masters.AnnotationCleaned] = false
		if !f.Stored && !f.Aside && f.InternalIP.IsValid() {
			// A node that never was a master: its member's pod comes
			// from a master's, set aside as a demoted master's is, so
			// that the promotion starts it the same way.
			d.Prepare = true
			d.Why = "labelled, with no member: preparing its pod from a master's"
		}
	}
	for k, v := range want {
		if (f.Annotations[k] == "true") != v {
			d.Annotate[k] = v
		}
	}

	if promoting && f.Op.Phase == masters.PhaseLearner && f.Op.MemberID != 0 && f.Op.InitialCluster != "" {
		switch {
		case f.Stored && f.StoredLearner != f.Op.MemberID:
			// Not this learner's: a member etcd has removed (a failed
			// promotion's learner, a dead master's come back). It goes
			// aside, and the next round starts the learner.
			d.SetAside = true
			d.Why = fmt.Sprintf("promoted: its stored member is not learner %x; setting it aside", f.Op.MemberID)
		case f.Stored:
		case f.Aside:
			d.StartLearner, d.Learner = f.Op.InitialCluster, f.Op.MemberID
			d.Why = fmt.Sprintf("promoted: starting learner %x", f.Op.MemberID)
		default:
			d.Why = "promoted, but this node has no member to start yet (its pod not prepared)"
		}
	}
	return d
}
