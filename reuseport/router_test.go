package reuseport

import (
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestRouterAndHandover runs the router on real processes sharing a port:
// a second listener that binds but does not serve gets no connection; once
// it serves it gets every new one; the hand-over waits for the first
// process's open connection to close; when the first process exits the
// second stays the target.
func TestRouterAndHandover(t *testing.T) {
	r, node, port := newTestRouter(t)
	ctx := context.Background()

	outgoing := startListener(t, port, false, false)
	r.Round(ctx)
	if got := r.Target().PID; got != outgoing.Process.Pid {
		t.Fatalf("target pid %d, want the only serving listener %d", got, outgoing.Process.Pid)
	}
	// The target, asked again, still serves.
	r.Round(ctx)
	if why := r.lastDecision.Why; !strings.Contains(why, "serves (the newest that does)") {
		t.Fatalf("the target, probed again, does not serve: %s", why)
	}
	incoming := startListener(t, port, false, true)
	r.Round(ctx)
	connectionsGoTo(t, node, port, outgoing.Process.Pid, "while the new listener does not serve")
	// A client kept connected to the outgoing process.
	held, err := net.Dial("tcp", net.JoinHostPort(node, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	_ = incoming.Process.Signal(syscall.SIGUSR1)
	deadline := time.Now().Add(5 * time.Second)
	for r.Target().PID != incoming.Process.Pid {
		if time.Now().After(deadline) {
			t.Fatalf("the router did not route to the serving new listener %d: target %+v", incoming.Process.Pid, r.Target())
		}
		r.Round(ctx)
	}
	connectionsGoTo(t, node, port, incoming.Process.Pid, "after the new listener took over")
	// The newest listener is the target: loopback connections are left to
	// the kernel's hash, and reach both.
	loopbackHashed(t, port, incoming.Process.Pid, outgoing.Process.Pid, "once the newest listener is the target")
	// The route has been in place longer than this drain: the hand-over
	// is over at once, though the outgoing process still holds a
	// connection (the drain counts from the route, not from the call:
	// counted from the call, it would wait the whole drain).
	const drain = time.Second
	time.Sleep(drain + 100*time.Millisecond)
	res, err := r.Handover(ctx, isPID(incoming.Process.Pid), isPID(outgoing.Process.Pid), drain)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Routed || res.Left == 0 || res.RoutedFor < drain || res.Waited >= drain {
		t.Errorf("Handover = %+v, want routed for longer than the %s drain, over before the drain, with the held connection left", res, drain)
	}
	time.AfterFunc(700*time.Millisecond, func() { held.Close() })
	res, err = r.Handover(ctx, isPID(incoming.Process.Pid), isPID(outgoing.Process.Pid), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Routed || res.Left != 0 || res.Waited < 500*time.Millisecond {
		t.Errorf("Handover = %+v, want routed and drained after the held connection closed (~700ms)", res)
	}
	_ = outgoing.Process.Kill()
	_ = outgoing.Wait()
	r.Round(ctx)
	if got := r.Target().PID; got != incoming.Process.Pid || !strings.Contains(r.lastDecision.Why, "serves (the newest that does)") {
		t.Errorf("after the outgoing process exited the target is %d (%s), want %d serving", got, r.lastDecision.Why, incoming.Process.Pid)
	}
}

// TestRestartedOutgoingListener is the fault trials' bug: the outgoing
// apiserver (a checkpoint) restarts after the incoming one serves, so its
// listener is the newest serving one and takes every new connection. A
// check by fresh connections could then never reach the incoming process;
// the router's own probe of each listener does (ServedBy), and once a
// hand-over withdraws the restarted process, the route moves to the
// incoming one and stays there until the outgoing listener is gone.
func TestRestartedOutgoingListener(t *testing.T) {
	r, node, port := newTestRouter(t)
	ctx := context.Background()

	incoming := startListener(t, port, false, false)
	time.Sleep(20 * time.Millisecond) // a later start time, in clock ticks
	restarted := startListener(t, port, false, false)
	r.Round(ctx)
	if got := r.Target().PID; got != restarted.Process.Pid {
		t.Fatalf("target pid %d, want the newest serving listener %d", got, restarted.Process.Pid)
	}
	connectionsGoTo(t, node, port, restarted.Process.Pid, "to the newest serving listener")
	if known, serving := r.ServedBy(port, isPID(incoming.Process.Pid)); !known || !serving {
		t.Fatalf("ServedBy(incoming) = known %v serving %v: the router probed it through its own slot and it serves", known, serving)
	}
	if known, _ := r.ServedBy(port+1, isPID(incoming.Process.Pid)); known {
		t.Errorf("ServedBy of another port says known")
	}
	if known, _ := r.ServedBy(port, isPID(1)); known {
		t.Errorf("ServedBy of a process without a listener says known")
	}

	done := make(chan Result, 1)
	go func() {
		res, err := r.Handover(ctx, isPID(incoming.Process.Pid), isPID(restarted.Process.Pid), 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	deadline := time.Now().Add(5 * time.Second)
	for r.Target().PID != incoming.Process.Pid {
		if time.Now().After(deadline) {
			t.Fatalf("the hand-over did not move the route off the withdrawn listener: target %+v (%s)", r.Target(), r.lastDecision.Why)
		}
		r.Round(ctx)
		time.Sleep(50 * time.Millisecond)
	}
	res := <-done
	if !res.Routed || res.Left != 0 {
		t.Errorf("Handover = %+v, want routed to the incoming process and drained", res)
	}
	// After the call, until the withdrawn process is gone, the route does
	// not swing back to its newer listener.
	r.Round(ctx)
	if got := r.Target().PID; got != incoming.Process.Pid {
		t.Fatalf("after the hand-over the target went back to %d, want %d", got, incoming.Process.Pid)
	}
	connectionsGoTo(t, node, port, incoming.Process.Pid, "after the hand-over")
	_ = restarted.Process.Kill()
	_ = restarted.Wait()
	r.Round(ctx)
	r.mu.Lock()
	left := len(r.withdrawals)
	r.mu.Unlock()
	if left != 0 {
		t.Errorf("%d withdrawals kept after the withdrawn process's listener is gone", left)
	}
}

// TestLoopbackReachesTheStartingListener is the upgrade's crash: a new
// kube-apiserver's post-start hooks dial [::1]:port and must reach their
// own process (kube-apiserver exits after a minute when its first service
// IP and port repair fails on another apiserver's loopback certificate).
// While the newest listener starts, loopback connections go to it and every
// other one to the serving target; the router still probes it (through the
// loopback slot) and routes to it once it serves, and from then on the hash
// shares loopback between the two; a newer one starting after that gets
// the loopback connections in turn.
func TestLoopbackReachesTheStartingListener(t *testing.T) {
	r, node, port := newTestRouter(t)
	ctx := context.Background()
	starting := startingEnv + "=1"

	outgoing := startListener(t, port, false, false)
	r.Round(ctx)
	for _, host := range []string{node, "127.0.0.1", "::1"} {
		connectionsGoTo(t, host, port, outgoing.Process.Pid, "one listener")
	}
	incoming := startListener(t, port, false, false, starting)
	r.Round(ctx)
	r.Round(ctx)
	connectionsGoTo(t, node, port, outgoing.Process.Pid, "while the new listener starts")
	for _, lo := range []string{"127.0.0.1", "::1"} {
		connectionsGoTo(t, lo, port, incoming.Process.Pid, "loopback, while the new listener starts")
	}
	if known, serving := r.ServedBy(port, isPID(incoming.Process.Pid)); !known || serving {
		t.Fatalf("ServedBy(starting listener) = known %v, serving %v; want known and not serving (probed through the loopback slot)", known, serving)
	}
	_ = incoming.Process.Signal(syscall.SIGUSR1)
	deadline := time.Now().Add(5 * time.Second)
	for r.Target().PID != incoming.Process.Pid {
		if time.Now().After(deadline) {
			t.Fatalf("the router did not route to the new listener once it served (probed through the loopback slot): target %+v, %s", r.Target(), r.lastDecision.Why)
		}
		r.Round(ctx)
	}
	connectionsGoTo(t, node, port, incoming.Process.Pid, "after the new listener took over")
	loopbackHashed(t, port, incoming.Process.Pid, outgoing.Process.Pid, "after the new listener took over")
	// A restarted outgoing listener, newest again: its own loopback
	// connections reach it, the others stay with the serving target (it
	// does not serve, so it takes no route).
	_ = outgoing.Process.Kill()
	_ = outgoing.Wait()
	restarted := startListener(t, port, false, false, starting)
	r.Round(ctx)
	r.Round(ctx)
	connectionsGoTo(t, node, port, incoming.Process.Pid, "while a restarted listener starts")
	connectionsGoTo(t, "::1", port, restarted.Process.Pid, "loopback, while a restarted listener starts")
	// Once it is gone, the loopback slot is empty again: the hash, with
	// one listener left.
	_ = restarted.Process.Kill()
	_ = restarted.Wait()
	r.Round(ctx)
	if r.loopbackTarget().Inode != "" {
		t.Errorf("the loopback slot still holds %+v after its listener is gone", r.loopbackTarget())
	}
	connectionsGoTo(t, "127.0.0.1", port, incoming.Process.Pid, "loopback, once the restarted listener is gone")
}

// TestLoopbackStaysWithTheOlderStartingListener is the three masters'
// restart (docs/design/reuseport.md, "Loopback and idle connections"):
// two apiservers start on the port, neither serves yet, and the newer one
// must not take the loopback connections of the older, whose post-start
// hooks run on them already
// (newest-first gave them to the newer, and the older's hooks failed on its
// certificate). The older keeps them until it serves, then the newer gets
// them until it serves in turn, then the hash shares them; an older one
// that served and stops serving (its shutdown delay) is not starting, and
// does not take them back.
func TestLoopbackStaysWithTheOlderStartingListener(t *testing.T) {
	r, node, port := newTestRouter(t)
	ctx := context.Background()
	starting := startingEnv + "=1"

	older := startListener(t, port, false, false, starting)
	r.Round(ctx)
	connectionsGoTo(t, "::1", port, older.Process.Pid, "loopback, one starting listener")
	time.Sleep(20 * time.Millisecond) // a later start time, in clock ticks
	newer := startListener(t, port, false, false, starting)
	r.Round(ctx)
	r.Round(ctx)
	for _, lo := range []string{"127.0.0.1", "::1"} {
		connectionsGoTo(t, lo, port, older.Process.Pid, "loopback, while the older of two starting listeners starts")
	}
	if known, serving := r.ServedBy(port, isPID(newer.Process.Pid)); !known || serving {
		t.Fatalf("ServedBy(newer starting listener) = known %v, serving %v; want known and not serving (probed through the probe slot)", known, serving)
	}
	_ = older.Process.Signal(syscall.SIGUSR1)
	waitTarget(t, r, older.Process.Pid, "the older listener, once it serves")
	r.Round(ctx)
	connectionsGoTo(t, node, port, older.Process.Pid, "once the older listener serves")
	for _, lo := range []string{"127.0.0.1", "::1"} {
		connectionsGoTo(t, lo, port, newer.Process.Pid, "loopback, once the older serves and the newer starts")
	}
	_ = newer.Process.Signal(syscall.SIGUSR1)
	waitTarget(t, r, newer.Process.Pid, "the newer listener, once it serves")
	connectionsGoTo(t, node, port, newer.Process.Pid, "once the newer listener serves")
	loopbackHashed(t, port, newer.Process.Pid, older.Process.Pid, "once both serve")
	// The older one's shutdown delay: /readyz fails, it still answers.
	_ = older.Process.Signal(syscall.SIGUSR2)
	r.Round(ctx)
	r.Round(ctx)
	if r.loopbackTarget().Inode != "" {
		t.Errorf("the loopback slot holds %+v, the stopping older listener's: it served, it is not starting (%s)", r.loopbackTarget(), r.lastDecision.LoopbackWhy)
	}
	loopbackHashed(t, port, newer.Process.Pid, older.Process.Pid, "while the older listener stops")
}

// waitTarget runs rounds until pid's listener is the target, at most 5 s.
func waitTarget(t *testing.T, r *Router, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.Target().PID != pid {
		if time.Now().After(deadline) {
			t.Fatalf("the target is not %s (%d): %+v, %s", what, pid, r.Target(), r.lastDecision.Why)
		}
		r.Round(context.Background())
	}
}

// loopbackHashed checks that 40 new loopback connections (each address)
// reach both a and b: the kernel's hash decides.
func loopbackHashed(t *testing.T, port, a, b int, when string) {
	t.Helper()
	for _, lo := range []string{"127.0.0.1", "::1"} {
		seen := map[int]int{}
		for i := 0; i < 40; i++ {
			seen[pidOf(t, lo, port)]++
		}
		if seen[a] == 0 || seen[b] == 0 {
			t.Errorf("%s, connections to %s should be left to the hash and reach both %d and %d: %v", when, lo, a, b, seen)
		}
	}
}

// connectionsGoTo checks that 30 new connections to host:port in a row
// are all answered by pid (when says in which situation).
func connectionsGoTo(t *testing.T, host string, port, pid int, when string) {
	t.Helper()
	for i := 0; i < 30; i++ {
		if got := pidOf(t, host, port); got != pid {
			t.Fatalf("%s, connection %d went to %d, want %d", when, i, got, pid)
		}
	}
}

// newTestRouter routes a free port of this machine's node address, as
// bootlet routes the apiserver's; plain HTTP.
func newTestRouter(t *testing.T) (r *Router, node string, port int) {
	t.Helper()
	requireRoot(t)
	port = freePort(t)
	node = nodeAddress(t)
	r, err := NewRouter(net.JoinHostPort(node, strconv.Itoa(port)), "/readyz", nil, testApiservers)
	if err != nil {
		t.Fatalf("this kernel cannot steer: %v", err)
	}
	t.Cleanup(func() { r.group.Close() })
	r.cgroupOf = testCgroupOf(nil)
	return r, node, port
}

// The listener children stand for the processes of one apiserver
// container (testCgroupOf puts them in its cgroup), which testApiservers
// lists.
const (
	testPodUID      = "0b7c3a1e-1111-2222-3333-444455556666"
	testContainerID = "4f1d9c2b7e6a5d4c3b2a19f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4"
)

func testApiservers(context.Context) ([]Apiserver, error) {
	return []Apiserver{{PodUID: testPodUID, ContainerID: testContainerID}}, nil
}

// testCgroupOf places every process in the known apiserver container,
// except those foreign holds: a system service's cgroup.
func testCgroupOf(foreign *sync.Map) func(pid int) string {
	return func(pid int) string {
		if foreign != nil {
			if _, ok := foreign.Load(pid); ok {
				return "0::/system.slice/other.service\n"
			}
		}
		return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(testPodUID, "-", "_") + ".slice/cri-containerd-" + testContainerID + ".scope\n"
	}
}

func isPID(pid int) func(proc string) bool {
	want := "/proc/" + strconv.Itoa(pid)
	return func(proc string) bool { return proc == want }
}
