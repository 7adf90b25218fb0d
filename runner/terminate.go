package runner

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"github.com/bootlet/bootlet/cri"
	btypes "github.com/bootlet/bootlet/types"
)

// terminatePod is a deleted pod's last sync: stop everything within the
// grace period, remove every runtime object and the pod directory, forget
// everything kept about the pod, and report the end. It reports whether the
// pod is gone (else the worker retries).
func (w *worker) terminatePod(ctx context.Context, key btypes.PodKey, pod *v1.Pod, obs Observed, grace time.Duration) bool {
	w.killPod(ctx, pod, obs, grace)
	if err := w.removeAll(ctx, pod); err != nil {
		if ctx.Err() != nil || !w.removalStuck(ctx, pod) {
			klog.ErrorS(err, "Removing pod from the runtime failed; will retry", "pod", klog.KObj(pod))
			return false
		}
		// Like the kubelet, whose pod deletion needs nothing running but
		// not the removal (PodResourcesAreReclaimed): the deletion
		// completes; CleanupOrphans retries the removal at the next start.
		klog.ErrorS(err, "Pod runtime objects cannot be removed, but nothing runs; finishing the deletion and leaving them to orphan cleanup",
			"pod", klog.KObj(pod), "attempts", removeAttempts)
	}
	if err := w.removePodDirs(pod); err != nil {
		klog.ErrorS(err, "Removing the pod directory failed", "pod", klog.KObj(pod))
	}
	w.collect(pod)
	w.m.cfg.Status.PodTerminated(key, pod.UID)
	return true
}

// collect drops everything the manager keeps about the pod: its probe loops
// and results, its backoff entries, its metric series and its worker entry.
// It runs before PodTerminated, so a deleted pod leaves nothing behind.
func (w *worker) collect(pod *v1.Pod) {
	w.stopProbes()
	w.m.forgetPod(w, pod)
}

// forgetPod drops the manager's per-pod state of a finished worker.
func (m *Manager) forgetPod(w *worker, pod *v1.Pod) {
	m.backoff.forget(pod.UID)
	m.startBackoff.forget(pod.UID)
	forgetPodMetrics(pod.Namespace, pod.Name)
	m.mu.Lock()
	if m.workers[pod.UID] == w {
		delete(m.workers, pod.UID)
	}
	m.mu.Unlock()
}

// killPod stops every running container in parallel, then every ready
// sandbox. It reports whether anything was running.
func (w *worker) killPod(ctx context.Context, pod *v1.Pod, obs Observed, grace time.Duration) bool {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var p any
	acted := false
	for _, cs := range obs.ContainerStatuses {
		if cs.State != kubecontainer.ContainerStateRunning {
			continue
		}
		acted = true
		goRecover(&wg, &mu, &p, func() {
			w.event(v1.EventTypeNormal, "Killing", "Stopping container "+cs.Name)
			w.killContainer(ctx, pod, cs.ID.ID, cs.Name, grace)
		})
	}
	wg.Wait()
	repanic(p)
	for _, sb := range obs.SandboxStatuses {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			acted = true
			if err := w.m.stopPodSandbox(ctx, sb.Id); err != nil {
				klog.ErrorS(err, "StopPodSandbox failed", "pod", klog.KObj(pod))
			}
		}
	}
	return acted
}

// removeAttempts is how many failed removals of a deleted pod's runtime
// objects removalStuck accepts before giving up on them.
const removeAttempts = 5

// removalStuck counts a failed removal and reports whether to give up: after
// removeAttempts failures, if nothing of the pod runs any more. containerd
// can hold a container it will neither stop nor remove, e.g. after a
// StartContainer whose caller died mid-call (containerd/containerd#11037:
// the container is EXITED but its task was left behind); retrying for ever
// would keep the pod Terminating and its name taken for ever.
func (w *worker) removalStuck(ctx context.Context, pod *v1.Pod) bool {
	w.mu.Lock()
	w.removeFailures++
	n := w.removeFailures
	w.mu.Unlock()
	if n < removeAttempts {
		return false
	}
	obs, err := w.observe(ctx, pod)
	if err != nil {
		return false
	}
	return !anythingRuns(obs)
}

// anythingRuns reports whether a container runs or a sandbox is ready.
func anythingRuns(obs Observed) bool {
	for _, cs := range obs.ContainerStatuses {
		if cs.State == kubecontainer.ContainerStateRunning {
			return true
		}
	}
	for _, sb := range obs.SandboxStatuses {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			return true
		}
	}
	return false
}

// removeAll removes every sandbox (and with it every container) of the pod.
func (w *worker) removeAll(ctx context.Context, pod *v1.Pod) error {
	sandboxes, err := w.m.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{cri.LabelPodUID: string(pod.UID)}})
	if err != nil {
		return err
	}
	for _, sb := range sandboxes {
		if err := w.m.removeSandbox(ctx, sb.Id); err != nil {
			return err
		}
	}
	return nil
}

// removeSandbox stops what still runs in a sandbox, removes its containers,
// then stops and removes it. containerd would remove the containers with the
// sandbox, but the CRI leaves that to the runtime; removing them first, as
// the kubelet's GC does, leaves nothing behind on any runtime.
func (m *Manager) removeSandbox(ctx context.Context, id string) error {
	containers, err := m.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: id})
	if err != nil {
		return err
	}
	for _, c := range containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			_ = m.stopContainer(ctx, c.Id, 0)
		}
	}
	for _, c := range containers {
		if err := m.removeContainer(ctx, c.Id); err != nil && !crierrors.IsNotFound(err) {
			return err
		}
	}
	if err := m.stopPodSandbox(ctx, id); err != nil {
		return err
	}
	return m.removePodSandbox(ctx, id)
}

// CleanupOrphans removes runtime objects that bootlet created for pods it no
// longer wants. A sandbox is bootlet's only if it carries bootlet's
// managed-by annotation; anything else on the runtime is never touched.
func (m *Manager) CleanupOrphans(ctx context.Context, desired map[types.UID]bool) error {
	sandboxes, err := m.cfg.Runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		return err
	}
	for _, sb := range sandboxes {
		if sb.Annotations[btypes.AnnotationManagedBy] != btypes.ManagedByValue || desired[types.UID(sb.Metadata.Uid)] {
			continue
		}
		klog.InfoS("Removing orphaned sandbox bootlet created", "sandbox", sb.Id, "pod", sb.Metadata.Namespace+"/"+sb.Metadata.Name)
		if err := m.removeSandbox(ctx, sb.Id); err != nil {
			klog.ErrorS(err, "Failed to remove orphaned sandbox", "sandbox", sb.Id)
		}
	}
	return nil
}
