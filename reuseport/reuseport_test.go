package reuseport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bootlet/bootlet/ownprocess"
	"golang.org/x/sys/unix"
	certutil "k8s.io/client-go/util/cert"
)

func TestDecideRoute(t *testing.T) {
	// Bound to every address, as kube-apiserver listens: loopback reaches
	// them. pinned is bound to one address only.
	old := Listener{Inode: "1", PID: 10, Started: 100, Loopback: "::1"}
	young := Listener{Inode: "2", PID: 20, Started: 200, Loopback: "::1"}
	pinned := Listener{Inode: "3", PID: 30, Started: 300}
	third := Listener{Inode: "4", PID: 40, Started: 400, Loopback: "::1"}
	tests := []struct {
		name             string
		f                RouteFacts
		target, loopback string
	}{
		{"one serving listener", RouteFacts{Listeners: []Listener{old}, Serving: map[string]bool{"1": true}}, "1", ""},
		{"a new listener that does not serve yet gets nothing but loopback", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{"1": true}, Target: "1"}, "1", "2"},
		{"the newest serving listener takes over; loopback to the hash", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{"1": true, "2": true}, Target: "1", Loopback: "2"}, "2", ""},
		{"an older one serving alone after the newer stopped serving", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{"1": true}, Target: "2"}, "1", "2"},
		{"none serves: the target in its shutdown delay stays", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{}, Target: "1"}, "1", "2"},
		{"none serves, no target, the older one served before (stopping): the hash decides, loopback to the newest", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{}, Served: map[string]bool{"1": true}}, "", "2"},
		{"the target is gone, none serves: the hash decides", RouteFacts{Listeners: []Listener{young}, Serving: map[string]bool{}, Target: "1"}, "", "2"},
		{"a newer listener being withdrawn does not take over from a serving one, but keeps its loopback", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{"1": true, "2": true}, Target: "2", Withdrawing: map[string]bool{"2": true}}, "1", "2"},
		{"a listener being withdrawn is still the target while no other serves; the other starts: loopback to it", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{"2": true}, Target: "2", Withdrawing: map[string]bool{"2": true}}, "2", "1"},
		{"a listener being withdrawn is still the target while no other serves; the other stops: the hash", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{"2": true}, Served: map[string]bool{"1": true}, Target: "2", Withdrawing: map[string]bool{"2": true}}, "2", ""},
		{"the older listener being withdrawn changes nothing", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{"1": true, "2": true}, Target: "2", Withdrawing: map[string]bool{"1": true}}, "2", ""},
		{"a newest listener on one address only: no loopback slot", RouteFacts{Listeners: []Listener{old, pinned}, Serving: map[string]bool{"1": true}, Target: "1"}, "1", ""},
		// Several starting listeners (docs/design/reuseport.md, "Loopback and idle connections"):
		// the one whose hooks run already keeps its loopback.
		{"two start, none holds the slot: the oldest", RouteFacts{Listeners: []Listener{young, old}, Serving: map[string]bool{}}, "", "1"},
		{"two start, the older holds the slot: it keeps it", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{}, Loopback: "1", LoopbackHeld: time.Minute}, "", "1"},
		{"two start, the newer holds the slot (it bound first): it keeps it", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{}, Loopback: "2", LoopbackHeld: time.Minute}, "", "2"},
		{"the older starting one held the slot for the whole hold: the next one's turn", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{}, Loopback: "1", LoopbackHeld: startingHold}, "", "2"},
		{"the newest starting one held it for the whole hold: back to the oldest", RouteFacts{Listeners: []Listener{old, young, third}, Serving: map[string]bool{"1": true}, Target: "1", Loopback: "4", LoopbackHeld: startingHold}, "1", "2"},
		{"the one starting listener keeps the slot past the hold", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{"1": true}, Target: "1", Loopback: "2", LoopbackHeld: time.Hour}, "1", "2"},
		{"the holder serves and becomes the target: the next starting one", RouteFacts{Listeners: []Listener{old, young, third}, Serving: map[string]bool{"1": true}, Served: map[string]bool{"1": true}, Loopback: "1", LoopbackHeld: time.Minute}, "1", "2"},
		{"a newer starting one does not take the slot from a starting one beside a serving target", RouteFacts{Listeners: []Listener{old, young, third}, Serving: map[string]bool{"1": true}, Target: "1", Loopback: "2", LoopbackHeld: time.Second}, "1", "2"},
		{"the holder's process is gone: the oldest starting one", RouteFacts{Listeners: []Listener{old, third}, Serving: map[string]bool{"1": true}, Target: "1", Loopback: "2", LoopbackHeld: time.Minute}, "1", "4"},
		{"an older listener that served and stopped serving is not starting: the newer starting one", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{}, Served: map[string]bool{"1": true}, Target: "1"}, "1", "2"},
		{"the pivot's end: the target serves, the bootstrap one is in its shutdown delay: the hash", RouteFacts{Listeners: []Listener{old, young}, Serving: map[string]bool{"2": true}, Served: map[string]bool{"1": true, "2": true}, Target: "2"}, "2", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := DecideRoute(tt.f); d.Target != tt.target || d.Loopback != tt.loopback {
				t.Errorf("DecideRoute = %+v, want target %q, loopback %q", d, tt.target, tt.loopback)
			}
		})
	}
}

