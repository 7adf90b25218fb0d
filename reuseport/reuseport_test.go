package reuseport

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestDecide(t *testing.T) {
	listener := holders{ListenerPID: 7, ListenerFD: 3, Listeners: 1}
	tests := []struct {
		name      string
		f         Facts
		steer     bool
		done      bool
		whyPrefix string
	}{
		{"no incoming listener: withdraw as without steering", Facts{Outgoing: holders{Accepted: 3}}, false, true, "the incoming process holds no listener"},
		{"incoming listens: steer first", Facts{Incoming: listener, Outgoing: holders{Accepted: 3}}, true, false, "steering"},
		{"steered, outgoing drained", Facts{Incoming: listener, Steered: true}, false, true, "the outgoing process holds no connection"},
		{"steered, connections left, within the bound: wait", Facts{Incoming: listener, Outgoing: holders{Accepted: 2}, Steered: true, Waited: time.Second}, false, false, ""},
		{"steered, connections left at the bound", Facts{Incoming: listener, Outgoing: holders{Accepted: 2}, Steered: true, Waited: 5 * time.Second}, false, true, "the outgoing process still holds 2 connections"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.f, 5*time.Second)
			if d.Steer != tt.steer || d.Done != tt.done || !strings.HasPrefix(d.Why, tt.whyPrefix) {
				t.Errorf("Decide = %+v, want steer %v done %v why %q…", d, tt.steer, tt.done, tt.whyPrefix)
			}
		})
	}
}

