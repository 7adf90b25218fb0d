package runner

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	btypes "github.com/bootlet/bootlet/types"
)

// Handoff is the handoff to the kubelet as a worker sees it (package
// handoff implements it; the runner never imports it). A worker calls Step
// with plain values at every sync, after the observation, and applies what
// it returns: hands off means no mutating CRI call for the pod.
type Handoff interface {
	// Step keeps the pod's static copy in place (or withdraws it), moves
	// its owner forward, and reports whether the worker keeps its hands
	// off the pod. pod is the API form; volumeDirs maps each Secret,
	// ConfigMap and projected volume to the directory the runner
	// materialises it in (the static copy mounts it).
	Step(pod *v1.Pod, terminating, sandboxReady bool, volumeDirs map[string]string) (handsOff bool)
	// Owner is the pod's owner as the handoff last decided it (false: it
	// has not decided yet).
	Owner(uid types.UID) (btypes.Owner, bool)
	// Hold holds the kubelet's start back (its start gate) for one sync,
	// until release: the worker takes it before Step and releases it once
	// its CRI calls are done, so a kubelet starts either before the sync
	// (which then sees it starting and keeps its hands off) or after the
	// sync's containers run. A shared file lock, not a mutex: no other
	// sync waits on it, only the kubelet's unit.
	Hold() (release func())
}

// holdKubeletStart is Handoff.Hold, or nothing without a handoff. The
// release may be called more than once: a sync lets go as soon as it
// knows it starts nothing, and its deferred call is then a no-op.
func (w *worker) holdKubeletStart() (release func()) {
	h := w.m.cfg.Handoff
	if h == nil {
		return func() {}
	}
	var once sync.Once
	r := h.Hold()
	return func() { once.Do(r) }
}

// handoffRootDir is the kubelet's root dir when the handoff is on, else "".
func (c *Config) handoffRootDir() string {
	if c.Handoff == nil {
		return ""
	}
	return c.KubeletRootDir
}

// handoffStep runs the handoff's step for the worker's pod and reports
// whether the worker keeps its hands off it.
func (w *worker) handoffStep(d desired, obs Observed) bool {
	h := w.m.cfg.Handoff
	if h == nil {
		return false
	}
	sandboxReady := false
	for _, sb := range obs.SandboxStatuses {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			sandboxReady = true
		}
	}
	apiPod := w.apiPod()
	return h.Step(apiPod, d.terminating, sandboxReady, MaterialisedVolumeDirs(w.m.dirs, apiPod))
}

// MaterialisedVolumeDirs is where the runner materialises each Secret,
// ConfigMap and projected volume of pod: the static copy mounts these
// directories in place of the volumes (a volume whose directory cannot be
// named is left out, and the static copy is not written).
func MaterialisedVolumeDirs(dirs PodDirs, pod *v1.Pod) map[string]string {
	out := map[string]string{}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var plugin string
		switch {
		case vol.Secret != nil:
			plugin = pluginSecret
		case vol.ConfigMap != nil:
			plugin = pluginConfigMap
		case vol.Projected != nil:
			plugin = pluginProjected
		default:
			continue
		}
		if dir, err := dirs.Volume(string(pod.UID), plugin, vol.Name); err == nil {
			out[vol.Name] = dir
		}
	}
	return out
}

// apiPod is the pod as the API holds it (client-facing name).
func (w *worker) apiPod() *v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod
}

// syncHandedOff is a sync of a pod the kubelet is in charge of: bootlet
// makes no mutating CRI call. It keeps the volume files it materialised
// fresh (the static copy mounts them), keeps its probes for its own status
// view, and reports status from what runs. A deleted pod is finished once
// the kubelet stopped everything of it; the kubelet removes the runtime
// objects (its GC), bootlet only its own pod directories (removePodDirs
// leaves the kubelet's to the kubelet).
func (w *worker) syncHandedOff(ctx context.Context, d desired, obs Observed) (acted, done bool, err error) {
	pod := d.pod
	if d.terminating && !anythingRuns(obs) {
		if err := w.removePodDirs(pod); err != nil {
			klog.ErrorS(err, "Removing the pod directory failed", "pod", klog.KObj(pod))
		}
		w.collect(pod)
		w.m.cfg.Status.PodTerminated(d.key, pod.UID)
		return true, true, nil
	}
	// The static copy mounts bootlet's materialised Secret, ConfigMap and
	// projected directories as hostPath volumes (StaticPod), so they must
	// exist before the kubelet starts the pod, also when bootlet never ran
	// it: a pod created while a kubelet is up (a checkpoint activated after
	// a reboot) is handed off at once, and the kubelet would wait forever
	// for a hostPath Directory that is not there.
	w.materialiseVolumes(withoutDataVolumes(pod), obs)
	// A container of bootlet's that the kubelet saw CREATED (its first sync
	// fell inside bootlet's StartContainer) is not adopted but duplicated:
	// undo that (shadow.go), then look again.
	if !d.terminating && w.repairShadowed(ctx, pod, obs) {
		acted = true
		if obs, err = w.observe(ctx, pod); err != nil {
			return acted, false, err
		}
	}
	w.ensureProbes(ctx, pod, obs)
	w.publish(d.key, pod, obs, Actions{})
	return acted, false, nil
}

// WorkerPods is the API form of every pod a worker runs, and which of them
// are being deleted (for the handoff's poll loop).
func (m *Manager) WorkerPods() (pods map[types.UID]*v1.Pod, terminating map[types.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pods = make(map[types.UID]*v1.Pod, len(m.workers))
	terminating = map[types.UID]bool{}
	for uid, w := range m.workers {
		w.mu.Lock()
		pods[uid] = w.pod
		if w.terminating {
			terminating[uid] = true
		}
		w.mu.Unlock()
	}
	return pods, terminating
}

// KickAll makes every worker sync at once (the kubelet came or went).
func (m *Manager) KickAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.workers {
		w.kickNow()
	}
}

// ownerOf is a pod's owner as the handoff last decided it, else as its API
// object records it.
func (m *Manager) ownerOf(uid types.UID, apiPod *v1.Pod) btypes.Owner {
	if h := m.cfg.Handoff; h != nil {
		if o, ok := h.Owner(uid); ok {
			return o
		}
	}
	return btypes.OwnerOf(apiPod)
}
