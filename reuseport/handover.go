package reuseport

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/bootlet/bootlet/ownprocess"
)

// Facts is one look at a hand-over of the port: what the incoming and the
// outgoing processes hold of it, and the router's target.
type Facts struct {
	Incoming, Outgoing holders
	Target             string // the routed listener's inode ("" none)
	// RoutedFor is how long Target has been the target: the time the
	// outgoing process's clients have had to move, since every connection
	// that left it (on a GOAWAY) reconnected to Target.
	RoutedFor time.Duration
	// Waited is the time since the hand-over began.
	Waited time.Duration
}

// Decision is whether a hand-over is over.
type Decision struct {
	Done bool // the outgoing process may be withdrawn now
	Why  string
}

// Decide is the hand-over's rule book: first the router must route new
// connections to a listener of the incoming process (it does once that one
// serves), then the outgoing processes must hold no accepted connection
// (their HTTP/2 clients move on a GOAWAY). The drain bounds the wait for
// both, and it counts the time the route has been in place, not the time
// since the hand-over began: what the drain buys is time during which a
// client that leaves the outgoing process on a GOAWAY lands on the incoming
// one, and that starts when the router moves, which it does as soon as the
// incoming process serves, usually long before the withdrawal is decided
// (docs/design/pivot.md, "Why the pivot takes about half a minute"). The
// hand-over never waits longer than drain itself.
func Decide(f Facts, drain time.Duration) Decision {
	routed := f.Target != "" && slices.Contains(f.Incoming.Listeners, f.Target)
	switch {
	case len(f.Incoming.Listeners) == 0:
		return Decision{Done: true, Why: "the incoming process holds no listener on the port: nothing to route to"}
	case routed && f.Outgoing.Accepted == 0:
		return Decision{Done: true, Why: "new connections go to the incoming process, and the outgoing one holds none"}
	case routed && f.RoutedFor >= drain:
		return Decision{Done: true, Why: fmt.Sprintf("new connections have gone to the incoming process for %s; the outgoing one still holds %d connections", f.RoutedFor.Round(time.Millisecond), f.Outgoing.Accepted)}
	case f.Waited >= drain && !routed:
		return Decision{Done: true, Why: fmt.Sprintf("new connections were not routed to the incoming process within %s", drain)}
	case f.Waited >= drain:
		return Decision{Done: true, Why: fmt.Sprintf("new connections go to the incoming process; the outgoing one still holds %d connections after %s", f.Outgoing.Accepted, drain)}
	}
	return Decision{}
}

// Result says how a hand-over ended.
type Result struct {
	Routed    bool // new connections went to the incoming process
	Left      int  // connections the outgoing process still held
	RoutedFor time.Duration
	Waited    time.Duration
	Why       string
}

// withdrawalBound is how long after a hand-over's drain the route still
// avoids its outgoing processes if they keep listening: the caller stops
// them right after the hand-over, which takes at most the pod's grace.
const withdrawalBound = 5 * time.Minute

// lookInterval is how often a hand-over looks at the sockets while it
// waits.
const lookInterval = 100 * time.Millisecond

// Handover waits, at most drain, until the router sends every new
// connection to a listener of a process incoming selects (a /proc/PID
// path) and the processes outgoing selects hold no accepted connection on
// the port: the outgoing process may then be withdrawn without a refused
// request. On a nil Router (no steering here) it returns at once.
func (r *Router) Handover(ctx context.Context, incoming, outgoing func(proc string) bool, drain time.Duration) (Result, error) {
	if r == nil {
		return Result{Why: "no routing on this node"}, nil
	}
	start := time.Now()
	// From now on the route avoids the outgoing processes while the
	// incoming one serves, even when an outgoing listener is newer (its
	// container restarted); the mark outlives the call until the outgoing
	// listeners are gone, so the route does not swing back to them
	// between the hand-over and their withdrawal.
	r.withdraw(outgoing, drain+withdrawalBound)
	for {
		s, err := readPortSockets(r.group.port, true)
		if err != nil {
			return Result{Waited: time.Since(start)}, err
		}
		target, since := r.TargetSince()
		f := Facts{Incoming: lookHolders(s, ownprocess.Processes(incoming)), Outgoing: lookHolders(s, ownprocess.Processes(outgoing)),
			Target: target.Inode, Waited: time.Since(start)}
		if target.Inode != "" {
			f.RoutedFor = time.Since(since)
		}
		if d := Decide(f, drain); d.Done {
			routed := f.Target != "" && slices.Contains(f.Incoming.Listeners, f.Target)
			return Result{Routed: routed, Left: f.Outgoing.Accepted, RoutedFor: f.RoutedFor, Waited: f.Waited, Why: d.Why}, nil
		}
		select {
		case <-ctx.Done():
			return Result{Waited: time.Since(start), Why: "stopped"}, ctx.Err()
		case <-time.After(lookInterval):
		}
	}
}