func TestParsePortSockets(t *testing.T) {
	const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:192B 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1184452 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:192B 00000000000000000000000000000000:0000 0A 00000007:00000000 00:00000000 00000000     0        0 1184999 1 0000000000000000 100 0 0 10 0
   2: 0000000000000000FFFF00000200C000:192B 0000000000000000FFFF00000200C000:D2A4 01 00000000:00000000 00:00000000 00000000     0        0 1190001 1 0000000000000000 20 4 30 10 -1
   3: 0000000000000000FFFF00000200C000:192B 0000000000000000FFFF00000200C000:D2A6 01 00000000:00000000 00:00000000 00000000     0        0 0 1 0000000000000000 20 4 30 10 -1
   4: 0000000000000000FFFF00000200C000:D2A4 0000000000000000FFFF00000200C000:192B 01 00000000:00000000 00:00000000 00000000     0        0 1190002 1 0000000000000000 20 4 30 10 -1
   5: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5 1 0000000000000000 100 0 0 10 0
`
	s := portSockets{Listening: map[string]bool{}, Accepted: map[string]bool{}}
	parsePortSockets(tcp6, 6443, &s)
	if len(s.Listening) != 2 || !s.Listening["1184452"] || !s.Listening["1184999"] {
		t.Errorf("listening = %v, want the two :6443 listeners", s.Listening)
	}
	// The client side (local port D2A4) and the connection still queued
	// (inode 0) are not accepted connections of port 6443.
	if len(s.Accepted) != 1 || !s.Accepted["1190001"] {
		t.Errorf("accepted = %v, want only 1190001", s.Accepted)
	}
}

// The listener child: TestMain runs it when the test binary is started with
// reuseportListenEnv set to a port. It listens with SO_REUSEPORT and
// answers every connection with its PID, then keeps the connection open
// until the client closes it.
const reuseportListenEnv = "BOOTLET_REUSEPORT_TEST_LISTEN"

func TestMain(m *testing.M) {
	if port := os.Getenv(reuseportListenEnv); port != "" {
		listenChild(port)
		return
	}
	os.Exit(m.Run())
}

func listenChild(port string) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1) }); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening")
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() {
			fmt.Fprintf(c, "%d\n", os.Getpid())
			_, _ = c.Read(make([]byte, 1))
			c.Close()
		}()
	}
}

// startListener starts a listener child on port. Go listens with MPTCP by
// default (Go 1.24+), which the kernel cannot steer; mptcp says so.
func startListener(t *testing.T, port int, mptcp bool) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), reuseportListenEnv+"="+strconv.Itoa(port), "GODEBUG=multipathtcp=0")
	if mptcp {
		cmd.Env[len(cmd.Env)-1] = "GODEBUG=multipathtcp=1"
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "listening\n" {
		t.Fatalf("listener child: %q %v", line, err)
	}
	return cmd
}

// dialPID connects to port and returns the connection and the PID of the
// process that accepted it.
func dialPID(t *testing.T, port int) (net.Conn, int) {
	t.Helper()
	c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("no PID from the listener: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return c, pid
}

func isPID(pid int) func(proc string) bool {
	want := "/proc/" + strconv.Itoa(pid)
	return func(proc string) bool { return proc == want }
}

// TestHandover runs the hand-over on two real processes sharing a port:
// before it the kernel's hash spreads the connections over both; the
// hand-over waits for the outgoing process's open connection to close;
// after it every new connection goes to the incoming process; once the
// outgoing process is gone the steering is released. It needs root (BPF,
// pidfd_getfd), as the daemon does, and fails without it.
func TestHandover(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestHandover needs root (BPF and pidfd_getfd), as bootlet does; run the unit tests as root")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	g, err := Open(port)
	if err != nil {
		t.Fatalf("this kernel cannot steer: %v", err)
	}
	defer g.Close()
	outgoing := startListener(t, port, false)
	incoming := startListener(t, port, false)
	seen := map[int]int{}
	for i := 0; i < 40; i++ {
		c, pid := dialPID(t, port)
		seen[pid]++
		c.Close()
	}
	if seen[outgoing.Process.Pid] == 0 || seen[incoming.Process.Pid] == 0 {
		t.Fatalf("before the hand-over the hash should reach both listeners: %v", seen)
	}

	// A client kept connected to the outgoing process: the hand-over
	// waits for it.
	var held net.Conn
	for i := 0; i < 100 && held == nil; i++ {
		c, pid := dialPID(t, port)
		if pid == outgoing.Process.Pid {
			held = c
		} else {
			c.Close()
		}
	}
	if held == nil {
		t.Fatal("no connection reached the outgoing listener")
	}
	time.AfterFunc(700*time.Millisecond, func() { held.Close() })
	res, err := g.Handover(context.Background(), isPID(incoming.Process.Pid), isPID(outgoing.Process.Pid), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Steered || res.Left != 0 || res.Waited < 500*time.Millisecond || !strings.Contains(res.Why, "no connection") {
		t.Errorf("Handover = %+v, want steered, drained after the held connection closed (~700ms)", res)
	}
	for i := 0; i < 40; i++ {
		c, pid := dialPID(t, port)
		c.Close()
		if pid != incoming.Process.Pid {
			t.Fatalf("connection %d after the hand-over went to pid %d, not the incoming %d", i, pid, incoming.Process.Pid)
		}
	}

	// The outgoing process exits; its steering is released, and a third
	// listener gets connections by the hash again.
	_ = outgoing.Process.Kill()
	_ = outgoing.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		g.mu.Lock()
		var v uint64
		err := g.target.Lookup(uint32(0), &v)
		g.mu.Unlock()
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the steering was not released after the outgoing process exited")
		}
		time.Sleep(100 * time.Millisecond)
	}
	third := startListener(t, port, false)
	seen = map[int]int{}
	for i := 0; i < 40; i++ {
		c, pid := dialPID(t, port)
		seen[pid]++
		c.Close()
	}
	if seen[third.Process.Pid] == 0 || seen[incoming.Process.Pid] == 0 {
		t.Errorf("after the release the hash should reach both listeners again: %v", seen)
	}
}

func TestHandoverNilGroup(t *testing.T) {
	var g *Group
	res, err := g.Handover(context.Background(), func(string) bool { return true }, func(string) bool { return true }, time.Second)
	if err != nil || res.Steered {
		t.Errorf("a nil group hands over unsteered at once: %+v %v", res, err)
	}
}

// An MPTCP listener (Go's default since 1.24) cannot be steered: the kernel
// takes only TCP and UDP sockets in a REUSEPORT_SOCKARRAY. The hand-over
// says so and names the fix, instead of failing deep in a syscall.
func TestHandoverMPTCPListener(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("TestHandoverMPTCPListener needs root (BPF and pidfd_getfd), as bootlet does")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	g, err := Open(port)
	if err != nil {
		t.Fatalf("this kernel cannot steer: %v", err)
	}
	defer g.Close()
	outgoing := startListener(t, port, false)
	incoming := startListener(t, port, true)
	_, err = g.Handover(context.Background(), isPID(incoming.Process.Pid), isPID(outgoing.Process.Pid), time.Second)
	if err == nil || !strings.Contains(err.Error(), "GODEBUG=multipathtcp=0") {
		t.Errorf("Handover to an MPTCP listener: %v, want an error naming GODEBUG=multipathtcp=0", err)
	}
}
