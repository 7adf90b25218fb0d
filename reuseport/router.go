package reuseport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// Router keeps the target slot of a port's group on the newest listener
// of a known apiserver that serves. It asks each listener itself: a probe
// connection from ProbeAddr4 or ProbeAddr6 and a source port in
// [ProbePortLow, ProbePortHigh] goes to the probe slot's listener.
type Router struct {
	group *Group
	// addr is the address probes dial (host:port of the apiserver).
	addr      string
	readyPath string
	tls       *tls.Config
	interval  time.Duration
	// Only Round touches these: Run calls it from one goroutine, and one
	// probe at a time fits the one probe slot.
	known    map[string]Listener
	verdicts map[string]verdict // by inode: the last probe's answer
	served   map[string]bool    // by inode: answered 200 once
	// probeTLS is each listener's TLS configuration (by inode), with its
	// own session cache: see tlsFor.
	probeTLS map[string]probeSession
	// lastDecision is the last decision logged.
	lastDecision RouteDecision
	// lastRouteErr is the last routing failure logged ("" none).
	lastRouteErr string
	// loopbackSince is when the loopback slot's listener was put there.
	loopbackSince time.Time
	// apiservers lists the apiserver containers bootlet knows; cgroupOf
	// reads a holder's cgroup (readCgroup; tests replace it). eligible is
	// each listener's last answer (by inode), lastFeedErr the last
	// failure of apiservers logged.
	apiservers  func(context.Context) ([]Apiserver, error)
	cgroupOf    func(pid int) string
	eligible    map[string]eligibility
	lastFeedErr string
	// portsErr is the last checkProbePorts failure logged ("" none).
	portsErr string
	// mu guards what other goroutines read or add: the target and since
	// (Handover), the published verdicts (ServedBy), the withdrawals
	// (Handover). A leaf: never held across a probe or a /proc read.
	mu          sync.Mutex
	target      Listener
	since       time.Time // when target was put in the target slot
	loopback    Listener  // in the loopback slot
	published   map[string]publishedVerdict
	withdrawals []*withdrawal
}

// publishedVerdict is a listener's last probe answer, for ServedBy.
type publishedVerdict struct {
	Listener
	verdict
}

// withdrawal is a hand-over's outgoing processes, which the route avoids
// while another listener serves, until their listeners are gone or until
// the bound.
type withdrawal struct {
	match func(proc string) bool
	until time.Time
	seen  bool // a listener of it was found
}

// NewRouter routes the port of addr (host:port), asking each listener for
// readyPath over TLS with tlsCfg (nil: plain HTTP). It routes only to the
// listeners of the apiserver containers apiservers lists (DecideEligible),
// and refuses to route when other users may bind the probe ports
// (checkProbePorts).
func NewRouter(addr, readyPath string, tlsCfg *tls.Config, apiservers func(context.Context) ([]Apiserver, error)) (*Router, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil, fmt.Errorf("port of %s: %w", addr, err)
	}
	if apiservers == nil {
		return nil, errors.New("reuseport: no list of the apiserver containers to route to")
	}
	if err := checkProbePorts(readUnprivilegedPortStart()); err != nil {
		return nil, err
	}
	if err := checkBorrow(); err != nil {
		return nil, err
	}
	g, err := Open(port)
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil && tlsCfg.ServerName == "" {
		tlsCfg = tlsCfg.Clone()
		tlsCfg.ServerName = host
	}
	return &Router{group: g, addr: addr, readyPath: readyPath, tls: tlsCfg, interval: 250 * time.Millisecond,
		known: map[string]Listener{}, verdicts: map[string]verdict{}, served: map[string]bool{}, probeTLS: map[string]probeSession{},
		apiservers: apiservers, cgroupOf: readCgroup, eligible: map[string]eligibility{}}, nil
}

// verdict is a listener's last answer to a probe.
type verdict struct {
	serving bool
	at      time.Time
}

// Probe ages: while more than one listener shares the port every round
// asks each of them; a lone listener that is the target is asked again
// only this often (it is the only place new connections can go anyway).
const loneTargetReprobe = 2 * time.Second

