package runner

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/status"
)

// Waiting reasons the kubelet reports.
const (
	ReasonContainerCreating = "ContainerCreating"
	ReasonPodInitializing   = "PodInitializing"
	ReasonCrashLoopBackOff  = "CrashLoopBackOff"
)

// StatusInput is everything ComputeStatus looks at.
type StatusInput struct {
	Pod      *v1.Pod
	Observed Observed
	Probes   map[string]ProbeState
	// BackingOff holds container names waiting in crash-loop backoff, with
	// the current backoff duration.
	BackingOff map[string]time.Duration
	// Waiting holds a waiting reason/message per container name for errors
	// a start attempt hit (ErrImageNeverPull, CreateContainerConfigError…).
	Waiting   map[string]v1.ContainerStateWaiting
	Old       *v1.PodStatus
	HostIPs   []string
	StartTime *metav1.Time
	Now       time.Time
}

// ComputeStatus is the kubelet's generateAPIPodStatus for the pod features
// bootlet runs: container states, phase, conditions, IPs.
func ComputeStatus(in StatusInput) v1.PodStatus {
	pod := in.Pod
	old := in.Old
	if old == nil {
		old = &v1.PodStatus{}
	}
	s := v1.PodStatus{
		QOSClass:  v1qos.GetPodQOS(pod),
		StartTime: in.StartTime,
	}
	for _, ip := range in.HostIPs {
		s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
	}
	if len(in.HostIPs) > 0 {
		s.HostIP = in.HostIPs[0]
	}
	if st := in.Observed.PodStatus; st != nil {
		for _, ip := range st.IPs {
			s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
		}
		if pod.Spec.HostNetwork {
			s.PodIPs = nil
			for _, ip := range in.HostIPs {
				s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
			}
		}
		if len(s.PodIPs) > 0 {
			s.PodIP = s.PodIPs[0].IP
		}
	}

	initDone := true
	for i := range pod.Spec.InitContainers {
		cs := in.containerStatus(&pod.Spec.InitContainers[i], ReasonPodInitializing, true)
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			initDone = false
		}
		s.InitContainerStatuses = append(s.InitContainerStatuses, cs)
	}
	for i := range pod.Spec.Containers {
		reason := ReasonContainerCreating
		if !initDone {
			reason = ReasonPodInitializing
		}
		s.ContainerStatuses = append(s.ContainerStatuses, in.containerStatus(&pod.Spec.Containers[i], reason, false))
	}

	s.Phase = podPhase(pod, s.InitContainerStatuses, s.ContainerStatuses)
	var conds []v1.PodCondition
	if in.Observed.PodStatus != nil {
		conds = append(conds, status.GeneratePodReadyToStartContainersCondition(pod, old, in.Observed.PodStatus))
	}
	conds = append(conds, status.GeneratePodInitializedCondition(pod, old, append(append([]v1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...), s.Phase))
	conds = append(conds, status.GeneratePodReadyCondition(pod, old, conds, s.ContainerStatuses, s.Phase))
	conds = append(conds, status.GenerateContainersReadyCondition(pod, old, s.ContainerStatuses, s.Phase))
	conds = append(conds, v1.PodCondition{Type: v1.PodScheduled, Status: v1.ConditionTrue})
	// Keep transition times stable when a condition did not change.
	for i := range conds {
		conds[i].LastTransitionTime = metav1.NewTime(in.Now.Truncate(time.Second))
		for _, oc := range old.Conditions {
			if oc.Type == conds[i].Type && oc.Status == conds[i].Status {
				conds[i].LastTransitionTime = oc.LastTransitionTime
			}
		}
	}
	s.Conditions = conds
	return s
}

