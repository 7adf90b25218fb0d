package runner

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/probe"

	btypes "github.com/bootlet/bootlet/types"
)

// Start order among the pods bootlet runs (the annotation
// btypes.AnnotationStartAfter), as systemd's After=: a pod that names other
// pods of its namespace is not started (no sandbox is created) until each of
// them that bootlet runs on this node serves. The rendered bootstrap pods use
// it so that the controller-manager and the scheduler, which can do nothing
// before the apiserver answers, do not take CPU and CRI time from etcd and
// the apiserver while those start (docs/bench.md, Bootstrap).
//
// Rules, each chosen to never wedge a pod:
//   - a named pod that bootlet does not run (no worker), that is being
//     deleted, or that names this pod in turn (a cycle of two) is not waited
//     for (After= on a unit that is not started);
//   - a named pod serves when every one of its containers is running and the
//     readiness probe handler of each container that has one succeeds once,
//     run by this gate directly: the probe's initialDelaySeconds and a
//     startupProbe's delay are not waited for, "serves" is what the
//     handler sees;
//   - the gate applies only before the pod's first sandbox on this runtime:
//     a pod that runs (a daemon restart) is never held back, and once a pod
//     is released it stays released for the worker's life.

const (
	// startAfterPoll is how often the gate looks at the pods it waits for.
	startAfterPoll = 100 * time.Millisecond
	// startAfterPass bounds one sync pass spent waiting, so the worker
	// re-observes (a deletion, the handoff) at least this often.
	startAfterPass = time.Second
	// startAfterProbeTimeout bounds one run of a readiness handler.
	startAfterProbeTimeout = time.Second
)

// StartAfter is the pod names a pod's btypes.AnnotationStartAfter lists
// (comma-separated, blanks ignored, each once), in order.
func StartAfter(pod *v1.Pod) []string {
	v := pod.Annotations[btypes.AnnotationStartAfter]
	if v == "" {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		if n == "" || seen[n] || n == pod.Name {
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	return out
}

// readinessCheck is one readiness handler to run against a running
// container of a pod the gate waits for.
type readinessCheck struct {
	container   *v1.Container
	containerID string
	handler     v1.ProbeHandler
}

// serveChecks decides, from a pod's spec and last published status, whether
// the pod may already serve and which readiness handlers must succeed for
// it to count as serving. notRunning names a container not running yet
// (then the checks are nil).
func serveChecks(pod *v1.Pod, st *v1.PodStatus) (checks []readinessCheck, notRunning string) {
	running := map[string]string{}
	if st != nil {
		for _, cs := range st.ContainerStatuses {
			if cs.State.Running != nil && cs.ContainerID != "" {
				running[cs.Name] = kubecontainer.ParseContainerID(cs.ContainerID).ID
			}
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		id, ok := running[c.Name]
		if !ok {
			return nil, c.Name
		}
		if c.ReadinessProbe != nil {
			checks = append(checks, readinessCheck{container: c, containerID: id, handler: c.ReadinessProbe.ProbeHandler})
		}
	}
	return checks, ""
}

// depState is what the gate knows of one pod it waits for.
type depState struct {
	found       bool
	terminating bool
	pod         *v1.Pod
	status      *v1.PodStatus
}

// podNamed is the state of the pod namespace/name (API form) that bootlet
// runs. Lock order: Manager.mu, then each worker.mu.
func (m *Manager) podNamed(namespace, name string) depState {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.workers {
		w.mu.Lock()
		p, st, term := w.pod, w.status, w.terminating
		w.mu.Unlock()
		if p.Namespace == namespace && p.Name == name {
			return depState{found: true, terminating: term, pod: p, status: st}
		}
	}
	return depState{}
}

// serving reports whether the pod namespace/name is served, with the reason
// it is not. A pod bootlet does not run, that is being deleted, or that
// itself starts after the asking pod (a cycle of two) counts as served (not
// waited for).
func (m *Manager) serving(ctx context.Context, namespace, name, asking string) (bool, string) {
	d := m.podNamed(namespace, name)
	if !d.found || d.terminating {
		return true, ""
	}
	for _, n := range StartAfter(d.pod) {
		if n == asking {
			return true, ""
		}
	}
	checks, notRunning := serveChecks(d.pod, d.status)
	if notRunning != "" {
		return false, fmt.Sprintf("container %s of %s/%s is not running", notRunning, namespace, name)
	}
	podIP := ""
	if d.status != nil {
		podIP = d.status.PodIP
	}
	for _, c := range checks {
		res, out, err := m.handlers.run(ctx, c.handler, c.container, c.containerID, podIP, startAfterProbeTimeout)
		if err != nil || res != probe.Success {
			why := strings.TrimSpace(out)
			if err != nil {
				why = err.Error()
			}
			return false, fmt.Sprintf("readiness of %s/%s container %s: %s", namespace, name, c.container.Name, why)
		}
	}
	return true, ""
}

// startAfter holds a pod that has never had a sandbox until the pods its
// AnnotationStartAfter names serve. It returns true once the pod may start;
// false after at most startAfterPass of waiting (or a kick, or ctx's end),
// having published the pod's Pending status and, the first time, a
// Waiting event.
func (w *worker) startAfter(ctx context.Context, d desired, obs Observed) bool {
	w.mu.Lock()
	released := w.startReleased
	w.mu.Unlock()
	if released || len(obs.SandboxStatuses) > 0 {
		return true
	}
	apiPod := w.apiPod()
	names := StartAfter(apiPod)
	deadline := time.Now().Add(startAfterPass)
	var why string
	for {
		ok := true
		for _, n := range names {
			if s, reason := w.m.serving(ctx, apiPod.Namespace, n, apiPod.Name); !s {
				ok, why = false, reason
				break
			}
		}
		if ok {
			w.mu.Lock()
			w.startReleased = true
			waited := w.startWaitSince
			w.mu.Unlock()
			if !waited.IsZero() {
				klog.InfoS("Starting a pod after the pods it starts after serve", "pod", klog.KObj(d.pod), "after", names, "waited", time.Since(waited))
			}
			return true
		}
		w.mu.Lock()
		first := w.startWaitSince.IsZero()
		if first {
			w.startWaitSince = time.Now()
		}
		w.mu.Unlock()
		if first {
			msg := fmt.Sprintf("Waiting for %s to serve before starting (%s): %s", strings.Join(names, ", "), btypes.AnnotationStartAfter, why)
			klog.InfoS("Holding a pod back until the pods it starts after serve", "pod", klog.KObj(d.pod), "after", names, "reason", why)
			w.event(v1.EventTypeNormal, "StartAfter", msg)
			w.publish(d.key, d.pod, obs, Actions{NextInit: -1})
		}
		if time.Now().After(deadline) {
			return false
		}
		t := time.NewTimer(startAfterPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-w.kick:
			t.Stop()
			return false
		case <-t.C:
		}
	}
}