func TestDecideHandover(t *testing.T) {
	in := holders{Listeners: []string{"2"}}
	tests := []struct {
		name      string
		f         Facts
		done      bool
		whyPrefix string
	}{
		{"no incoming listener: withdraw as without routing", Facts{Outgoing: holders{Accepted: 3}}, true, "the incoming process holds no listener"},
		{"not routed yet: wait", Facts{Incoming: in, Target: "1", Outgoing: holders{Accepted: 3}, Waited: time.Second}, false, ""},
		{"routed, connections left: wait", Facts{Incoming: in, Target: "2", Outgoing: holders{Accepted: 3}, Waited: time.Second}, false, ""},
		{"routed and drained", Facts{Incoming: in, Target: "2"}, true, "new connections go to the incoming process, and the outgoing one holds none"},
		{"not routed at the bound", Facts{Incoming: in, Target: "1", Waited: 5 * time.Second}, true, "new connections were not routed"},
		{"routed, connections left at the bound", Facts{Incoming: in, Target: "2", Outgoing: holders{Accepted: 2}, RoutedFor: time.Second, Waited: 5 * time.Second}, true, "new connections go to the incoming process; the outgoing one still holds 2"},
		{"routed for the whole drain before the hand-over began: at once", Facts{Incoming: in, Target: "2", Outgoing: holders{Accepted: 2}, RoutedFor: 5 * time.Second}, true, "new connections have gone to the incoming process for 5s; the outgoing one still holds 2"},
		{"routed for part of the drain, connections left: wait", Facts{Incoming: in, Target: "2", Outgoing: holders{Accepted: 2}, RoutedFor: 4 * time.Second, Waited: time.Second}, false, ""},
		{"routed for part of the drain, drained: at once", Facts{Incoming: in, Target: "2", RoutedFor: time.Second}, true, "new connections go to the incoming process, and the outgoing one holds none"},
		{"the target for long is not the incoming process: wait", Facts{Incoming: in, Target: "1", Outgoing: holders{Accepted: 2}, RoutedFor: time.Minute, Waited: time.Second}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.f, 5*time.Second)
			if d.Done != tt.done || !strings.HasPrefix(d.Why, tt.whyPrefix) {
				t.Errorf("Decide = %+v, want done %v why %q…", d, tt.done, tt.whyPrefix)
			}
		})
	}
}

