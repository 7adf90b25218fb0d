package checkpointer

import (
	"fmt"
	"strings"
	"time"
)

// The checkpointer's rule book, pure: Decide (docs/checkpointer.md).

// Timing are the checkpointer's hysteresis settings.
type Timing struct {
	// ActivateAfter: the apiserver must have been unreachable this long
	// before a checkpoint runs (a restarting apiserver comes back sooner).
	ActivateAfter time.Duration
	// ActivateAfterStart replaces ActivateAfter while the apiserver has not
	// answered once since bootlet started: after a reboot no self-hosted
	// apiserver can run before an apiserver does (the kubelet needs one to
	// start API pods), so waiting longer only delays the control plane. A
	// bootlet restarted beside a healthy apiserver reaches it at its first
	// probe, within milliseconds.
	ActivateAfterStart time.Duration
	// WithdrawAfter: the self-hosted pod must have been Running and Ready
	// this long before its checkpoint pod is withdrawn.
	WithdrawAfter time.Duration
	// FlapWindow and MaxWithdrawAfter: each withdrawal within FlapWindow of
	// the previous one doubles WithdrawAfter, up to MaxWithdrawAfter.
	FlapWindow       time.Duration
	MaxWithdrawAfter time.Duration
}

// DefaultTiming: activate after 10 s without an apiserver (the
// apiserver's own readiness probe fails after 3 s, and the kubelet restarts
// a crashed one at once); withdraw after 20 s Ready (about two periods of
// the kubeadm apiserver's liveness probe).
var DefaultTiming = Timing{
	ActivateAfter: 10 * time.Second, ActivateAfterStart: 2 * time.Second, WithdrawAfter: 20 * time.Second,
	FlapWindow: 10 * time.Minute, MaxWithdrawAfter: 5 * time.Minute,
}

// World is what Decide looks at: one tick's view of the
// apiserver and the node.
type World struct {
	Now time.Time
	// Reachable: the apiserver answered /readyz ok at this tick.
	// UnreachableSince: since when it has not (or since bootlet started,
	// when it never answered); zero while reachable.
	Reachable        bool
	UnreachableSince time.Time
	// NeverReachable: the apiserver has not answered once since bootlet
	// started (then UnreachableSince is the start).
	NeverReachable bool
	// Fresh: the pod list of this tick came from the apiserver, after it
	// became reachable: no decision is ever made from a cache or from a
	// list older than an outage (bootkube#262).
	Fresh bool
}

