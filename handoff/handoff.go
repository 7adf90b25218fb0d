package handoff

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/cri"
	btypes "github.com/bootlet/bootlet/types"
)

// Handoff defaults, as the kubelet's own (healthzPort 10248, the kubeadm
// staticPodPath, --root-dir).
const (
	DefaultKubeletHealthzURL     = "http://127.0.0.1:10248/healthz"
	DefaultKubeletStaticPodPath  = "/etc/kubernetes/manifests"
	DefaultKubeletRootDir        = "/var/lib/kubelet"
	kubeletActuatedPodsStateFile = "actuated_pods_state" // kuberuntime_manager.go actuatedPodsStateFile
	handoffPollPeriod            = 500 * time.Millisecond
)

// Config configures the handoff of bootlet's pods to a kubelet on the node
// (docs/handoff.md). The handoff is off when HealthzURL, StaticPodPath or
// KubeletRootDir is empty.
type Config struct {
	// HealthzURL is the kubelet's healthz: a 200 means a kubelet runs, if
	// a process of KubeletUID answered it (kubelet.go).
	HealthzURL string
	// KubeletUID is the uid the kubelet runs as: 0, root.
	KubeletUID int
	// StaticPodPath is the kubelet's staticPodPath: bootlet keeps a static
	// copy (same UID) of every pod it runs there.
	StaticPodPath string
	// KubeletRootDir is the kubelet's --root-dir: its pod directories
	// (ROOT/pods/UID, the sign that it synced a pod) and its actuated
	// resources checkpoint live there.
	KubeletRootDir string
	// WriteActuated makes bootlet record its containers' resources in the
	// kubelet's actuated_pods_state checkpoint while no kubelet runs, so the
	// kubelet that adopts them finds them already actuated and does not
	// "resize" them (UpdateContainerResources, UpdatePodSandboxResources).
	WriteActuated bool
	// Owners records ownership changes durably (podapi.Registry.PodOwner).
	Owners OwnerSink
	// Objects resolves the ConfigMap values the static copy takes into env
	// (podapi.Registry).
	Objects cri.ObjectSource
	// Events records the pod events of the handoff (podapi.EventLog).
	Events EventSink
	// Gate is the kubelet start gate (startgate.go); nil: none.
	Gate *StartGate
}

// Enabled reports whether the handoff is on (the node's phase tells a
// node without it apart).
func (c *Config) Enabled() bool {
	return c != nil && c.HealthzURL != "" && c.StaticPodPath != "" && c.KubeletRootDir != ""
}

// OwnerSink records a pod's owner (in the API object and its checkpoint).
type OwnerSink interface {
	PodOwner(key btypes.PodKey, uid types.UID, owner btypes.Owner)
}

// EventSink receives kubelet-style events about pods.
type EventSink interface {
	Event(pod *v1.Pod, eventType, reason, message string)
}

// Runner is what the poll loop needs of the pod runner (runner.Manager).
type Runner interface {
	// WorkerPods is the API form of every pod a worker runs, and which of
	// them are being deleted.
	WorkerPods() (pods map[types.UID]*v1.Pod, terminating map[types.UID]bool)
	// KickAll makes every worker sync at once.
	KickAll()
}

// Handoff is the handoff controller: a poll loop that watches the kubelet's
// healthz (and writes the actuated checkpoint while there is none), and a
// per-pod step each worker runs at every sync (Step): it keeps the static
// copy in place, decides the owner (Decide) and tells the worker
// whether to act. No lock is held across I/O: mu guards only the maps.
type Handoff struct {
	cfg Config
	up  atomic.Bool
	// lastHolder is the pid that held the healthz's socket at the last
	// poll (the kubelet), looked at first next time.
	lastHolder atomic.Int64
	// distrust is why the last poll's 200 was not trusted ("" none), so a
	// change is logged once.
	distrust string

	mu   sync.Mutex // leaf
	pods map[types.UID]*handoffPod
	// actuated is what the actuated checkpoint last got from bootlet, per
	// pod UID, so it is written only when that changes.
	actuated map[types.UID]string
}

type handoffPod struct {
	owner       btypes.Owner
	fileInPlace bool
	writeFailed bool
	adoptedAt   time.Time
	// noStaticCopy: the pod takes Secret values into env, so it never gets
	// a static copy (SecretEnvError); the Warning event is sent once.
	noStaticCopy bool
}

