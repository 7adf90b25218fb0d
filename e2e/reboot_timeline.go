//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/ownprocess"
)

// Where a reboot's time goes, from the power-on to the checkpoint
// apiserver no longer serving
// (docs/bench.md, "Handoff to the kubelet, pivot and reboot (`_output/bench/handoff.json`)"):
// a watcher polls bootlet's checkpoint pod and, on the host's /proc, what
// its processes hold of the apiserver port; the daemon's log gives the
// checkpointer's withdrawal decision and the port hand-over's end.

// apiserverPort is the port the bootstrap, checkpoint and self-hosted
// apiservers share (SO_REUSEPORT).
const apiserverPort = 6443

// RebootTimes are the moments of one reboot, zero when not seen.
type RebootTimes struct {
	PoweredOn, BootletReady, KubeletStarted time.Time
	// Activated: the checkpoint pod's activation annotation (bootlet's
	// clock); Listening: its processes first seen holding a listener on the
	// apiserver port; Readyz: the admin client's /readyz ok.
	Activated, Listening, Readyz time.Time
	// SelfHostedStarted, SelfHostedReady: the self-hosted apiserver
	// container's start and its Ready condition (the kubelet's status).
	SelfHostedStarted, SelfHostedReady time.Time
	// Decided, HandedOver: the checkpointer's withdrawal decision and the
	// end of the port hand-over (the daemon's log).
	Decided, HandedOver time.Time
	// Withdrawn: the checkpoint pod first seen deleting (the old end of
	// "self-hosted again", with the self-hosted pods Ready).
	Withdrawn time.Time
	// StoppedServing: the checkpoint apiserver serves no more: withdrawn,
	// and its processes hold no listener on the port, or no accepted
	// connection there (the router sends the new ones to the listener that
	// serves), or its pod is gone.
	StoppedServing time.Time
	// Gone: the checkpoint pod left bootlet's API (its graceful stop ended).
	Gone time.Time
	// LeftAtWithdrawal: the connections the checkpoint's processes held on
	// the port when it was first seen withdrawn; LeftClients names their
	// client processes (comm and remote address).
	LeftAtWithdrawal int
	LeftClients      string
}

// Breakdown is one line of the reboot's moments, each from the power-on.
func (r RebootTimes) Breakdown() string {
	at := func(tm time.Time) string {
		if tm.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%.1fs", tm.Sub(r.PoweredOn).Seconds())
	}
	return fmt.Sprintf("power-on -> bootlet ready %s, kubelet started %s, checkpoint activated %s, listening %s, /readyz %s; "+
		"self-hosted apiserver container started %s, Ready %s; withdrawal decided %s, hand-over done %s, withdrawn %s (%d connections left), "+
		"checkpoint stopped serving %s, gone %s",
		at(r.BootletReady), at(r.KubeletStarted), at(r.Activated), at(r.Listening), at(r.Readyz),
		at(r.SelfHostedStarted), at(r.SelfHostedReady), at(r.Decided), at(r.HandedOver), at(r.Withdrawn), r.LeftAtWithdrawal,
		at(r.StoppedServing), at(r.Gone))
}

// checkpointWatch polls bootlet's checkpoint apiserver pod every 200 ms (a scan of
// /proc each time: less often would blur, more often would load the node).
type checkpointWatch struct {
	mu   sync.Mutex
	t    RebootTimes
	stop chan struct{}
	done chan struct{}
}

// watchCheckpointServing starts the watcher of the checkpoint pod ns/name
// in bootlet b (after the power-on).
func watchCheckpointServing(b *Bootlet, ns, name string) *checkpointWatch {
	w := &checkpointWatch{stop: make(chan struct{}), done: make(chan struct{})}
	cs := b.Client
	go func() {
		defer close(w.done)
		var uid types.UID
		for {
			now := time.Now()
			p, err := cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err) && uid != "":
				w.mark(func(t *RebootTimes) {
					if t.StoppedServing.IsZero() {
						t.StoppedServing = now
					}
					t.Gone = now
				})
				return
			case err == nil:
				uid = p.UID
				listening, accepted := portHeldBy(ownprocess.InPod(p.UID), apiserverPort)
				w.mark(func(t *RebootTimes) {
					if listening && t.Listening.IsZero() {
						t.Listening = now
					}
					if p.DeletionTimestamp != nil && t.Withdrawn.IsZero() {
						t.Withdrawn, t.LeftAtWithdrawal = now, accepted
						t.LeftClients = clientsOf(ownprocess.InPod(p.UID), apiserverPort)
					}
					// Only bootlet's withdrawal stops it: a listener that
					// closes under a running checkpoint (a crash) comes back.
					if t.StoppedServing.IsZero() && p.DeletionTimestamp != nil && (!listening || accepted == 0) {
						t.StoppedServing = now
					}
				})
			}
			select {
			case <-w.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *checkpointWatch) mark(f func(*RebootTimes)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.t)
}

// waitStoppedServing waits until the checkpoint stopped serving and
// returns what the watcher saw.
func (w *checkpointWatch) waitStoppedServing(t testing.TB, timeout time.Duration) RebootTimes {
	t.Helper()
	Eventually(t, timeout, func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.t.StoppedServing.IsZero(), "the checkpoint apiserver still serves: " + w.t.Breakdown()
	})
	return w.times()
}

func (w *checkpointWatch) times() RebootTimes {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.t
}

// end stops the watcher and returns what it saw.
func (w *checkpointWatch) end() RebootTimes {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	return w.times()
}

