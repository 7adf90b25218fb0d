package reuseport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
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

// Router keeps the target slot of a port's group on the newest listener
// that serves. It asks each listener itself: a probe connection from a
// source port in [ProbePortLow, ProbePortHigh] goes to the probe slot's
// listener.
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
// readyPath over TLS with tlsCfg (nil: plain HTTP).
func NewRouter(addr, readyPath string, tlsCfg *tls.Config) (*Router, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil, fmt.Errorf("port of %s: %w", addr, err)
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
		known: map[string]Listener{}, verdicts: map[string]verdict{}, served: map[string]bool{}, probeTLS: map[string]probeSession{}}, nil
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

// Run routes until ctx ends.
func (r *Router) Run(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
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
	found := findListeners(s.Listening, r.known)
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

// serves asks the listener l itself for the readiness path: nil when it
// answers 200. target and loopback are the listeners in those slots.
func (r *Router) serves(ctx context.Context, l Listener, target, loopback string) (err error) {
	// The target and the loopback slot's listener are already in their
	// slots, and may not be in two: with the probe slot empty, a probe goes
	// to the target, or to the loopback slot's listener when it dials a
	// loopback address.
	addr := r.addr
	switch l.Inode {
	case target:
	case loopback:
		addr = net.JoinHostPort(l.Loopback, strconv.Itoa(r.group.port))
	default:
		if err := r.group.put(slotProbe, l); err != nil {
			return err
		}
		defer func() { _ = r.group.clear(slotProbe) }()
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := dialFromProbePort(ctx, addr)
	if err != nil {
		return err
	}
	// No TIME_WAIT on the probe's 4-tuple: the next probe reuses it.
	_ = conn.(*net.TCPConn).SetLinger(0)
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	c := conn
	if r.tls != nil {
		tc := tls.Client(conn, r.tlsFor(l.Inode))
		defer func() {
			if !keepsSession(err) {
				delete(r.probeTLS, l.Inode)
			}
		}()
		if err := tc.HandshakeContext(ctx); err != nil {
			return err
		}
		c = tc
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+r.readyPath, nil)
	req.Close = true
	if err := req.Write(c); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &notReady{path: r.readyPath, code: resp.StatusCode}
	}
	return nil
}

// notReady is a probe's answer other than 200.
type notReady struct {
	path string
	code int
}

func (e *notReady) Error() string { return fmt.Sprintf("%s answered %d", e.path, e.code) }

// keepsSession reports whether a probe that ended in err may leave its
// listener's TLS session for the next probe: an answer that is no more
// than "not ready yet" (a starting apiserver's 500) does; an error or a
// refusal of the client (401, 403) does not, so that the next probe
// presents the certificate the kubeconfig holds now.
func keepsSession(err error) bool {
	var nr *notReady
	return err == nil || errors.As(err, &nr) && nr.code != http.StatusUnauthorized && nr.code != http.StatusForbidden
}

// tlsFor is the TLS configuration of probes to the listener inode. Every
// probe is a new connection, four a second while two apiservers share the
// port, and a full handshake costs both ends a signature and a chain
// verification: resumed from a session ticket, it costs neither. A ticket
// is good only with the process that issued it (each kube-apiserver has
// its own ticket keys), so each listener has its own one-session cache: a
// cache shared by the listeners would hand each one the other's ticket and
// resume nothing. A resumed session carries the client certificate of its
// full handshake for as long as it is resumed (the server only refuses one
// that expired), so a session that gets an error or a refusal of the
// client is dropped (serves, keepsSession), and none is kept longer than
// probeSessionMaxAge: the next full handshake presents the certificate the
// kubeconfig holds then (bootlet certs renew, a CA rotation).
func (r *Router) tlsFor(inode string) *tls.Config {
	s, ok := r.probeTLS[inode]
	if !ok || time.Since(s.created) >= probeSessionMaxAge {
		s = probeSession{cfg: r.tls.Clone(), created: time.Now()}
		s.cfg.ClientSessionCache = tls.NewLRUClientSessionCache(1)
		r.probeTLS[inode] = s
	}
	return s.cfg
}

// probeSession is one listener's probe TLS configuration and its session
// cache, and when it was made.
type probeSession struct {
	cfg     *tls.Config
	created time.Time
}

// probeSessionMaxAge bounds how long a listener's probes resume one
// session: one full handshake every few minutes costs nothing, and a
// renewed client certificate is presented within that time.
const probeSessionMaxAge = 5 * time.Minute

// dialFromProbePort connects to addr from the first free source port of
// the probe range.
func dialFromProbePort(ctx context.Context, addr string) (net.Conn, error) {
	var last error
	for p := ProbePortLow; p <= ProbePortHigh; p++ {
		d := net.Dialer{
			LocalAddr: &net.TCPAddr{Port: p},
			Control: func(_, _ string, c syscall.RawConn) error {
				var serr error
				if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1) }); err != nil {
					return err
				}
				return serr
			},
		}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("probe from ports %d-%d: %w", ProbePortLow, ProbePortHigh, last)
}

// Port is the routed port.
func (r *Router) Port() int { return r.group.port }
