package reuseport

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDecideEligible(t *testing.T) {
	const uid = "0b7c3a1e-1111-2222-3333-444455556666"
	const id = "4f1d9c2b7e6a5d4c3b2a19f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4"
	const other = "9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"
	systemd := "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + id + ".scope\n"
	cgroupfs := "12:memory:/kubepods/burstable/pod" + uid + "/" + id + "\n0::/kubepods/burstable/pod" + uid + "/" + id + "\n"
	known := []Apiserver{{PodUID: "another-pod", ContainerID: other}, {PodUID: uid, ContainerID: id}}
	for _, tc := range []struct {
		name   string
		cgroup string
		known  []Apiserver
		want   bool
		why    string
	}{
		{"the apiserver container (systemd driver)", systemd, known, true, "container 4f1d9c2b7e6a5 of the apiserver pod " + uid},
		{"the apiserver container (cgroupfs driver)", cgroupfs, known, true, "container 4f1d9c2b7e6a5"},
		{"a system service of uid 0", "0::/system.slice/sshd.service\n", known, false, "none of the 2 apiserver containers"},
		{"a process outside the cgroup tree (unreadable)", "", known, false, "none of the 2"},
		{"another container of the apiserver's pod (a sidecar)", "0::/kubepods/burstable/pod" + uid + "/" + other + "\n", known, false, "none of the 2"},
		{"the pod's sandbox", "0::/kubepods/burstable/pod" + uid + "\n", known, false, "none of the 2"},
		{"the known container ID under another pod", "0::/kubepods/burstable/pod0b7c3a1e-1111-2222-3333-444455556667/" + id + "\n", known, false, "none of the 2"},
		{"no apiserver known", systemd, nil, false, "none of the 0"},
		{"a known entry without a container ID", "0::/kubepods/burstable/pod" + uid + "/" + id + "\n", []Apiserver{{PodUID: uid}}, false, "none of the 1"},
	} {
		got, why := DecideEligible(tc.cgroup, tc.known)
		if got != tc.want || !strings.Contains(why, tc.why) {
			t.Errorf("%s: %v (%s), want %v (%q)", tc.name, got, why, tc.want, tc.why)
		}
	}
}

func TestCheckProbePorts(t *testing.T) {
	for _, tc := range []struct {
		start int
		want  string // "" no error
	}{
		{1024, ""},
		{ProbePortHigh + 1, ""},
		{ProbePortHigh, "is 232, so any user may bind the probe ports 225-232"},
		{ProbePortLow, "any user may bind"},
		{80, "any user may bind"},
		{0, "set it above 232"},
		{-1, "cannot read"},
	} {
		err := checkProbePorts(tc.start)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("checkProbePorts(%d) = %v, want %q", tc.start, err, tc.want)
		}
	}
	if ProbePortHigh >= 1024 || ProbePortLow > ProbePortHigh {
		t.Errorf("probe ports %d-%d: not a range below 1024", ProbePortLow, ProbePortHigh)
	}
}

func TestProbeSource(t *testing.T) {
	for addr, want := range map[string]netip.Addr{
		"192.0.2.2:6443":           ProbeAddr4,
		"127.0.0.1:6443":           ProbeAddr4,
		"[::ffff:192.0.2.2]:6443":  ProbeAddr4,
		"[2001:db8::1]:6443":       ProbeAddr6,
		"[::1]:6443":               ProbeAddr6,
		"api.cluster.invalid:6443": ProbeAddr4,
	} {
		if got, err := probeSource(addr); err != nil || got != want {
			t.Errorf("probeSource(%s) = %v %v, want %v", addr, got, err, want)
		}
	}
}

// TestForeignListenerNotRouted: a newer listener that serves, held by a
// process of uid 0 outside every known apiserver container, is neither
// probed nor routed to; once the caller lists its container it is, within
// ineligibleRecheck.
func TestForeignListenerNotRouted(t *testing.T) {
	r, node, port := newTestRouter(t)
	ctx := context.Background()
	var foreign sync.Map
	r.cgroupOf = testCgroupOf(&foreign)

	apiserver := startListener(t, port, false, false)
	r.Round(ctx)
	time.Sleep(20 * time.Millisecond) // a later start time, in clock ticks
	intruder := startListener(t, port, false, true)
	foreign.Store(intruder.Process.Pid, true)
	_ = intruder.Process.Signal(syscall.SIGUSR1) // it serves
	for i := 0; i < 4; i++ {
		r.Round(ctx)
	}
	if got := r.Target().PID; got != apiserver.Process.Pid {
		t.Fatalf("target pid %d, want the known apiserver %d, not the newer foreign listener %d", got, apiserver.Process.Pid, intruder.Process.Pid)
	}
	connectionsGoTo(t, node, port, apiserver.Process.Pid, "with a foreign listener serving")
	if known, _ := r.ServedBy(port, isPID(intruder.Process.Pid)); known {
		t.Errorf("ServedBy(foreign listener) is known: the router probed it")
	}
	foreign.Delete(intruder.Process.Pid)
	deadline := time.Now().Add(ineligibleRecheck + 3*time.Second)
	for r.Target().PID != intruder.Process.Pid {
		if time.Now().After(deadline) {
			t.Fatalf("the listener of a container listed since is not routed to: target %+v, %s", r.Target(), r.lastDecision.Why)
		}
		time.Sleep(50 * time.Millisecond)
		r.Round(ctx)
	}
}