func TestPortSocketsOf(t *testing.T) {
	ap := netip.MustParseAddrPort
	socks := []ownprocess.TCPSocket{
		{Local: ap("[::]:6443"), State: ownprocess.TCPListen, Inode: "1184452"},
		{Local: ap("[::]:6443"), State: ownprocess.TCPListen, Inode: "1184999"},
		{Local: ap("0.0.0.0:6443"), State: ownprocess.TCPListen, Inode: "2000001"},
		{Local: ap("192.0.2.2:6443"), State: ownprocess.TCPListen, Inode: "2000002"},
		{Local: ap("[::ffff:192.0.2.2]:6443"), Remote: ap("[::ffff:192.0.2.2]:53924"), State: ownprocess.TCPEstablished, Inode: "1190001"},
		// Still in the accept queue: no process holds it.
		{Local: ap("[::ffff:192.0.2.2]:6443"), Remote: ap("[::ffff:192.0.2.2]:53926"), State: ownprocess.TCPEstablished, Inode: "0"},
	}
	s := portSocketsOf(socks)
	if len(s.Listening) != 4 {
		t.Errorf("listening = %v, want the four listeners", s.Listening)
	}
	want := map[string]string{"1184452": "::1", "1184999": "::1", "2000001": "127.0.0.1"}
	if len(s.Loopback) != len(want) {
		t.Errorf("loopback = %v, want %v (192.0.2.2:6443 is reached by no loopback address)", s.Loopback, want)
	}
	for inode, addr := range want {
		if s.Loopback[inode] != addr {
			t.Errorf("loopback of %s = %q, want %q", inode, s.Loopback[inode], addr)
		}
	}
	if len(s.Accepted) != 1 || !s.Accepted["1190001"] {
		t.Errorf("accepted = %v, want only 1190001", s.Accepted)
	}
}

// TestReadPortSockets reads a real port: a listener, an accepted
// connection, and the client's own side, which is not the port's.
func TestReadPortSockets(t *testing.T) {
	ln, err := net.Listen("tcp", "[::]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s, err := readPortSockets(port, false)
	if err != nil || len(s.Listening) != 1 || len(s.Accepted) != 0 {
		t.Errorf("listeners only: %+v %v, want one listener and no connection", s, err)
	}
	for inode := range s.Listening {
		if s.Loopback[inode] != "::1" {
			t.Errorf("the dual-stack listener's loopback = %q, want ::1", s.Loopback[inode])
		}
	}
	s, err = readPortSockets(port, true)
	if err != nil || len(s.Listening) != 1 || len(s.Accepted) != 1 {
		t.Errorf("with the accepted: %+v %v, want one listener and one accepted connection", s, err)
	}
}

// The listener child: TestMain runs it when the test binary is started with
// listenEnv set to a port. It binds the port with SO_REUSEPORT at once but
// serves HTTP (/readyz, and /pid answering its PID) only after SIGUSR1 when
// waitEnv is set: an apiserver binds seconds before it serves.
//
// With startingEnv set instead, it serves at once but its /readyz answers
// 503 until SIGUSR1: an apiserver running its post-start hooks, which
// answers its own loopback client before it is ready.
//
// SIGUSR2 makes its /readyz answer 503 again while it still serves the
// rest: an apiserver in its shutdown delay.
//
// With tlsDirEnv set to a directory holding cert.pem and key.pem it serves
// HTTPS, as an apiserver does, with ticket keys of its own, and /handshakes
// answers how many of its /readyz requests came on a full handshake and
// how many on a resumed one ("full resumed").
const (
	listenEnv   = "BOOTLET_REUSEPORT_TEST_LISTEN"
	waitEnv     = "BOOTLET_REUSEPORT_TEST_WAIT"
	startingEnv = "BOOTLET_REUSEPORT_TEST_STARTING"
	tlsDirEnv   = "BOOTLET_REUSEPORT_TEST_TLS_DIR"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(bindEnv); addr != "" {
		bindChild(addr)
	}
	if port := os.Getenv(listenEnv); port != "" {
		listenChild(port, os.Getenv(waitEnv) != "", os.Getenv(startingEnv) != "")
		return
	}
	os.Exit(m.Run())
}

func listenChild(port string, wait, starting bool) {
	usr1, usr2 := make(chan os.Signal, 1), make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	signal.Notify(usr2, syscall.SIGUSR2)
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) }); err != nil {
			return err
		}
		return serr
	}}
	// Every address, dual-stack, as kube-apiserver listens.
	ln, err := lc.Listen(context.Background(), "tcp", ":"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening")
	if wait {
		<-usr1
	}
	var ready atomic.Bool
	ready.Store(!starting)
	go func() {
		<-usr1
		ready.Store(true)
		<-usr2
		ready.Store(false)
	}()
	mux := http.NewServeMux()
	var full, resumed atomic.Int64
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, req *http.Request) {
		if req.TLS != nil && req.TLS.DidResume {
			resumed.Add(1)
		} else if req.TLS != nil {
			full.Add(1)
		}
		if !ready.Load() {
			http.Error(w, "post-start hooks running", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/pid", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, os.Getpid()) })
	mux.HandleFunc("/handshakes", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, full.Load(), resumed.Load()) })
	if dir := os.Getenv(tlsDirEnv); dir != "" {
		cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}})
	}
	_ = http.Serve(ln, mux)
	os.Exit(1)
}