// portHeldBy reports whether the processes match selects hold a listener
// on port, and how many accepted connections of it (the host's /proc/net:
// the apiservers run in the host network).
func portHeldBy(match func(proc string) bool, port int) (listening bool, accepted int) {
	contents, _ := ownprocess.ReadProcNetTCP()
	listen, est := map[string]bool{}, map[string]bool{}
	local := fmt.Sprintf(":%04X", port)
	for _, c := range contents {
		for _, line := range strings.Split(c, "\n") {
			f := strings.Fields(line)
			if len(f) < 10 || !strings.HasSuffix(f[1], local) || f[9] == "0" {
				continue
			}
			switch f[3] {
			case "0A": // TCP_LISTEN
				listen[f[9]] = true
			case "01": // TCP_ESTABLISHED, server side
				est[f[9]] = true
			}
		}
	}
	for _, proc := range ownprocess.Processes(match) {
		for inode := range ownprocess.SocketFDs(proc) {
			if listen[inode] {
				listening = true
			}
			if est[inode] {
				accepted++
			}
		}
	}
	return listening, accepted
}

// selfHostedApiserverTimes reads, from the apiserver, when the newest
// self-hosted apiserver pod's container started and when it turned Ready.
func selfHostedApiserverTimes(admin *kubernetes.Clientset, node string, r *RebootTimes) {
	pods, err := selfHostedPods(context.Background(), admin, node, "kube-apiserver")
	if err != nil {
		return
	}
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running != nil && c.State.Running.StartedAt.After(r.SelfHostedStarted) {
				r.SelfHostedStarted = c.State.Running.StartedAt.Time
			}
		}
		if rt := readyTransition(p); rt.After(r.SelfHostedReady) {
			r.SelfHostedReady = rt
		}
	}
}

// checkpointerLogTimes reads, from the daemon's log since the power-on,
// the withdrawal decision and the port hand-over's end (klog's header time).
func checkpointerLogTimes(path string, r *RebootTimes) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		tm, ok := klogTime(l, r.PoweredOn)
		if !ok || tm.Before(r.PoweredOn) {
			continue
		}
		switch {
		case r.Decided.IsZero() && strings.Contains(l, `"Checkpointer"`) && strings.Contains(l, `decision=["withdraw"]`):
			r.Decided = tm
		case r.HandedOver.IsZero() && !r.Decided.IsZero() && strings.Contains(l, `"Port hand-over`):
			r.HandedOver = tm
		}
	}
}

// klogTime parses a klog header ("I1127 04:35:12.123456 ...") in ref's
// year and location.
func klogTime(line string, ref time.Time) (time.Time, bool) {
	f := strings.Fields(line)
	if len(f) < 2 || len(f[0]) != 5 {
		return time.Time{}, false
	}
	mon, err1 := strconv.Atoi(f[0][1:3])
	day, err2 := strconv.Atoi(f[0][3:5])
	clock, err3 := time.ParseInLocation("15:04:05.000000", f[1], ref.Location())
	if err1 != nil || err2 != nil || err3 != nil {
		return time.Time{}, false
	}
	return time.Date(ref.Year(), time.Month(mon), day, clock.Hour(), clock.Minute(), clock.Second(), clock.Nanosecond(), ref.Location()), true
}

// clientsOf names the client ends of the connections the processes match
// selects accepted on port: "comm(remote)" for each, a diagnostic of what
// a drained hand-over waits for.
func clientsOf(match func(proc string) bool, port int) string {
	contents, _ := ownprocess.ReadProcNetTCP()
	type conn struct{ local, remote, inode string }
	var all []conn
	for _, c := range contents {
		for _, line := range strings.Split(c, "\n") {
			f := strings.Fields(line)
			if len(f) >= 10 && f[3] == "01" {
				all = append(all, conn{unmapV4(f[1]), unmapV4(f[2]), f[9]})
			}
		}
	}
	held := map[string]bool{}
	for _, proc := range ownprocess.Processes(match) {
		for inode := range ownprocess.SocketFDs(proc) {
			held[inode] = true
		}
	}
	local := fmt.Sprintf(":%04X", port)
	// The client side of each accepted connection: local and remote swapped.
	want := map[string]string{}
	for _, c := range all {
		if held[c.inode] && strings.HasSuffix(c.local, local) {
			for _, d := range all {
				if d.local == c.remote && d.remote == c.local {
					want[d.inode] = c.remote
				}
			}
			if _, ok := want["?"+c.remote]; !ok {
				want["?"+c.remote] = c.remote
			}
		}
	}
	found := map[string]string{}
	for _, proc := range ownprocess.Processes(func(string) bool { return true }) {
		fds := ownprocess.SocketFDs(proc)
		for inode, remote := range want {
			if _, ok := fds[inode]; ok {
				comm, _ := os.ReadFile(proc + "/comm")
				found[remote] = strings.TrimSpace(string(comm))
			}
		}
	}
	var out []string
	for k, remote := range want {
		if strings.HasPrefix(k, "?") {
			name := found[remote]
			if name == "" {
				name = "?"
			}
			out = append(out, name+"("+remote+")")
		}
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// unmapV4 writes a v4-mapped IPv6 address of /proc/net/tcp6
// (::ffff:a.b.c.d, "0000000000000000FFFF0000" then the IPv4 word) as
// /proc/net/tcp writes the same address, so that a dual-stack listener's
// accepted socket finds its IPv4 client's.
func unmapV4(addr string) string {
	if rest, ok := strings.CutPrefix(addr, "0000000000000000FFFF0000"); ok {
		return rest
	}
	return addr
}
