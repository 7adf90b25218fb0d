package runner

import (
	"context"
	"net"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/kubelet/network/dns"
	"k8s.io/utils/clock"

	"github.com/bootlet/bootlet/cri"
	btypes "github.com/bootlet/bootlet/types"
)

// Kubelet constants bootlet matches.
const (
	backoffInitial = 10 * time.Second
	backoffMax     = 5 * time.Minute
	// minimumGracePeriod is the kubelet's minimumGracePeriodInSeconds.
	minimumGracePeriod = 2 * time.Second
	resyncPeriod       = time.Second
)

// EventSink receives kubelet-style events about pods.
type EventSink interface {
	Event(pod *v1.Pod, eventType, reason, message string)
}

// StatusSink receives pod status and the end of a pod's termination.
type StatusSink interface {
	// PodStatus is called with the latest computed status of a pod.
	PodStatus(key btypes.PodKey, uid types.UID, status v1.PodStatus)
	// PodTerminated is called once a deleted pod has no runtime objects left.
	PodTerminated(key btypes.PodKey, uid types.UID)
}

// Config is what the manager needs from the daemon.
type Config struct {
	NodeName string
	// RootDir is bootlet's state dir; pods' materialised volumes live in
	// RootDir/pods (volumes_dirs.go).
	RootDir string
	// PodRootDir is the root of the pods' kubelet-layout data (etc-hosts,
	// containers/, emptyDirs); empty: PodDataRoot's default.
	PodRootDir   string
	PodLogsDir   string
	CgroupDriver string
	Runtime      *cri.Runtime
	Objects      cri.ObjectSource
	Events       EventSink
	Status       StatusSink
	// HostIPs are the node's addresses, for hostNetwork pods and env.
	HostIPs       []string
	MachineMemory int64
	Allocatable   v1.ResourceList
	// ResolvConf is the kubelet's resolvConf (default /etc/resolv.conf).
	ResolvConf string
	// ContainerLogsDir holds the kubelet's /var/log/containers links to
	// container logs (logs.go); empty: no links.
	ContainerLogsDir string
	// Handoff hands the pods to a kubelet on the node (package handoff);
	// nil: off.
	Handoff Handoff
	// KubeletRootDir is the kubelet's --root-dir, handoff on or not: a pod
	// may have data there from a run with the handoff on.
	KubeletRootDir string
}

// Manager owns one worker per pod, the probe results and the crash-loop
// backoff: the kubelet's podWorkers + prober manager for bootlet's pods.
type Manager struct {
	cfg   Config
	dirs  PodDirs
	dns   *dns.Configurer
	clock clock.Clock
	// backoff is the crash-loop backoff of exited containers; startBackoff
	// holds back retries of failed start attempts (sandbox, image pull,
	// create, start). Both are the kubelet's 10 s doubling to 5 min.
	backoff      *podBackoff
	startBackoff *podBackoff
	probes       *probeResults
	handlers     *handlerRunner
	calls        *inflight
	ctx          context.Context

	mu      sync.Mutex
	workers map[types.UID]*worker
	wg      sync.WaitGroup

	runtimeMu  sync.Mutex
	runtimeErr error

	nameMu sync.Mutex
	rtName string
}

// RuntimeError is nil while the container runtime answers, else the last
// error seen by MonitorRuntime.
func (m *Manager) RuntimeError() error {
	m.runtimeMu.Lock()
	defer m.runtimeMu.Unlock()
	return m.runtimeErr
}

// MonitorRuntime probes the runtime every period until ctx ends and calls
// onChange on every transition between answering and not. Workers retry on
// their own; this is for /readyz and Events. cri-client reconnects the gRPC
// channel with backoff underneath.
func (m *Manager) MonitorRuntime(ctx context.Context, period time.Duration, onChange func(err error)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := m.cfg.Runtime.Version(pctx, "v1")
		cancel()
		if ctx.Err() != nil {
			return
		}
		m.runtimeMu.Lock()
		changed := (err == nil) != (m.runtimeErr == nil)
		m.runtimeErr = err
		m.runtimeMu.Unlock()
		if changed && onChange != nil {
			onChange(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// NewManager builds a manager. ctx is the daemon's lifetime: when it ends,
// workers stop and no new mutating CRI call starts; Shutdown waits for
// those under way.
func NewManager(ctx context.Context, cfg Config) *Manager {
	m := newManager(ctx, cfg, clock.RealClock{})
	m.prepareDataRoot()
	return m
}

func newManager(ctx context.Context, cfg Config, clk clock.Clock) *Manager {
	if cfg.ResolvConf == "" {
		cfg.ResolvConf = "/etc/resolv.conf"
	}
	var nodeIPs []net.IP
	for _, ip := range cfg.HostIPs {
		if p := net.ParseIP(ip); p != nil {
			nodeIPs = append(nodeIPs, p)
		}
	}
	cfg.Runtime = withLogSymlinks(cfg.Runtime, cfg.ContainerLogsDir)
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: cfg.NodeName, UID: types.UID(cfg.NodeName)}
	m := &Manager{
		cfg:          cfg,
		dirs:         PodDirs{Root: cfg.RootDir, Data: PodDataRoot(cfg.PodRootDir, cfg.RootDir, cfg.handoffRootDir())},
		dns:          dns.NewConfigurer(&record.FakeRecorder{}, nodeRef, nodeIPs, nil, "", cfg.ResolvConf),
		clock:        clk,
		backoff:      newPodBackoff(clk),
		startBackoff: newPodBackoff(clk),
		probes:       &probeResults{m: map[string]ProbeState{}},
		handlers:     newHandlerRunner(cfg.Runtime),
		calls:        newInflight(),
		ctx:          ctx,
		workers:      map[types.UID]*worker{},
	}
	return m
}

// Sync hands the manager the desired version of a pod (as stored in the API,
// with its client-facing name). It starts a worker for a new UID.
func (m *Manager) Sync(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.workers[pod.UID]
	if !ok {
		w = newWorker(m, pod)
		m.workers[pod.UID] = w
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			// run recovers the panics of its sync passes; this is the last
			// line for the rest of the worker (its loop, its cleanup).
			defer func() {
				if r := recover(); r != nil {
					_ = w.panicked("worker", r)
				}
			}()
			w.run(m.ctx)
			// A terminated pod forgot itself already (collect); this is
			// the daemon stopping.
			m.forgetPod(w, btypes.RuntimePod(pod, m.cfg.NodeName))
		}()
		return
	}
	w.setDesired(pod)
}

// Terminate asks the pod's worker to stop the pod gracefully and remove its
// runtime objects; StatusSink.PodTerminated reports the end.
func (m *Manager) Terminate(uid types.UID, gracePeriod time.Duration) bool {
	m.mu.Lock()
	w, ok := m.workers[uid]
	m.mu.Unlock()
	if ok {
		w.terminate(gracePeriod)
	}
	return ok
}

// Refresh re-runs every worker soon, e.g. after a Secret or ConfigMap changed
// so their volume files are rewritten.
func (m *Manager) Refresh() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.workers {
		w.refreshVolumes()
	}
}

// Wait blocks until every worker has returned (after ctx is cancelled).
func (m *Manager) Wait() { m.wg.Wait() }