// Facts is one component's view at this tick.
type Facts struct {
	// Stored is the stored checkpoint's hash ("" none).
	Stored string
	// Candidate is the checkpoint of the newest Running and Ready
	// self-hosted pod of the component on this node, from the fresh list,
	// with all its objects read in the same tick ("" none: no such pod, or
	// an object could not be read).
	Candidate string
	// SelfHosted: a self-hosted pod of the component is on this node in the
	// fresh list (whatever its state). SelfHostedReadySince: when the newest
	// Running and Ready one turned Ready, by its Ready condition (zero: none
	// Ready).
	SelfHosted           bool
	SelfHostedReadySince time.Time
	// LocalReady: while the apiserver is unreachable, the container
	// runtime runs a self-hosted pod of the component (a READY sandbox and
	// a running container with the UID of a pod the rule book verified),
	// and, when the pod has an HTTP readiness probe, that pod's own process
	// answers it (nil: not asked or no answer). It is the local view
	// without an apiserver, read through CRI: bootlet does not depend on
	// the kubelet's API, which answers only the apiserver's client
	// certificate (docs/security.md, "The kubelet (`make up`)").
	LocalReady *bool
	// RuntimeRunning: the container runtime (shared with the kubelet) has a
	// READY sandbox and a running container with the UID of the newest
	// Ready self-hosted pod (nil: not asked or no answer). After a reboot
	// the old sandbox is NOTREADY, so a Ready status left in etcd is not
	// corroborated by it.
	RuntimeRunning *bool
	// SelfHostedServes: the newest Ready self-hosted pod's own process
	// answers its readiness endpoint (nil: not asked, because the
	// checkpoint pod cannot answer for it: sharesReadinessPort). When
	// asked, it is the only evidence that counts: the other three may all
	// be the checkpoint's answer. ServesWhy says why not.
	SelfHostedServes *bool
	ServesWhy        string
	// OwnerGone: through the fresh apiserver, the stored checkpoint's
	// controller was read and is gone (NotFound), is another object of
	// the same name (another UID), no longer asks for a checkpoint, or is
	// a DaemonSet that no longer selects this node.
	// Only the I/O's explicit read sets it, never an empty list or an
	// error: while the apiserver cannot answer, "gone" cannot be told.
	OwnerGone bool
	// Disallowed: the stored checkpoint fails the rule book on its own
	// record, with no apiserver needed: its namespace is not served, or its
	// owner is a bare pod or a kind other than DaemonSet and Deployment (a
	// record of an older bootlet, or a narrowed --checkpoint-namespaces).
	Disallowed bool
	// CandidateConflicts: the candidate's verified owner is not the
	// stored checkpoint's (another controller of the same name, or of
	// another kind): it never replaces the stored one while that one's
	// owner stands.
	CandidateConflicts bool
	// CandidateUngated names the upgrade step whose version the candidate
	// runs while that step has not passed its gate, or is being put back
	// ("" none): the upgrade's gate, not one Ready pod, says a version
	// works (docs/design/upgrade.md, "What acts on the rules").
	CandidateUngated string
	// Active: a pod run from the checkpoint is in bootlet's registry,
	// created at ActiveSince for ActiveCause; ActiveTerminating: its
	// withdrawal is under way.
	Active            bool
	ActiveSince       time.Time
	ActiveCause       Cause
	ActiveTerminating bool
}

// Cause is why a checkpoint pod was activated
// (types.AnnotationCheckpointActivatedBy).
type Cause string

const (
	// CauseStart: the apiserver had not answered once since bootlet
	// started (a reboot, or the daemon's start). No self-hosted apiserver
	// ran before it, so nothing flaps: the checkpoint is withdrawn as soon
	// as the self-hosted pod's own process answers its readiness endpoint.
	CauseStart Cause = "start"
	// CauseOutage: the apiserver went away under a running bootlet (or the
	// pod predates the annotation). It may flap: the withdrawal waits
	// WithdrawAfter, doubled for each recent withdrawal.
	CauseOutage Cause = "outage"
)

// CauseOf reads a checkpoint pod's cause from its annotation: CauseStart
// only when it says so, CauseOutage otherwise (the cautious rule).
func CauseOf(annotation string) Cause {
	if Cause(annotation) == CauseStart {
		return CauseStart
	}
	return CauseOutage
}

// Memory is what Decide remembers of a component between
// ticks (in memory: after a bootlet restart the timers start again, which
// only ever delays a withdrawal).
type Memory struct {
	// ReadySince: since when the self-hosted pod has been seen Ready,
	// corroborated, continuously while the checkpoint is active.
	ReadySince time.Time
	// Withdrawals within the flap window, oldest first.
	Withdrawals []time.Time
}

// Action is what to do about one component.
type Action string

const (
	ActionKeep     Action = ""
	ActionStore    Action = "store"
	ActionActivate Action = "activate"
	ActionWithdraw Action = "withdraw"
	ActionRemove   Action = "remove"
)

// Decision is Decide's answer for one component.
type Decision struct {
	Actions []Action
	// Why explains the decision for the log (also when it keeps).
	Why string
	// Cause is why the checkpoint is activated (with ActionActivate).
	Cause Cause
	// Memory is the component's memory for the next tick.
	Memory Memory
}

