package reuseport

import (
	"errors"
	"time"

	"k8s.io/klog/v2"
)

func (r *Router) act(f RouteFacts, d RouteDecision) {
	// Logged when the decision changes, not at every round that has yet
	// to carry it out (a move that fails is retried every round).
	if d != r.lastDecision {
		klog.InfoS("reuseport: route", "port", r.group.port, "target", d.Target, "loopback", d.Loopback, "why", d.Why, "loopbackWhy", d.LoopbackWhy)
	}
	r.lastDecision = d
	if d.Target == f.Target && d.Loopback == f.Loopback {
		r.logRouteErr(nil) // nothing to move: nothing fails
		return
	}
	byInode := map[string]Listener{}
	for _, l := range f.Listeners {
		byInode[l.Inode] = l
	}
	// A socket sits in one slot at a time: the loopback slot is emptied
	// before its listener may become the target, and filled after the
	// target slot let go of its listener. What succeeded is recorded, so
	// the next round redoes only what failed.
	target, loopback := r.Target(), r.loopbackTarget()
	targetMoved, loopbackMoved := false, false
	var errs []error
	if d.Loopback != f.Loopback && f.Loopback != "" {
		if err := r.group.clear(slotLoopback); err != nil {
			errs = append(errs, err)
		} else {
			loopback, loopbackMoved = Listener{}, true
		}
	}
	if d.Target != f.Target {
		next := byInode[d.Target]
		var err error
		if next.Inode == "" {
			err = r.group.clear(slotTarget)
		} else {
			err = r.group.put(slotTarget, next)
		}
		if err != nil {
			errs = append(errs, err)
		} else {
			target, targetMoved = next, true
		}
	}
	if next := byInode[d.Loopback]; next.Inode != "" && loopback.Inode == "" && next.Inode != target.Inode {
		if err := r.group.put(slotLoopback, next); err != nil {
			errs = append(errs, err)
		} else {
			loopback, loopbackMoved = next, true
		}
	}
	r.logRouteErr(errors.Join(errs...))
	if loopbackMoved {
		r.loopbackSince = time.Now()
	}
	r.mu.Lock()
	if targetMoved {
		r.target, r.since = target, time.Now()
	}
	if loopbackMoved {
		r.loopback = loopback
	}
	r.mu.Unlock()
}

// logRouteErr logs a routing failure when it differs from the last round's,
// and the recovery: a round runs every 250 ms, and a failure that lasts
// (a listener that cannot be borrowed) would otherwise fill the journal.
func (r *Router) logRouteErr(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case msg == r.lastRouteErr:
	case err != nil:
		klog.ErrorS(err, "reuseport: routing failed (logged again only when the error changes)", "port", r.group.port)
	default:
		klog.InfoS("reuseport: routing works again", "port", r.group.port, "after", r.lastRouteErr)
	}
	r.lastRouteErr = msg
}