// New builds the handoff controller; nil when cfg does not enable it.
func New(cfg Config) *Handoff {
	if !cfg.Enabled() {
		return nil
	}
	return &Handoff{cfg: cfg, pods: map[types.UID]*handoffPod{}, actuated: map[types.UID]string{}}
}

// KubeletUp reports whether the kubelet's healthz answered at the last poll
// (false when the handoff is off).
func (h *Handoff) KubeletUp() bool { return h != nil && h.up.Load() }

// Run polls the kubelet's healthz until ctx ends and kicks every worker of
// r when the answer changes, so each pod's step reacts at once. While no
// kubelet answers it keeps the kubelet's actuated checkpoint in step with
// bootlet's pods. It returns at once when the handoff is off. Start it once
// the stored pods are handed to their workers.
func (h *Handoff) Run(ctx context.Context, r Runner) {
	if h == nil {
		return
	}
	klog.InfoS("Handoff to the kubelet enabled", "healthz", h.cfg.HealthzURL, "staticPodPath", h.cfg.StaticPodPath, "kubeletRootDir", h.cfg.KubeletRootDir)
	t := time.NewTicker(handoffPollPeriod)
	defer t.Stop()
	for {
		up := h.kubeletHealthy(ctx)
		if ctx.Err() != nil {
			return
		}
		if h.up.Swap(up) != up {
			klog.InfoS("Kubelet healthz changed", "up", up, "url", h.cfg.HealthzURL)
			r.KickAll()
		}
		pods, terminating := r.WorkerPods()
		h.forgetGone(pods)
		if !up && h.cfg.WriteActuated {
			h.writeActuated(pods, terminating)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *Handoff) kubeletHealthy(ctx context.Context) bool {
	up, why := h.kubeletAnswers(ctx)
	// Only a 200 from another process is news worth a log line: a local
	// user pretends to be the kubelet.
	distrust := ""
	if !up && strings.HasPrefix(why, "answered 200") {
		distrust = why
	}
	if distrust != h.distrust {
		if distrust != "" {
			klog.InfoS("Kubelet healthz answered by something that is not the kubelet; not handing off", "url", h.cfg.HealthzURL, "reason", distrust)
		}
		h.distrust = distrust
	}
	return up
}

// forgetGone drops the state of pods that no worker runs any more.
func (h *Handoff) forgetGone(pods map[types.UID]*v1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for uid := range h.pods {
		if _, ok := pods[uid]; !ok {
			delete(h.pods, uid)
		}
	}
	for uid := range h.actuated {
		if _, ok := pods[uid]; !ok {
			delete(h.actuated, uid)
		}
	}
}

// Step is the handoff part of one worker sync, run after the worker's
// observation: it observes the pod's static copy and the kubelet (observe),
// decides once (Decide), and acts: keeps the copy in place or withdraws it,
// moves the owner forward, records a change (act). It reports whether the
// worker must keep its hands off the pod (runner.Handoff). What the act
// changes is looked at again at the next step.
func (h *Handoff) Step(apiPod *v1.Pod, terminating, sandboxReady bool, volumeDirs map[string]string) bool {
	h.mu.Lock()
	st := h.pods[apiPod.UID]
	if st == nil {
		st = &handoffPod{owner: btypes.OwnerOf(apiPod)}
		h.pods[apiPod.UID] = st
	}
	f := Facts{Owner: st.owner, KubeletUp: h.up.Load(), FileInPlace: st.fileInPlace, WriteFailed: st.writeFailed,
		Terminating: terminating, SandboxReady: sandboxReady}
	h.mu.Unlock()
	if !f.KubeletUp {
		f.KubeletStarting = h.cfg.Gate.Starting()
	}

	rendered := h.observe(apiPod, volumeDirs, &f)
	dec := Decide(f)
	h.act(apiPod, st, f, dec, rendered)
	return dec.HandsOff
}

// Hold is the start gate's shared lock for one sync (runner.Handoff): the
// worker takes it before Step and releases it once its CRI calls are done.
func (h *Handoff) Hold() (release func()) {
	if h == nil {
		return func() {}
	}
	return h.cfg.Gate.Hold()
}

// Owner is the pod's owner as the last Step decided it (false: no Step
// yet).
func (h *Handoff) Owner(uid types.UID) (btypes.Owner, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.pods[uid]; st != nil {
		return st.owner, true
	}
	return "", false
}

func (h *Handoff) event(pod *v1.Pod, eventType, reason, message string) {
	if h.cfg.Events != nil {
		h.cfg.Events.Event(pod, eventType, reason, message)
	}
}
