package handoff

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// The kubelet start gate closes the window in which the kubelet would
// duplicate a container bootlet is starting
// (docs/design/handoff.md, "The kubelet start gate"). The kubelet's first
// sync of a static pod reads the runtime as its first relist saw it; a
// container bootlet created just before and starts just after reads as
// CREATED, which the kubelet always starts again beside bootlet's (attempt
// 1: a restart in its status, and for a server, a duplicate that dies on the
// port). The kubelet's healthz answers seconds after that relist, too late
// for bootlet to step back.
//
// So the kubelet's unit runs `bootlet kubelet-gate` before the kubelet
// (ExecStartPre): it writes StartingFile, then waits for an exclusive lock
// on StartLockFile. Each of bootlet's pod syncs holds the lock shared
// (Hold) from before its handoff step until its CRI calls are done, and
// the step reads StartingFile under it. Either the sync took the lock
// first, and the gate waits for its calls to finish, or the gate wrote the
// file first, and the sync sees it and keeps its hands off the pod. Once
// the gate is through, bootlet starts nothing the kubelet is about to
// start, and the kubelet's first relist sees every container bootlet
// started running.
const (
	StartingFile  = "kubelet-starting"
	StartLockFile = "kubelet-starting.lock"
	// StartingValid bounds how long StartingFile keeps bootlet's hands off
	// while the kubelet does not answer: a kubelet that runs but never
	// answers its healthz, or one gone without its unit's ExecStopPost
	// (which withdraws the file; a unit that restarts a crashing kubelet
	// withdraws and writes it again each time) must not stop bootlet for
	// ever. Past it, bootlet acts again. It counts from the announcement,
	// before the gate's own wait.
	StartingValid = 2 * time.Minute
)

// DefaultGateDir is where the gate's files are by default: the directory
// of bootlet's API socket (podapi.DefaultSocket), a tmpfs that a reboot
// empties.
const DefaultGateDir = "/run/bootlet"

// StartGate is bootlet's side of the gate, in dir ("": no gate).
type StartGate struct {
	dir      string
	now      func() time.Time
	warnOnce sync.Once
}

// NewStartGate is the gate in dir.
func NewStartGate(dir string) *StartGate {
	return &StartGate{dir: dir, now: time.Now}
}

// Hold takes the gate's lock shared for one sync and returns its release.
// It never fails the sync: without the lock (no directory) there is no
// gate to wait on it, and the sync goes on.
func (g *StartGate) Hold() (release func()) {
	if g == nil || g.dir == "" {
		return func() {}
	}
	f, err := openLock(g.dir)
	if err != nil {
		g.warnOnce.Do(func() {
			klog.ErrorS(err, "Kubelet start gate: no lock; syncs go on unguarded, and a kubelet that starts now may duplicate a container bootlet starts (logged once)")
		})
		return func() {}
	}
	// Each hold is its own open file description: flock locks belong to
	// one, so the syncs' shared locks are independent of each other.
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return func() {}
	}
	return func() { f.Close() } // closing the description drops the lock
}

// Starting reports whether a kubelet announced its start less than
// StartingValid ago. Read under Hold.
func (g *StartGate) Starting() bool {
	if g == nil || g.dir == "" {
		return false
	}
	fi, err := os.Stat(filepath.Join(g.dir, StartingFile))
	if err != nil {
		return false
	}
	return startingAt(fi.ModTime(), g.now())
}

// startingAt is whether a start announced at at still holds at now.
func startingAt(at, now time.Time) bool {
	age := now.Sub(at)
	return age >= -time.Minute && age < StartingValid // a clock step back is not "future"
}

// OpenForKubelet is the kubelet's side (`bootlet kubelet-gate`): it
// announces the start, then waits, at most timeout, until no sync of
// bootlet's holds the lock. It returns how long it waited. No directory
// means no bootlet on this node: nothing to wait for.
func OpenForKubelet(ctx context.Context, dir string, timeout time.Duration) (time.Duration, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	start := time.Now()
	// The announcement's age is the file's mtime, which the write sets.
	if err := os.WriteFile(filepath.Join(dir, StartingFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		return 0, fmt.Errorf("announcing the kubelet's start: %w", err)
	}
	f, err := openLock(dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return time.Since(start), nil // released by the deferred Close
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			return time.Since(start), err
		}
		select {
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		case <-deadline.C:
			return time.Since(start), fmt.Errorf("bootlet still starts containers after %s: the kubelet starts anyway", timeout)
		case <-tick.C:
		}
	}
}

// openLock opens the gate's lock file in dir, a new open file description
// each time (flock locks belong to one).
func openLock(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, StartLockFile), os.O_RDONLY|os.O_CREATE|unix.O_CLOEXEC, 0o600)
}

// KubeletStopped withdraws the announcement (the unit's ExecStopPost):
// a kubelet that is gone starts nothing.
func KubeletStopped(dir string) error {
	err := os.Remove(filepath.Join(dir, StartingFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
