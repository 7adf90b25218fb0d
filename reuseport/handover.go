package reuseport

import (
	"context"
	"fmt"
	"time"

	"k8s.io/klog/v2"
)

// Facts is one look at a hand-over of the port: what the incoming and the
// outgoing processes hold of it.
type Facts struct {
	Incoming, Outgoing holders
	// Steered: the program gives every new connection to the incoming
	// listener.
	Steered bool
	// Waited is the time since the hand-over began.
	Waited time.Duration
}

// Decision is what a hand-over does next.
type Decision struct {
	Steer bool // make the incoming listener the one for new connections
	Done  bool // stop waiting: the outgoing process may be withdrawn now
	Why   string
}

// Decide is the hand-over's rule book: steer as soon as the incoming
// process holds a listener, then wait until the outgoing processes hold no
// accepted connection, at most drain.
func Decide(f Facts, drain time.Duration) Decision {
	switch {
	case f.Incoming.Listeners == 0:
		return Decision{Done: true, Why: "the incoming process holds no listener on the port: nothing to steer to"}
	case !f.Steered:
		return Decision{Steer: true, Why: fmt.Sprintf("steering new connections to the incoming listener (pid %d)", f.Incoming.ListenerPID)}
	case f.Outgoing.Accepted == 0:
		return Decision{Done: true, Why: "the outgoing process holds no connection on the port"}
	case f.Waited >= drain:
		return Decision{Done: true, Why: fmt.Sprintf("the outgoing process still holds %d connections after %s", f.Outgoing.Accepted, drain)}
	}
	return Decision{}
}

// Result says how a hand-over ended.
type Result struct {
	Steered bool
	Left    int // connections the outgoing process still held
	Waited  time.Duration
	Why     string
}

// lookInterval is how often a hand-over looks at the sockets while it
// waits for the outgoing process's connections to move.
const lookInterval = 100 * time.Millisecond

// releaseWithin bounds how long a steering outlives its hand-over: it is
// released once the outgoing processes hold no listener on the port (they
// stopped serving), or after this.
const releaseWithin = 5 * time.Minute

// Handover steers every new connection to the port to the listener of a
// process incoming selects (a /proc/PID path), then waits until the
// processes outgoing selects hold no accepted connection on it, at most
// drain, and returns: the outgoing process may be withdrawn. The steering is
// released when the outgoing processes have closed their listeners. On a
// nil Group (no BPF here) it returns at once, unsteered.
func (g *Group) Handover(ctx context.Context, incoming, outgoing func(proc string) bool, drain time.Duration) (Result, error) {
	if g == nil {
		return Result{Why: "no steering on this node"}, nil
	}
	start := time.Now()
	var gen uint64
	for {
		f, err := g.observe(incoming, outgoing)
		if err != nil {
			return Result{Steered: gen != 0, Waited: time.Since(start)}, err
		}
		f.Steered, f.Waited = gen != 0, time.Since(start)
		d := Decide(f, drain)
		if d.Steer {
			if gen, err = g.steer(f.Incoming.ListenerPID, f.Incoming.ListenerFD); err != nil {
				return Result{Waited: time.Since(start), Why: d.Why}, err
			}
			klog.InfoS("reuseport: steered new connections", "port", g.port, "pid", f.Incoming.ListenerPID, "inode", f.Incoming.ListenerInode)
			go g.releaseWhenClosed(gen, outgoing)
			continue
		}
		if d.Done {
			return Result{Steered: gen != 0, Left: f.Outgoing.Accepted, Waited: f.Waited, Why: d.Why}, nil
		}
		select {
		case <-ctx.Done():
			return Result{Steered: gen != 0, Left: f.Outgoing.Accepted, Waited: time.Since(start), Why: "stopped"}, ctx.Err()
		case <-time.After(lookInterval):
		}
	}
}

func (g *Group) observe(incoming, outgoing func(proc string) bool) (Facts, error) {
	s, err := readPortSockets(g.port)
	if err != nil {
		return Facts{}, err
	}
	return Facts{Incoming: lookHolders(s, processes(incoming)), Outgoing: lookHolders(s, processes(outgoing))}, nil
}

// releaseWhenClosed releases the steering gen once the outgoing processes
// hold no listener on the port any more.
func (g *Group) releaseWhenClosed(gen uint64, outgoing func(proc string) bool) {
	deadline := time.Now().Add(releaseWithin)
	for time.Now().Before(deadline) {
		time.Sleep(time.Second)
		if f, err := g.observe(func(string) bool { return false }, outgoing); err == nil && f.Outgoing.Listeners == 0 {
			break
		}
	}
	if err := g.release(gen); err != nil {
		klog.ErrorS(err, "reuseport: releasing the steering failed", "port", g.port)
	}
}