// startListener starts a listener child on port. Go listens with MPTCP by
// default (Go 1.24+), which the kernel cannot steer; mptcp says so.
func startListener(t *testing.T, port int, mptcp, wait bool, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), listenEnv+"="+strconv.Itoa(port), "GODEBUG=multipathtcp=0")
	if mptcp {
		cmd.Env[len(cmd.Env)-1] = "GODEBUG=multipathtcp=1"
	}
	if wait {
		cmd.Env = append(cmd.Env, waitEnv+"=1")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, len("listening\n"))
	if _, err := io.ReadFull(out, buf); err != nil || string(buf) != "listening\n" {
		t.Fatalf("listener child: %q %v", buf, err)
	}
	return cmd
}

// pidOf asks host:port which process answers a new connection (0: none in
// 500 ms, as a queued connection to a listener that does not serve).
func pidOf(t *testing.T, host string, port int) int {
	t.Helper()
	c := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(fmt.Sprintf("http://%s/pid", net.JoinHostPort(host, strconv.Itoa(port))))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	pid, _ := strconv.Atoi(string(b))
	return pid
}

// nodeAddress is this machine's own IPv4 address on its default route,
// as e2e's AdvertiseAddress finds it: connections to it stay on the
// machine, and are not loopback ones, which the program leaves to the hash.
func nodeAddress(t *testing.T) string {
	t.Helper()
	conn, err := net.Dial("udp4", "192.0.2.255:9")
	if err != nil {
		t.Fatalf("no IPv4 default route to take a non-loopback local address from: %v", err)
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("%s needs root (BPF and pidfd_getfd), as bootlet does; run the unit tests as root", t.Name())
	}
}

// An MPTCP listener (Go's default since 1.24) cannot be steered: the kernel
// takes only TCP and UDP sockets in a REUSEPORT_SOCKARRAY. The router says
// so and names the fix, instead of failing deep in a syscall.
func TestMPTCPListener(t *testing.T) {
	requireRoot(t)
	port := freePort(t)
	g, err := Open(port)
	if err != nil {
		t.Fatalf("this kernel cannot steer: %v", err)
	}
	defer g.Close()
	l := startListener(t, port, true, false)
	s, err := readPortSockets(port, false)
	if err != nil {
		t.Fatal(err)
	}
	found := findListeners(s.Listening, nil)
	if len(found) != 1 {
		t.Fatalf("listeners %v", found)
	}
	for _, fl := range found {
		if fl.PID != l.Process.Pid {
			t.Fatalf("listener held by %d, want %d", fl.PID, l.Process.Pid)
		}
		if err := g.put(slotTarget, fl); err == nil || !strings.Contains(err.Error(), "GODEBUG=multipathtcp=0") {
			t.Errorf("steering an MPTCP listener: %v, want an error naming GODEBUG=multipathtcp=0", err)
		}
	}
}

func TestHandoverNilRouter(t *testing.T) {
	var r *Router
	res, err := r.Handover(context.Background(), func(string) bool { return true }, func(string) bool { return true }, time.Second)
	if err != nil || res.Routed {
		t.Errorf("a nil router hands over at once: %+v %v", res, err)
	}
}