// containerStatus builds one v1.ContainerStatus from the newest runtime
// status of that name, with the one before it as lastState.
func (in StatusInput) containerStatus(c *v1.Container, pendingReason string, isInit bool) v1.ContainerStatus {
	out := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	var latest, previous *kubecontainer.Status
	if in.Observed.PodStatus != nil {
		for _, cs := range in.Observed.ContainerStatuses {
			if cs.Name != c.Name {
				continue
			}
			if latest == nil {
				latest = cs
			} else if previous == nil {
				previous = cs
				break
			}
		}
	}
	if w, ok := in.Waiting[c.Name]; ok && (latest == nil || latest.State != kubecontainer.ContainerStateRunning) {
		out.State.Waiting = &w
		if latest != nil {
			out.LastTerminationState.Terminated = terminatedState(latest)
			out.RestartCount = int32(latest.RestartCount)
		}
		return out
	}
	if latest == nil {
		out.State.Waiting = &v1.ContainerStateWaiting{Reason: pendingReason}
		started := false
		out.Started = &started
		return out
	}
	out.ContainerID = latest.ID.String()
	out.ImageID = latest.ImageRef
	if latest.Image != "" && latest.Image != c.Image {
		out.Image = latest.Image
	}
	out.RestartCount = int32(latest.RestartCount)
	if previous != nil && previous.State == kubecontainer.ContainerStateExited {
		out.LastTerminationState.Terminated = terminatedState(previous)
	}
	probe := in.Probes[latest.ID.ID]
	switch latest.State {
	case kubecontainer.ContainerStateRunning:
		out.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(latest.StartedAt)}
		started := c.StartupProbe == nil || probe.Started
		out.Started = &started
		out.Ready = started && (c.ReadinessProbe == nil || probe.Ready)
		if isInit {
			out.Ready = false
		}
	case kubecontainer.ContainerStateExited:
		if d, ok := in.BackingOff[c.Name]; ok {
			out.State.Waiting = &v1.ContainerStateWaiting{
				Reason:  ReasonCrashLoopBackOff,
				Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", d, c.Name, in.Pod.Name, in.Pod.Namespace, in.Pod.UID),
			}
			out.LastTerminationState = v1.ContainerState{Terminated: terminatedState(latest)}
		} else {
			out.State.Terminated = terminatedState(latest)
		}
		started := false
		out.Started = &started
		if isInit && latest.ExitCode == 0 {
			out.Ready = true
		}
	default:
		out.State.Waiting = &v1.ContainerStateWaiting{Reason: pendingReason}
		started := false
		out.Started = &started
	}
	return out
}

func terminatedState(cs *kubecontainer.Status) *v1.ContainerStateTerminated {
	return &v1.ContainerStateTerminated{
		ExitCode:    int32(cs.ExitCode),
		Reason:      cs.Reason,
		Message:     cs.Message,
		StartedAt:   metav1.NewTime(cs.StartedAt),
		FinishedAt:  metav1.NewTime(cs.FinishedAt),
		ContainerID: cs.ID.String(),
	}
}

// podPhase is the kubelet's getPhase for pods without sidecars.
func podPhase(pod *v1.Pod, initStatuses, statuses []v1.ContainerStatus) v1.PodPhase {
	pendingInit, failedInitNotRestartable := 0, 0
	for _, c := range pod.Spec.InitContainers {
		cs, ok := podutil.GetContainerStatus(initStatuses, c.Name)
		switch {
		case !ok, cs.State.Running != nil:
			pendingInit++
		case cs.State.Terminated != nil:
			if code := cs.State.Terminated.ExitCode; code != 0 && !podutil.ContainerShouldRestart(c, pod.Spec, code) {
				failedInitNotRestartable++
			}
		case cs.State.Waiting != nil:
			if t := cs.LastTerminationState.Terminated; t != nil {
				if t.ExitCode != 0 && !podutil.ContainerShouldRestart(c, pod.Spec, t.ExitCode) {
					failedInitNotRestartable++
				}
			} else {
				pendingInit++
			}
		default:
			pendingInit++
		}
	}
	unknown, running, waiting, stopped, stoppedNotRestartable, succeeded := 0, 0, 0, 0, 0, 0
	for _, c := range pod.Spec.Containers {
		cs, ok := podutil.GetContainerStatus(statuses, c.Name)
		if !ok {
			unknown++
			continue
		}
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			code := cs.State.Terminated.ExitCode
			if !podutil.ContainerShouldRestart(c, pod.Spec, code) {
				stoppedNotRestartable++
			}
			if code == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if t := cs.LastTerminationState.Terminated; t != nil {
				stopped++
				if !podutil.ContainerShouldRestart(c, pod.Spec, t.ExitCode) {
					stoppedNotRestartable++
				}
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}
	if failedInitNotRestartable > 0 {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0, waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if stopped != stoppedNotRestartable {
			return v1.PodRunning
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	}
	return v1.PodPending
}