// portsRecheck is how often Run reads ip_unprivileged_port_start again.
const portsRecheck = 30 * time.Second

// Run routes until ctx ends.
func (r *Router) Run(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	var portsChecked time.Time
	for {
		if time.Since(portsChecked) >= portsRecheck {
			r.logPortsErr(checkProbePorts(readUnprivilegedPortStart()))
			portsChecked = time.Now()
		}
		r.Round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Round observes, decides once, and acts.
func (r *Router) Round(ctx context.Context) {
	f, err := r.observe(ctx)
	if err != nil {
		klog.V(2).InfoS("reuseport: cannot read the port's sockets", "port", r.group.port, "err", err)
		return
	}
	d := DecideRoute(f)
	r.act(f, d)
}

func (r *Router) observe(ctx context.Context) (RouteFacts, error) {
	s, err := readPortSockets(r.group.port, false)
	if err != nil {
		return RouteFacts{}, err
	}
	target, loopback := r.Target().Inode, r.loopbackTarget().Inode
	found := r.keepEligible(ctx, findListeners(s.Listening, r.known))
	f := RouteFacts{Serving: map[string]bool{}, Served: map[string]bool{}, Target: target, Loopback: loopback}
	if loopback != "" {
		f.LoopbackHeld = time.Since(r.loopbackSince)
	}
	verdicts := map[string]verdict{}
	for inode, l := range found {
		l.Loopback = s.Loopback[inode]
		found[inode] = l
		f.Listeners = append(f.Listeners, l)
		v, ok := r.verdicts[l.Inode]
		if !ok || len(found) > 1 || l.Inode != target || time.Since(v.at) >= loneTargetReprobe {
			v = verdict{serving: r.serves(ctx, l, target, loopback) == nil, at: time.Now()}
		}
		verdicts[l.Inode] = v
		f.Serving[l.Inode] = v.serving
		f.Served[l.Inode] = v.serving || r.served[l.Inode]
	}
	r.known, r.verdicts, r.served = found, verdicts, f.Served
	for inode := range r.probeTLS {
		if _, ok := found[inode]; !ok {
			delete(r.probeTLS, inode)
		}
	}
	f.Withdrawing = r.markWithdrawing(found)
	r.publish(found, verdicts)
	return f, nil
}

// keepEligible is found without the listeners DecideEligible refuses:
// they are neither probed nor put in a slot. An answer is kept per
// listener (a refusal for ineligibleRecheck), so the caller's list is
// asked only when a listener is new or was refused a while ago.
func (r *Router) keepEligible(ctx context.Context, found map[string]Listener) map[string]Listener {
	var known []Apiserver
	var feedErr error
	asked := false
	out := make(map[string]Listener, len(found))
	for inode, l := range found {
		e, ok := r.eligible[inode]
		if !ok || e.pid != l.PID || !e.ok && time.Since(e.at) >= ineligibleRecheck {
			if !asked {
				fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				known, feedErr = r.apiservers(fctx)
				cancel()
				asked = true
				r.logFeedErr(feedErr)
			}
			if feedErr != nil {
				// Not known yet: asked again next round.
				continue
			}
			was := e
			e = eligibility{pid: l.PID, at: time.Now()}
			e.ok, e.why = DecideEligible(r.cgroupOf(l.PID), known)
			if !e.ok && (was.ok || was.why != e.why) {
				klog.InfoS("reuseport: a listener of the port is not a known apiserver's: not probed, not routed to", "port", r.group.port, "pid", l.PID, "inode", inode, "why", e.why)
			}
			r.eligible[inode] = e
		}
		if e.ok {
			out[inode] = l
		}
	}
	for inode := range r.eligible {
		if _, ok := found[inode]; !ok {
			delete(r.eligible, inode)
		}
	}
	return out
}

// logFeedErr logs a failure to list the apiserver containers when it
// differs from the last one, and the recovery.
func (r *Router) logFeedErr(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case msg == r.lastFeedErr:
	case err != nil:
		klog.ErrorS(err, "reuseport: cannot list the apiserver containers; a new listener is not routed to until they are listed", "port", r.group.port)
	default:
		klog.InfoS("reuseport: the apiserver containers are listed again", "port", r.group.port)
	}
	r.lastFeedErr = msg
}

// logPortsErr logs a failed checkProbePorts when it differs from the last
// one: the sysctl was lowered after the router started, and the probes no
// longer come from ports only root can bind.
func (r *Router) logPortsErr(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg != r.portsErr && err != nil {
		klog.ErrorS(err, "reuseport: the probe ports are no longer privileged; a local user may defeat the probes", "port", r.group.port)
	}
	r.portsErr = msg
}

// markWithdrawing returns the listeners of processes a hand-over
// withdraws, and forgets each withdrawal whose listeners are all gone
// (its process was stopped) or whose bound passed.
func (r *Router) markWithdrawing(found map[string]Listener) map[string]bool {
	r.mu.Lock()
	ws := append([]*withdrawal(nil), r.withdrawals...)
	r.mu.Unlock()
	if len(ws) == 0 {
		return nil
	}
	out := map[string]bool{}
	var keep []*withdrawal
	for _, w := range ws {
		matched := false
		for inode, l := range found {
			if w.match("/proc/" + strconv.Itoa(l.PID)) {
				out[inode], matched = true, true
			}
		}
		if (w.seen && !matched) || time.Now().After(w.until) {
			continue
		}
		w.seen = w.seen || matched
		keep = append(keep, w)
	}
	r.mu.Lock()
	// Withdrawals added meanwhile are kept: they were not looked at yet.
	r.withdrawals = append(keep, r.withdrawals[len(ws):]...)
	r.mu.Unlock()
	return out
}

// withdraw tells the route to avoid the listeners of the processes match
// selects while another listener serves: a hand-over withdraws them.
func (r *Router) withdraw(match func(proc string) bool, bound time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.withdrawals = append(r.withdrawals, &withdrawal{match: match, until: time.Now().Add(bound)})
}

func (r *Router) publish(found map[string]Listener, verdicts map[string]verdict) {
	p := make(map[string]publishedVerdict, len(found))
	for inode, l := range found {
		p[inode] = publishedVerdict{Listener: l, verdict: verdicts[inode]}
	}
	r.mu.Lock()
	r.published = p
	r.mu.Unlock()
}

// publishedFresh is how old a probe answer ServedBy still trusts: a
// round is every 250 ms, a lone target is asked every 2 s.
const publishedFresh = 3 * time.Second

// ServedBy reports whether the router knows a listener on port held by a
// process match selects (a /proc/PID path), and whether such a listener
// answered the readiness path itself on the router's last probe of it.
// The router asks every listener through its own slot, so its answer holds
// even when new connections all go to another listener; a fresh connection
// would only ever reach the target. Unknown (false, false): another port,
// no such listener, or no answer in the last few seconds.
func (r *Router) ServedBy(port int, match func(proc string) bool) (known, serving bool) {
	if r == nil || port != r.group.port {
		return false, false
	}
	r.mu.Lock()
	var mine []publishedVerdict
	for _, v := range r.published {
		mine = append(mine, v)
	}
	r.mu.Unlock()
	for _, v := range mine {
		if time.Since(v.at) > publishedFresh || !match("/proc/"+strconv.Itoa(v.PID)) {
			continue
		}
		known = true
		serving = serving || v.serving
	}
	return known, serving
}

// loopbackTarget is the listener in the loopback slot (zero: none).
func (r *Router) loopbackTarget() Listener {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loopback
}

// Target is the listener that gets every new connection now (zero: none).
func (r *Router) Target() Listener {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.target
}

// TargetSince is the target listener (zero: none) and since when it has
// been the target: every new connection went to it from then on.
func (r *Router) TargetSince() (Listener, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.target, r.since
}

// Port is the routed port.
func (r *Router) Port() int { return r.group.port }