// TestCheckBorrow: a process that may borrow its own descriptor passes
// (the unit tests run as bootlet does, with no seccomp filter), and each
// refusal names what refuses it, so a router that cannot route says why
// once at start instead of failing every round.
func TestCheckBorrow(t *testing.T) {
	requireRoot(t)
	if err := checkBorrow(); err != nil {
		t.Fatalf("checkBorrow: %v", err)
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{unix.EPERM, "--system-call-filter=pidfd_getfd"},
		{unix.EACCES, "a seccomp filter refuses it"},
		{unix.ENOSYS, "older than 5.6"},
		{unix.EBADF, "pidfd_getfd: bad file descriptor"},
	} {
		err := borrowError("pidfd_getfd", tc.err)
		if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("borrowError(%v) = %v, want it to wrap the errno and say %q", tc.err, err, tc.want)
		}
	}
}

// TestProbesResumeTLS runs the router's TLS probes against two HTTPS
// listeners sharing the port, both asked at every round: after each
// listener's first full handshake, every probe of it resumes its own
// session. One session cache for both would give each listener the other's
// ticket, and every probe would be a full handshake.
func TestProbesResumeTLS(t *testing.T) {
	requireRoot(t)
	port, node := freePort(t), nodeAddress(t)
	dir := t.TempDir()
	pool := writeServingCert(t, dir, node)
	r, err := NewRouter(net.JoinHostPort(node, strconv.Itoa(port)), "/readyz", &tls.Config{RootCAs: pool}, testApiservers)
	if err != nil {
		t.Fatalf("this kernel cannot steer: %v", err)
	}
	t.Cleanup(func() { r.group.Close() })
	r.cgroupOf = testCgroupOf(nil)
	ctx := context.Background()
	older := startListener(t, port, false, false, tlsDirEnv+"="+dir)
	newer := startListener(t, port, false, false, tlsDirEnv+"="+dir)
	const rounds = 6
	for i := 0; i < rounds; i++ {
		r.Round(ctx)
	}
	if got := r.Target().PID; got != newer.Process.Pid {
		t.Fatalf("target pid %d, want the newest serving listener %d (older %d): %s", got, newer.Process.Pid, older.Process.Pid, r.lastDecision.Why)
	}
	// New connections go to the target: the newer listener answers.
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := c.Get("https://" + net.JoinHostPort(node, strconv.Itoa(port)) + "/handshakes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var full, resumed int
	if _, err := fmt.Sscan(string(b), &full, &resumed); err != nil {
		t.Fatalf("/handshakes %q: %v", b, err)
	}
	if full != 1 || resumed != rounds-1 {
		t.Errorf("the newer listener's probes: %d full handshakes and %d resumed, want 1 and %d", full, resumed, rounds-1)
	}
	if len(r.probeTLS) != 2 {
		t.Errorf("%d probe TLS configurations, want one per listener (2)", len(r.probeTLS))
	}
	_ = older.Process.Kill()
	_ = older.Wait()
	r.Round(ctx)
	if len(r.probeTLS) != 1 {
		t.Errorf("%d probe TLS configurations after the older listener exited, want 1: a gone listener's is dropped", len(r.probeTLS))
	}
}

// writeServingCert writes a serving certificate for ip (and loopback) into
// dir as cert.pem and key.pem, and returns a pool that trusts it.
func writeServingCert(t *testing.T, dir, ip string) *x509.CertPool {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(ip, []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pool, err := certutil.NewPoolFromBytes(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pool
}

// TestKeepsSession: a probe's TLS session is kept for the next probe after
// a 200 or a "not ready yet", and dropped after an error or a refusal of
// the client, so that the next probe presents the current certificate.
func TestKeepsSession(t *testing.T) {
	for _, tc := range []struct {
		err  error
		keep bool
	}{
		{nil, true},
		{&notReady{path: "/readyz", code: http.StatusInternalServerError}, true},
		{&notReady{path: "/readyz", code: http.StatusServiceUnavailable}, true},
		{&notReady{path: "/readyz", code: http.StatusUnauthorized}, false},
		{&notReady{path: "/readyz", code: http.StatusForbidden}, false},
		{fmt.Errorf("wrapped: %w", &notReady{path: "/readyz", code: http.StatusUnauthorized}), false},
		{errors.New("remote error: tls: bad certificate"), false},
		{context.DeadlineExceeded, false},
	} {
		if got := keepsSession(tc.err); got != tc.keep {
			t.Errorf("keepsSession(%v) = %v, want %v", tc.err, got, tc.keep)
		}
	}
}