// TestProgramMatchesProbeSource: the program gives the probe slot's
// listener only connections from the probe address and a probe port;
// the same port from another address (another loopback address, or the
// node's own, which stands for any other host), or the probe address from
// another port, reaches the target.
func TestProgramMatchesProbeSource(t *testing.T) {
	requireRoot(t)
	port, node := freePort(t), nodeAddress(t)
	g, err := Open(port)
	if err != nil {
		t.Fatalf("this kernel cannot steer: %v", err)
	}
	defer g.Close()
	target := startListener(t, port, false, false)
	probed := startListener(t, port, false, false)
	s, err := readPortSockets(port, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range findListeners(s.Listening, nil) {
		slot := slotTarget
		if l.PID == probed.Process.Pid {
			slot = slotProbe
		}
		if err := g.put(slot, l); err != nil {
			t.Fatal(err)
		}
	}
	dst := strconv.Itoa(port)
	for _, tc := range []struct {
		src, dst string
		want     int
	}{
		{"127.0.0.1:" + strconv.Itoa(ProbePortLow), node, probed.Process.Pid},
		{"127.0.0.1:" + strconv.Itoa(ProbePortHigh), "127.0.0.1", probed.Process.Pid},
		{"[::1]:" + strconv.Itoa(ProbePortLow+1), "::1", probed.Process.Pid},
		{"127.0.0.1:" + strconv.Itoa(ProbePortHigh+1), node, target.Process.Pid},
		{"127.0.0.1:" + strconv.Itoa(ProbePortLow-1), node, target.Process.Pid},
		{"127.0.0.2:" + strconv.Itoa(ProbePortLow), node, target.Process.Pid},
		{net.JoinHostPort(node, strconv.Itoa(ProbePortLow)), node, target.Process.Pid},
		{"127.0.0.1:61000", node, target.Process.Pid},
	} {
		for i := 0; i < 5; i++ {
			if got := pidFrom(t, tc.src, net.JoinHostPort(tc.dst, dst)); got != tc.want {
				t.Fatalf("from %s to %s: answered by %d, want %d (target %d, probe slot %d)", tc.src, tc.dst, got, tc.want, target.Process.Pid, probed.Process.Pid)
			}
		}
	}
}

// pidFrom asks dst which process answers a connection from src, reset on
// close so that the same 4-tuple can be used again at once.
func pidFrom(t *testing.T, src, dst string) int {
	t.Helper()
	la, err := net.ResolveTCPAddr("tcp", src)
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{Timeout: time.Second, LocalAddr: la, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1) }); err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", dst)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", dst, src, err)
	}
	_ = c.(*net.TCPConn).SetLinger(0)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(c, "GET /pid HTTP/1.0\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("from %s to %s: %v", src, dst, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	pid, _ := strconv.Atoi(string(b))
	return pid
}

// bindEnv makes the test binary a child that binds the address it names
// and exits 0 when the bind succeeded.
const bindEnv = "BOOTLET_REUSEPORT_TEST_BIND"

func bindChild(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	ln.Close()
	os.Exit(0)
}

// TestProbePortsNeedPrivilege: a process of another uid may not bind a
// probe port on the probe address (the kernel's ip_unprivileged_port_start
// as checkProbePorts wants it), while it may bind any port from 1024 up,
// as it could the range above the ephemeral ports the probes used before.
func TestProbePortsNeedPrivilege(t *testing.T) {
	requireRoot(t)
	if err := checkProbePorts(readUnprivilegedPortStart()); err != nil {
		t.Skipf("this host lowered the sysctl: %v", err)
	}
	// The test binary sits in a directory only root may enter: a copy
	// that uid 65534 may run.
	dir, err := os.MkdirTemp("", "reuseport-bind")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "bind")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil || os.Chmod(dir, 0o755) != nil {
		t.Fatal(err)
	}
	bindAs := func(addr string) error {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), bindEnv+"="+addr)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	for p := ProbePortLow; p <= ProbePortHigh; p++ {
		if err := bindAs(net.JoinHostPort(ProbeAddr4.String(), strconv.Itoa(p))); err == nil {
			t.Errorf("uid 65534 bound the probe port %s:%d", ProbeAddr4, p)
		}
	}
	// The same child binds an unprivileged port: the refusals above are
	// the kernel's, not a child that cannot run.
	if err := bindAs("127.0.0.1:0"); err != nil {
		t.Errorf("uid 65534 could not bind an unprivileged port: %v", err)
	}
}
