package runner

import (
	"context"
	"errors"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Timeouts of the mutating CRI calls. They run on a context detached from
// the daemon's shutdown signal (see mutate), so these bound them instead;
// they match the CRI client's own per-call timeout bootlet dials with.
const (
	mutateTimeout = 2 * time.Minute
	// ShutdownWait bounds how long Shutdown waits for in-flight mutating
	// calls.
	ShutdownWait = 10 * time.Second
)

// errShuttingDown refuses a mutating call that would start after Shutdown.
var errShuttingDown = errors.New("bootlet is shutting down; not starting a new runtime call")

// inflight counts the mutating CRI calls under way, so that Shutdown can let
// them finish: a RunPodSandbox, CreateContainer or StartContainer cancelled
// mid-call leaves half-made objects behind in containerd
// (containerd/containerd#11037).
type inflight struct {
	mu      sync.Mutex
	n       int
	done    uint64 // calls finished, ever (MutatingCallsDone)
	closing bool
	idle    chan struct{} // closed while n == 0
}

func newInflight() *inflight {
	idle := make(chan struct{})
	close(idle)
	return &inflight{idle: idle}
}

// begin registers a call; it refuses once Shutdown has begun, so that no call
// can slip in after Shutdown read the idle channel.
func (f *inflight) begin() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return false
	}
	if f.n == 0 {
		f.idle = make(chan struct{})
	}
	f.n++
	return true
}

func (f *inflight) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	f.done++
	if f.n == 0 {
		close(f.idle)
	}
}

// close refuses new calls and returns a channel closed once none is left.
func (f *inflight) close() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closing = true
	return f.idle
}

func (f *inflight) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// MutatingCallsDone is how many mutating CRI calls have finished since the
// manager started: it moves while pods are being created, started, stopped
// or removed, and stands still while they only run. The daemon releases
// the binary's pages once it has stood still a while (node/memory.go).
func (m *Manager) MutatingCallsDone() uint64 {
	m.calls.mu.Lock()
	defer m.calls.mu.Unlock()
	return m.calls.done
}

// mutate runs one mutating CRI call. It does not start once ctx (the
// daemon's lifetime) is done, but a call that started runs on a context
// detached from it, bounded by timeout, and Shutdown waits for it.
func (m *Manager) mutate(ctx context.Context, timeout time.Duration, call func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !m.calls.begin() {
		return errShuttingDown
	}
	defer m.calls.end()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	return call(cctx)
}

// Shutdown is called once the daemon's context is done: it refuses new
// mutating CRI calls and waits, at most timeout, for those under way and for
// the workers to return. Pods keep running: nothing is stopped. It reports
// whether everything finished in time.
func (m *Manager) Shutdown(timeout time.Duration) bool {
	idle := m.calls.close()
	workers := make(chan struct{})
	go func() { m.wg.Wait(); close(workers) }()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, ch := range []<-chan struct{}{idle, workers} {
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
	return true
}

// The mutating CRI calls the workers make, each through mutate.

func (m *Manager) runPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig) (id string, err error) {
	err = m.mutate(ctx, mutateTimeout, func(c context.Context) (e error) {
		id, e = m.cfg.Runtime.RunPodSandbox(c, cfg, "")
		return e
	})
	return id, err
}

func (m *Manager) createContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sb *runtimeapi.PodSandboxConfig) (id string, err error) {
	err = m.mutate(ctx, mutateTimeout, func(c context.Context) (e error) {
		id, e = m.cfg.Runtime.CreateContainer(c, sandboxID, cfg, sb)
		return e
	})
	return id, err
}

func (m *Manager) startContainer(ctx context.Context, id string) error {
	return m.mutate(ctx, mutateTimeout, func(c context.Context) error { return m.cfg.Runtime.StartContainer(c, id) })
}

// stopContainer gives the runtime the grace period plus the usual call
// timeout.
func (m *Manager) stopContainer(ctx context.Context, id string, graceSeconds int64) error {
	return m.mutate(ctx, time.Duration(graceSeconds)*time.Second+mutateTimeout, func(c context.Context) error {
		return m.cfg.Runtime.StopContainer(c, id, graceSeconds)
	})
}

func (m *Manager) removeContainer(ctx context.Context, id string) error {
	return m.mutate(ctx, mutateTimeout, func(c context.Context) error { return m.cfg.Runtime.RemoveContainer(c, id) })
}

func (m *Manager) stopPodSandbox(ctx context.Context, id string) error {
	return m.mutate(ctx, mutateTimeout, func(c context.Context) error { return m.cfg.Runtime.StopPodSandbox(c, id) })
}

func (m *Manager) removePodSandbox(ctx context.Context, id string) error {
	return m.mutate(ctx, mutateTimeout, func(c context.Context) error { return m.cfg.Runtime.RemovePodSandbox(c, id) })
}
