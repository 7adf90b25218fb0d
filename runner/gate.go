package runner

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	btypes "github.com/bootlet/bootlet/types"
)

// StoredPods lists the pods the API has stored (the podapi registry).
type StoredPods interface {
	// ListPods returns the stored pods of namespace ("" for all) and the
	// list's resourceVersion.
	ListPods(namespace string) ([]v1.Pod, string)
}

// RuntimeGate is the registry's PodRuntime from the moment the API serves,
// which is before the container runtime answers (containerd may start after
// bootlet, or be down). Until recovery hands the pods to the runner
// (Open), writes are only stored: Registry.Start then syncs every stored pod
// and resumes every stored deletion, so nothing accepted meanwhile is lost.
type RuntimeGate struct {
	mu      sync.Mutex
	mgr     *Manager
	started bool
	// pending holds deletions asked for between open and the end of
	// Registry.Start, for pods Start had not handed over yet.
	pending map[types.UID]time.Duration
	// connErr is the last error connecting to the runtime; health is the
	// manager's runtime monitor once connected.
	connErr error
	health  *Manager
}

func (g *RuntimeGate) manager() *Manager {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mgr
}

// SetConnectError records why the runtime cannot be reached yet (nil once
// connected).
func (g *RuntimeGate) SetConnectError(err error) {
	g.mu.Lock()
	g.connErr = err
	g.mu.Unlock()
}

// Connected records the manager whose MonitorRuntime reports the runtime's
// health from now on.
func (g *RuntimeGate) Connected(mgr *Manager) {
	g.mu.Lock()
	g.health, g.connErr = mgr, nil
	g.mu.Unlock()
}

// RuntimeError is nil while the runtime answers.
func (g *RuntimeGate) RuntimeError() error {
	g.mu.Lock()
	health, connErr := g.health, g.connErr
	g.mu.Unlock()
	if health != nil {
		return health.RuntimeError()
	}
	if connErr != nil {
		return connErr
	}
	return errors.New("not connected yet")
}

// Open hands pod work to mgr; call it right before Registry.Start.
func (g *RuntimeGate) Open(mgr *Manager) {
	g.mu.Lock()
	g.mgr = mgr
	g.pending = map[types.UID]time.Duration{}
	g.mu.Unlock()
}

// FinishStart is called once Registry.Start returned: every stored pod has a
// worker now, so deletions that raced with Start can be passed on.
func (g *RuntimeGate) FinishStart(pods StoredPods, sink StatusSink) {
	g.mu.Lock()
	mgr, pending := g.mgr, g.pending
	g.started, g.pending = true, nil
	g.mu.Unlock()
	for uid, grace := range pending {
		if mgr.Terminate(uid, grace) {
			continue
		}
		// No worker: the pod never ran in this process and is not
		// running, so the deletion completes now (as Registry.DeletePod
		// does for a worker-less pod).
		stored, _ := pods.ListPods("")
		for i := range stored {
			if p := &stored[i]; p.UID == uid && p.DeletionTimestamp != nil {
				sink.PodTerminated(btypes.KeyOf(p), uid)
			}
		}
	}
}

// Sync implements the API registry's PodRuntime. Before Open it does nothing: the pod is
// stored, and Registry.Start will sync it.
func (g *RuntimeGate) Sync(pod *v1.Pod) {
	if mgr := g.manager(); mgr != nil {
		mgr.Sync(pod)
	}
}

// Terminate implements the API registry's PodRuntime. Before Registry.Start has handed
// every stored pod over, it reports true: the deletion is stored, and Start
// (or FinishStart) terminates the pod's worker, so a pod that still runs
// from before the restart is stopped gracefully rather than forgotten.
func (g *RuntimeGate) Terminate(uid types.UID, gracePeriod time.Duration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.mgr != nil && g.mgr.Terminate(uid, gracePeriod) {
		return true
	}
	if g.started {
		return false
	}
	if g.pending != nil {
		if old, ok := g.pending[uid]; !ok || gracePeriod < old {
			g.pending[uid] = gracePeriod
		}
	}
	return true
}

// Refresh implements the API registry's PodRuntime; before Open there are no workers,
// and the first sync of each pod writes its volumes anyway.
func (g *RuntimeGate) Refresh() {
	if mgr := g.manager(); mgr != nil {
		mgr.Refresh()
	}
}

// Logs implements the API registry's PodRuntime.
func (g *RuntimeGate) Logs(ctx context.Context, pod *v1.Pod, opts *v1.PodLogOptions, out io.Writer) error {
	mgr := g.manager()
	if mgr == nil {
		return apierrors.NewServiceUnavailable("the container runtime is not connected yet")
	}
	return mgr.Logs(ctx, pod, opts, out)
}
