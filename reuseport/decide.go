package reuseport

import (
	"fmt"
	"sort"
	"time"
)

// RouteFacts is one look at the port: its listeners, and which of them
// answered the readiness path with 200 on a connection routed to it.
type RouteFacts struct {
	Listeners []Listener
	Serving   map[string]bool // by inode
	Target    string          // the inode in the target slot now ("" none)
	Loopback  string          // the inode in the loopback slot now ("" none)
	// Withdrawing is the listeners (by inode) of processes a hand-over is
	// withdrawing: they are the target only while no other listener serves.
	Withdrawing map[string]bool
	// Served is the listeners (by inode) that answered the readiness path
	// with 200 at least once since the router first saw them. One of them
	// that does not serve now is stopping (an apiserver's shutdown delay)
	// or failing, not starting: its post-start hooks are done.
	Served map[string]bool
	// LoopbackHeld is how long Loopback has been in the loopback slot.
	LoopbackHeld time.Duration
}

// startingHold bounds how long a starting listener keeps the loopback slot
// from the other starting ones. A starting kube-apiserver's post-start
// hooks give up within a minute (rbac/bootstrap-roles after 30 s, the
// service IP and port repair after one), so one that has not served within
// two has failed or waits on something else (etcd), and another starting
// one may have its turn.
const startingHold = 2 * time.Minute

// RouteDecision is the listener that should get every new connection, and
// the one that should get loopback connections instead while it is not
// the target.
type RouteDecision struct {
	Target string // inode; "" releases the port to the kernel's hash
	// Loopback is the inode whose process gets the loopback connections
	// ("": the kernel's hash decides them).
	Loopback string
	Why      string // of Target
	// LoopbackWhy says why Loopback; it does not change from round to
	// round while the decision stays.
	LoopbackWhy string
}

// DecideRoute is the router's rule book:
//   - the newest listener that serves is the target: an apiserver that
//     takes over (the self-hosted one at the pivot, a DaemonSet's new pod,
//     the self-hosted pod after a reboot) gets the new connections from
//     the moment it serves, and not a moment before;
//   - but not a listener of a process being withdrawn while another one
//     serves: "newest" stands for "taking over", and a withdrawn apiserver
//     whose container restarted (a checkpoint killed after the self-hosted
//     pod started) is newer without taking over anything;
//   - while none serves, the current target stays if it still listens: an
//     apiserver in its shutdown delay fails /readyz but still answers,
//     which beats a listener that only queues;
//   - with no target left, the kernel's hash decides;
//   - loopback connections go to one starting listener (bound to every
//     address, not the target, and it never served): an apiserver's own
//     loopback client dials [::1]:port, and a starting apiserver's
//     post-start hooks fail unless they reach their own process
//     (kube-apiserver exits when its RBAC bootstrap cannot run within 30 s,
//     or its service IP and port repair once within a minute). Of several
//     starting ones, the one in the slot keeps it until it serves (bounded
//     by startingHold, then the next one in age order has its turn), and
//     an empty slot goes to the oldest: a newer one taking it would starve
//     the older one's hooks, which run already (decideLoopback);
//   - with no listener starting, loopback goes to the newest listener if
//     it is not the target, and is left to the hash otherwise. Once an
//     apiserver serves, its hooks are done, while the apiserver it took
//     over from still needs its own loopback to shut down cleanly (it
//     removes its endpoint through it): the hash gives each about half,
//     and both retry.
func DecideRoute(f RouteFacts) RouteDecision {
	ls := newestFirst(f.Listeners)
	d := decideTarget(f, ls)
	d.Loopback, d.LoopbackWhy = decideLoopback(f, ls, d.Target)
	return d
}

// decideLoopback is the loopback slot's rules, on f's listeners newest
// first (ls), once the target is decided.
func decideLoopback(f RouteFacts, ls []Listener, target string) (string, string) {
	var starting []Listener // oldest first
	for i := len(ls) - 1; i >= 0; i-- {
		if l := ls[i]; l.Loopback != "" && l.Inode != target && !f.Serving[l.Inode] && !f.Served[l.Inode] {
			starting = append(starting, l)
		}
	}
	for i, l := range starting {
		if l.Inode != f.Loopback {
			continue
		}
		if f.LoopbackHeld < startingHold || len(starting) == 1 {
			return l.Inode, startingWhy(l)
		}
		next := starting[(i+1)%len(starting)]
		return next.Inode, fmt.Sprintf("pid %d's listener starts; pid %d's held the loopback slot for %s without serving", next.PID, l.PID, startingHold)
	}
	if len(starting) > 0 {
		return starting[0].Inode, startingWhy(starting[0])
	}
	if len(ls) > 0 && ls[0].Loopback != "" && ls[0].Inode != target {
		return ls[0].Inode, fmt.Sprintf("no listener starts; pid %d's is the newest, and not the target", ls[0].PID)
	}
	return "", "no listener starts, and the newest is the target or bound to one address: the kernel's hash decides"
}

// startingWhy is one reason for the loopback slot going to the starting
// listener l and for its keeping it: a log line when it moves.
func startingWhy(l Listener) string {
	return fmt.Sprintf("pid %d's listener starts: it has the loopback slot until it serves (the oldest starting one, or the one that has it)", l.PID)
}

// newestFirst is a copy of ls, the newest holder first (ties: the higher
// inode, the later socket).
func newestFirst(ls []Listener) []Listener {
	ls = append([]Listener(nil), ls...)
	sort.Slice(ls, func(i, j int) bool {
		if ls[i].Started != ls[j].Started {
			return ls[i].Started > ls[j].Started
		}
		return ls[i].Inode > ls[j].Inode
	})
	return ls
}

// decideTarget is the target's rules, on f's listeners newest first (ls).
func decideTarget(f RouteFacts, ls []Listener) RouteDecision {
	for _, l := range ls {
		if f.Serving[l.Inode] && !f.Withdrawing[l.Inode] {
			return RouteDecision{Target: l.Inode, Why: fmt.Sprintf("pid %d's listener serves (the newest that does)", l.PID)}
		}
	}
	for _, l := range ls {
		if f.Serving[l.Inode] {
			return RouteDecision{Target: l.Inode, Why: fmt.Sprintf("pid %d's listener serves (the newest that does; its process is being withdrawn, but no other serves)", l.PID)}
		}
	}
	for _, l := range ls {
		if l.Inode == f.Target && f.Target != "" {
			return RouteDecision{Target: f.Target, Why: fmt.Sprintf("no listener serves; pid %d's, the target, still listens", l.PID)}
		}
	}
	return RouteDecision{Why: "no listener serves: the kernel's hash decides"}
}
