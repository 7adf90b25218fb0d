package reuseport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

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

// dialFromProbePort connects to addr from the probe address of addr's
// family and the first free port of the probe range. Every port in use
// fails the probe, so the error names the range and, where it applies,
// the sysctl that let another user take it.
func dialFromProbePort(ctx context.Context, addr string) (net.Conn, error) {
	src, err := probeSource(addr)
	if err != nil {
		return nil, err
	}
	var last error
	for p := ProbePortLow; p <= ProbePortHigh; p++ {
		d := net.Dialer{
			LocalAddr: &net.TCPAddr{IP: src.AsSlice(), Port: p},
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
	if err := checkProbePorts(readUnprivilegedPortStart()); err != nil {
		last = errors.Join(last, err)
	}
	return nil, fmt.Errorf("probe from %s ports %d-%d: %w", src, ProbePortLow, ProbePortHigh, last)
}

// probeSource is the source address of a probe to addr (host:port): the
// probe address of the host's family. A host name gets the IPv4 one, and
// the dialer then picks its IPv4 addresses.
func probeSource(addr string) (netip.Addr, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("probe address %s: %w", addr, err)
	}
	if a, err := netip.ParseAddr(host); err == nil && !a.Unmap().Is4() {
		return ProbeAddr6, nil
	}
	return ProbeAddr4, nil
}

// unprivilegedPortStartFile is the sysctl below which binding a port needs
// CAP_NET_BIND_SERVICE, in this process's network namespace (Linux 4.11+).
const unprivilegedPortStartFile = "/proc/sys/net/ipv4/ip_unprivileged_port_start"

// readUnprivilegedPortStart reads unprivilegedPortStartFile: 1024, the
// kernel's fixed bound, where the file does not exist; -1 when it cannot
// be read or parsed (checkProbePorts then refuses).
func readUnprivilegedPortStart() int {
	data, err := os.ReadFile(unprivilegedPortStartFile)
	if errors.Is(err, os.ErrNotExist) {
		return 1024
	}
	if err != nil {
		return -1
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return -1
	}
	return v
}

// checkProbePorts says whether the probe ports need privilege to bind,
// given ip_unprivileged_port_start (start; -1 unknown): the kernel lets
// anyone bind a port at or above start. Lowered to the probe range or
// below (some hosts set it to 0 or 80 so that rootless containers may
// serve low ports), any local user could hold every probe port, so that no
// listener would ever seem to serve, or send connections the program takes
// for probes.
func checkProbePorts(start int) error {
	switch {
	case start < 0:
		return fmt.Errorf("reuseport: cannot read %s: whether other users may bind the probe ports %d-%d is unknown; the apiserver port is not routed", unprivilegedPortStartFile, ProbePortLow, ProbePortHigh)
	case start <= ProbePortHigh:
		return fmt.Errorf("reuseport: net.ipv4.ip_unprivileged_port_start is %d, so any user may bind the probe ports %d-%d and defeat the router's probes; "+
			"the apiserver port is not routed (set it above %d, e.g. back to 1024, to route it)", start, ProbePortLow, ProbePortHigh, ProbePortHigh)
	}
	return nil
}