// Decide is the checkpointer's rule book for one component, pure: 0 drop, 1 store, 2 activate,
// 3 withdraw. Each rule and why it holds: docs/design/checkpointer.md, "Why each rule holds"
// (the table: "The rule book: `Facts` → `Decide` → `Decision`").
func Decide(w World, c Facts, mem Memory, t Timing) Decision {
	d := Decision{Memory: Memory{ReadySince: mem.ReadySince}}
	for _, at := range mem.Withdrawals {
		if w.Now.Sub(at) < t.FlapWindow {
			d.Memory.Withdrawals = append(d.Memory.Withdrawals, at)
		}
	}
	fresh := w.Reachable && w.Fresh
	var why []string

	// 0. Drop what the rule book refuses: a record it could never store
	// today (at once, it needs no apiserver), and one whose owner the fresh
	// apiserver says is gone. An active checkpoint pod is withdrawn first
	// (Disallowed, once the apiserver answers), or kept while it may be the
	// only instance (OwnerGone, see rule 3).
	storedHash := c.Stored
	if storedHash != "" && !c.Active && (c.Disallowed || fresh && c.OwnerGone && !c.SelfHosted) {
		d.Actions = append(d.Actions, ActionRemove)
		if c.Disallowed {
			why = append(why, "checkpoint not allowed by the ownership rules: removed")
		} else {
			why = append(why, "owner deleted, replaced, no longer annotated or no longer selecting this node: checkpoint removed")
		}
		storedHash = ""
	}

	// 1. Store or advance.
	switch {
	case fresh && c.Candidate != "" && c.CandidateConflicts && storedHash != "":
		why = append(why, "a Ready pod of another controller of the same name asks for this checkpoint: refused")
	case fresh && c.Candidate != "" && c.Candidate != storedHash && c.CandidateUngated != "" && storedHash != "":
		why = append(why, "the newest Ready pod runs the version of "+c.CandidateUngated+", which has not passed its gate: the checkpoint keeps the last version that passed")
	case fresh && c.Candidate != "" && c.Candidate != storedHash:
		d.Actions = append(d.Actions, ActionStore)
		if storedHash == "" {
			why = append(why, "first Ready self-hosted pod: checkpoint stored")
		} else {
			why = append(why, "self-hosted pod changed: checkpoint moved forward")
		}
	}
	c.Stored = storedHash
	stored := c.Stored != "" || c.Candidate != "" && fresh && (!c.CandidateConflicts || storedHash == "")

	// Corroborated readiness of the self-hosted pod, for withdrawal.
	corroborated := false
	notServing := c.SelfHostedServes != nil && !*c.SelfHostedServes
	if c.Active && fresh && !c.SelfHostedReadySince.IsZero() && !notServing {
		if c.SelfHostedServes != nil || c.RuntimeRunning != nil && *c.RuntimeRunning {
			corroborated = true
		} else if c.SelfHostedReadySince.After(c.ActiveSince) {
			corroborated = true
		}
	}
	if corroborated {
		if d.Memory.ReadySince.IsZero() {
			d.Memory.ReadySince = w.Now
		}
	} else {
		d.Memory.ReadySince = time.Time{}
	}

	switch {
	case c.Active && c.ActiveTerminating:
		why = append(why, "checkpoint pod is being withdrawn")
	case c.Active && c.Disallowed && fresh:
		d.Actions = append(d.Actions, ActionWithdraw)
		why = append(why, "checkpoint not allowed by the ownership rules: withdrawn")
	case c.Active:
		// 3. Withdraw. A checkpoint activated at bootlet's start stood in
		// for an apiserver that had not run yet, not for one that went
		// away: the self-hosted pod's own process answering its readiness
		// endpoint (the pivot's evidence) is enough, at once.
		need := withdrawAfter(t, len(d.Memory.Withdrawals))
		ownAnswers := c.SelfHostedServes != nil && *c.SelfHostedServes
		if c.ActiveCause == CauseStart && ownAnswers {
			need = 0
		}
		switch {
		case !fresh:
			why = append(why, "active: apiserver not reachable or list not fresh")
		case c.SelfHostedReadySince.IsZero():
			why = append(why, "active: no Ready self-hosted pod on this node, the checkpoint is the only instance")
		case notServing:
			why = append(why, "active: the self-hosted pod is Ready, but its own process does not answer its readiness endpoint, which it shares with the checkpoint: "+c.ServesWhy)
		case !corroborated:
			why = append(why, "active: the self-hosted pod's Ready status predates the checkpoint, and neither the kubelet nor the runtime confirms it runs")
		case w.Now.Sub(d.Memory.ReadySince) < need:
			why = append(why, fmt.Sprintf("active: self-hosted pod Ready%s for %s of %s", ownAnswer(c), w.Now.Sub(d.Memory.ReadySince).Round(time.Second), need))
		case need == 0:
			d.Actions = append(d.Actions, ActionWithdraw)
			d.Memory.Withdrawals = append(d.Memory.Withdrawals, w.Now)
			d.Memory.ReadySince = time.Time{}
			why = append(why, "checkpoint activated at bootlet's start, and the self-hosted pod's own process answers its readiness endpoint: checkpoint withdrawn")
		default:
			d.Actions = append(d.Actions, ActionWithdraw)
			d.Memory.Withdrawals = append(d.Memory.Withdrawals, w.Now)
			d.Memory.ReadySince = time.Time{}
			why = append(why, fmt.Sprintf("self-hosted pod Ready%s for %s: checkpoint withdrawn", ownAnswer(c), need))
		}
	case w.Reachable:
		// Removal is rule 0.
	default:
		// 2. Activate.
		switch {
		case c.Disallowed:
			why = append(why, "apiserver unreachable, but the checkpoint is not allowed by the ownership rules")
		case !stored:
			why = append(why, "apiserver unreachable, but no checkpoint is stored")
		case c.LocalReady != nil && *c.LocalReady:
			why = append(why, "apiserver unreachable, but the runtime runs the self-hosted pod and it answers its readiness endpoint")
		case w.Now.Sub(w.UnreachableSince) < activateAfter(w, t):
			why = append(why, fmt.Sprintf("apiserver unreachable for %s of %s", w.Now.Sub(w.UnreachableSince).Round(time.Second), activateAfter(w, t)))
		default:
			d.Actions = append(d.Actions, ActionActivate)
			d.Cause = CauseOutage
			if w.NeverReachable {
				d.Cause = CauseStart
			}
			why = append(why, fmt.Sprintf("apiserver unreachable for %s: checkpoint activated (%s)", w.Now.Sub(w.UnreachableSince).Round(time.Second), d.Cause))
		}
	}
	d.Why = strings.Join(why, "; ")
	return d
}

// ownAnswer names, for the log, the evidence of a shared readiness port.
func ownAnswer(c Facts) string {
	if c.SelfHostedServes != nil {
		return " (its own process answers its readiness endpoint)"
	}
	return ""
}

// activateAfter is the activation delay: shorter while the apiserver has
// not answered once since bootlet started.
func activateAfter(w World, t Timing) time.Duration {
	if w.NeverReachable && t.ActivateAfterStart > 0 && t.ActivateAfterStart < t.ActivateAfter {
		return t.ActivateAfterStart
	}
	return t.ActivateAfter
}

// withdrawAfter is WithdrawAfter doubled for each recent withdrawal.
func withdrawAfter(t Timing, recent int) time.Duration {
	d := t.WithdrawAfter
	for i := 0; i < recent && d < t.MaxWithdrawAfter; i++ {
		d *= 2
	}
	if t.MaxWithdrawAfter > 0 && d > t.MaxWithdrawAfter {
		d = t.MaxWithdrawAfter
	}
	return d
}
