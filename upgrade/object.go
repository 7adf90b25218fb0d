package upgrade

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	btypes "github.com/bootlet/bootlet/types"
)

// The Failing condition's reasons for a stopped upgrade (Summarize's).
const (
	reasonRolledBack   = "RolledBack"
	reasonNeedsAPerson = "NeedsAPerson"
)

// ObjectStatus is the desired-version object's status for a round: what
// runs (s), the progress to keep (p), and the conditions, which keep their
// last transition time from prev while their status holds.
func ObjectStatus(prev btypes.ClusterVersionStatus, s Status, current Versions, p Progress, generation int64, now time.Time) btypes.ClusterVersionStatus {
	out := btypes.ClusterVersionStatus{
		ObservedGeneration: generation,
		Current:            btypes.Versions{Kubernetes: current.Kubernetes, Etcd: current.Etcd, CoreDNS: current.CoreDNS},
		Step:               s.Step,
		InFlight:           objectStep(p.InFlight, p.Began),
		RollingBack:        objectStep(p.RollingBack, p.Began),
		Conditions:         append([]metav1.Condition(nil), prev.Conditions...),
		History:            prev.History,
	}
	if p.Stopped != nil && p.RollingBack == nil {
		out.StoppedGeneration = p.StoppedFor
	}
	for _, r := range s.Running {
		out.Components = append(out.Components, btypes.ComponentVersion{Component: string(r.Component), Node: r.Node, Version: r.Version})
	}
	for _, c := range s.Conditions {
		meta.SetStatusCondition(&out.Conditions, metav1.Condition{
			Type: c.Type, Status: metav1.ConditionStatus(c.Status), Reason: c.Reason, Message: c.Message,
			ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
		})
	}
	return out
}

func objectStep(s *Step, began time.Time) *btypes.UpgradeStep {
	if s == nil {
		return nil
	}
	out := &btypes.UpgradeStep{Component: string(s.Component), Node: s.Node, From: s.From, To: s.To}
	if !began.IsZero() {
		t := metav1.NewTime(began)
		out.Began = &t
	}
	return out
}

// ProgressOf is the progress a status kept: what a new leader, or the same
// one after a reboot, resumes from.
func ProgressOf(st btypes.ClusterVersionStatus) Progress {
	var p Progress
	step := func(o *btypes.UpgradeStep) *Step {
		if o == nil {
			return nil
		}
		if o.Began != nil {
			p.Began = o.Began.Time
		}
		return &Step{Component: Component(o.Component), Node: o.Node, From: o.From, To: o.To}
	}
	p.InFlight = step(st.InFlight)
	p.RollingBack = step(st.RollingBack)
	if f := meta.FindStatusCondition(st.Conditions, Failing); f != nil && f.Status == metav1.ConditionTrue {
		switch f.Reason {
		case reasonRolledBack:
			p.Stopped = &Decision{RollBack, f.Message}
		case reasonNeedsAPerson:
			p.Stopped = &Decision{Hold, f.Message}
		}
	}
	if p.Stopped != nil && p.RollingBack == nil {
		p.StoppedFor = st.StoppedGeneration
	}
	return p
}

// History states (btypes.UpgradeHistory.State).
const (
	HistoryPartial    = "Partial"
	HistoryCompleted  = "Completed"
	HistoryRolledBack = "RolledBack"
)

// maxHistory is how many upgrades the status keeps, newest first.
const maxHistory = 10

// History is prev after a round that decided a on the way to desired:
// an upgrade's entry opens (Partial) with its first step, is Completed once
// the cluster runs desired, and RolledBack when a step was put back; a hold
// leaves it Partial with the reason. Newest first.
func History(prev []btypes.UpgradeHistory, desired string, a Action, now time.Time) []btypes.UpgradeHistory {
	out := append([]btypes.UpgradeHistory(nil), prev...)
	open := len(out) > 0 && out[0].Version == desired && out[0].State == HistoryPartial && out[0].CompletionTime == nil
	t := metav1.NewTime(now)
	switch a.Kind {
	case DoBegin:
		if !open {
			out = append([]btypes.UpgradeHistory{{Version: desired, State: HistoryPartial, StartedTime: t}}, out...)
		}
		out[0].Message = a.Message
	case DoComplete, DoWait, DoRollBack:
		if open {
			out[0].Message = a.Message
		}
	case DoNothing:
		if open && desired != "" {
			out[0].State, out[0].CompletionTime, out[0].Message = HistoryCompleted, &t, a.Message
		}
	case DoStop:
		if open {
			out[0].Message = a.Message
			if a.Progress.Stopped != nil && a.Progress.Stopped.Verdict == RollBack {
				out[0].State, out[0].CompletionTime = HistoryRolledBack, &t
			}
		}
	}
	if len(out) > maxHistory {
		out = out[:maxHistory]
	}
	return out
}
