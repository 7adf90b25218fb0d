package runner

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	btypes "github.com/bootlet/bootlet/types"
)

// publish computes the pod's status from this sync's observation and hands
// it to the StatusSink. A sync whose observation failed publishes nothing,
// so the last good status stays.
func (w *worker) publish(key btypes.PodKey, pod *v1.Pod, obs Observed, a Actions) {
	now := w.m.clock.Now()
	backingOff := map[string]time.Duration{}
	for _, name := range a.BackingOff {
		if c := containerSpec(pod, name); c != nil {
			backingOff[name] = w.m.backoff.Get(BackoffKey(pod, c))
		}
	}
	for _, name := range a.BackingOff {
		w.event(v1.EventTypeWarning, "BackOff", "Back-off restarting failed container "+name+" in pod "+pod.Name)
	}
	ids := make([]string, 0, len(obs.ContainerStatuses))
	for _, cs := range obs.ContainerStatuses {
		ids = append(ids, cs.ID.ID)
	}
	probes := w.m.probes.snapshot(ids)

	w.mu.Lock()
	if w.startTime == nil && len(obs.SandboxStatuses) > 0 {
		// An adopted pod (the daemon restarted): the kubelet keeps startTime
		// in the apiserver; bootlet's record of it is the oldest sandbox.
		t := metav1.NewTime(time.Unix(0, obs.SandboxStatuses[len(obs.SandboxStatuses)-1].CreatedAt))
		w.startTime = &t
	}
	in := StatusInput{Pod: pod, Observed: obs, Probes: probes, BackingOff: backingOff,
		Waiting: waitingStates(pod, w.waiting, a.Deferred), Old: w.status, HostIPs: w.m.cfg.HostIPs,
		StartTime: w.startTime, Now: now}
	w.mu.Unlock()

	st := ComputeStatus(in)
	w.mu.Lock()
	w.status = &st
	w.mu.Unlock()
	w.m.cfg.Status.PodStatus(key, pod.UID, st)
}

// waitingStates is the waiting state status shows for each container whose
// last start attempt failed: the failure's reason, or, while its retry is
// held back (deferred), the kubelet's back-off form of it. It returns a copy
// and drops entries of containers no longer in the spec.
func waitingStates(pod *v1.Pod, waiting map[string]v1.ContainerStateWaiting, deferred []string) map[string]v1.ContainerStateWaiting {
	held := map[string]bool{}
	for _, name := range deferred {
		held[name] = true
	}
	out := make(map[string]v1.ContainerStateWaiting, len(waiting))
	for name, st := range waiting {
		c := containerSpec(pod, name)
		if c == nil {
			continue
		}
		if held[name] {
			st = waitingInBackoff(st, c.Image)
		}
		out[name] = st
	}
	return out
}
