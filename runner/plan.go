package runner

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	runtimeutil "k8s.io/kubernetes/pkg/kubelet/kuberuntime/util"

	"github.com/bootlet/bootlet/cri"
)

// Observed is what the runtime says about one pod: the kubelet's
// kubecontainer.PodStatus (sandboxes and containers newest first) plus the
// sandbox each container belongs to, which init-container ordering needs.
type Observed struct {
	*kubecontainer.PodStatus
	// SandboxOf maps a container ID to its sandbox ID.
	SandboxOf map[string]string
	// TerminationLogOf maps a container ID to the host file mounted at its
	// terminationMessagePath, which goes when the container goes.
	TerminationLogOf map[string]string
}

// ProbeState is the prober's verdict for one running container.
type ProbeState struct {
	LivenessFailed bool
	StartupFailed  bool
	Ready          bool
	Started        bool
}

// BackoffQuery answers whether a container that finished at finishedAt may be
// started again now (the kubelet's doBackOff, read-only). Keys are BackoffKey.
type BackoffQuery interface {
	IsInBackOffSince(key string, finishedAt time.Time) bool
}

// StartBackoffQuery answers whether the last failed start attempt of key
// (a failed RunPodSandbox, image pull, CreateContainer or StartContainer)
// holds the next one back at now (flowcontrol.Backoff.IsInBackOffSinceUpdate).
// Keys are BackoffKey and SandboxBackoffKey.
type StartBackoffQuery interface {
	IsInBackOffSinceUpdate(key string, now time.Time) bool
}

// PlanInput is everything Plan looks at.
type PlanInput struct {
	// Pod is the runtime pod (NAME-NODENAME), defaulted.
	Pod      *v1.Pod
	Observed Observed
	// Terminating is set once deletion was requested.
	Terminating bool
	// Probes is keyed by container ID.
	Probes  map[string]ProbeState
	Backoff BackoffQuery
	// StartBackoff holds back retries of failed start attempts.
	StartBackoff StartBackoffQuery
	Now          time.Time
}

// Actions is the kubelet's podActions, reduced to what bootlet does.
type Actions struct {
	// KillPod stops every container and the sandbox(es) of the pod.
	KillPod bool
	// CreateSandbox (after KillPod, if both) runs a new sandbox with Attempt.
	CreateSandbox bool
	Attempt       uint32
	// SandboxID is the sandbox new containers go into (when not creating).
	SandboxID string
	// NextInit is the init container index to start, or -1.
	NextInit int
	// Start lists indices into spec.containers to start.
	Start []int
	// Kill lists running containers to stop, with the kubelet's reason.
	Kill []KillAction
	// BackingOff lists containers (by name) that want a restart but are in
	// crash-loop backoff; status shows CrashLoopBackOff for them.
	BackingOff []string
	// Deferred lists containers (by name) whose last start attempt failed
	// and whose retry is held back by StartBackoff.
	Deferred []string
	// SandboxDeferred is set when a new sandbox is needed but the last
	// RunPodSandbox failed too recently.
	SandboxDeferred bool
	// Finished is set when the pod has run to completion and must not be
	// restarted (restartPolicy Never/OnFailure).
	Finished bool
}

// KillAction names a container to stop and why.
type KillAction struct {
	ID      kubecontainer.ContainerID
	Name    string
	Message string
}

// BackoffKey is the kubelet's getStableKey: the backoff of a container is
// forgotten when its spec hash changes.
func BackoffKey(pod *v1.Pod, c *v1.Container) string {
	return pod.Name + "_" + pod.Namespace + "_" + string(pod.UID) + "_" + c.Name + "_" + cri.ContainerHash(c)
}

// Plan is the kubelet's computePodActions for pods without sidecars or
// in-place resize: given what should run and what runs, say what to do.
func Plan(in PlanInput) Actions {
	pod, st := in.Pod, in.Observed.PodStatus
	a := Actions{NextInit: -1}
	if in.Terminating {
		a.KillPod = true
		return a
	}

	create, attempt, sandboxID := runtimeutil.PodSandboxChanged(pod, st)
	a.Attempt, a.SandboxID = attempt, sandboxID
	if create {
		if pod.Spec.RestartPolicy == v1.RestartPolicyNever && attempt != 0 && len(st.ContainerStatuses) != 0 {
			// The pod ran once and must not run again: only clean up.
			a.KillPod, a.Finished = true, true
			return a
		}
		a.KillPod, a.CreateSandbox = true, true
		if pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure && allSucceeded(pod, st) {
			a.CreateSandbox, a.Finished = false, true
			return a
		}
		if in.StartBackoff != nil && in.StartBackoff.IsInBackOffSinceUpdate(SandboxBackoffKey(pod), in.Now) {
			// Clean up what is there, but wait before the next attempt.
			a.CreateSandbox, a.SandboxDeferred = false, true
			return a
		}
		if len(pod.Spec.InitContainers) > 0 {
			a.NextInit = 0
			return a
		}
		for i := range pod.Spec.Containers {
			if kubecontainer.ShouldContainerBeRestarted(klog.Background(), &pod.Spec.Containers[i], pod, st) {
				a.Start = append(a.Start, i)
			}
		}
		a.Start = in.filterBackoff(&a, a.Start, pod.Spec.Containers)
		return a
	}

	next, done, failed := initProgress(pod, in.Observed, sandboxID)
	if failed {
		a.KillPod, a.Finished = true, true
		return a
	}
	if !done {
		if next >= 0 {
			if idx := in.filterBackoff(&a, []int{next}, pod.Spec.InitContainers); len(idx) == 1 {
				a.NextInit = next
			}
		}
		return a
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := st.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != kubecontainer.ContainerStateRunning {
			if kubecontainer.ShouldContainerBeRestarted(klog.Background(), c, pod, st) {
				a.Start = append(a.Start, i)
			}
			continue
		}
		var msg string
		probe := in.Probes[cs.ID.ID]
		switch {
		case cs.Hash != 0 && cs.Hash != kubecontainer.HashContainer(c):
			msg = "Container " + c.Name + " definition changed"
		case probe.LivenessFailed:
			msg = "Container " + c.Name + " failed liveness probe"
		case probe.StartupFailed:
			msg = "Container " + c.Name + " failed startup probe"
		default:
			keep++
			continue
		}
		a.Kill = append(a.Kill, KillAction{ID: cs.ID, Name: c.Name, Message: msg + ", will be restarted"})
		if pod.Spec.RestartPolicy != v1.RestartPolicyNever {
			a.Start = append(a.Start, i)
		}
	}
	a.Start = in.filterBackoff(&a, a.Start, pod.Spec.Containers)
	if keep == 0 && len(a.Start) == 0 && len(a.BackingOff) == 0 && len(a.Deferred) == 0 && len(a.Kill) == 0 {
		// Nothing runs and nothing will: the kubelet stops the sandbox.
		a.KillPod, a.Finished = true, true
	}
	return a
}

// filterBackoff drops from idx the containers whose last run ended too
// recently, recording them in a.BackingOff, and those whose last start
// attempt failed too recently, recording them in a.Deferred.
func (in PlanInput) filterBackoff(a *Actions, idx []int, containers []v1.Container) []int {
	var out []int
	for _, i := range idx {
		c := &containers[i]
		key := BackoffKey(in.Pod, c)
		if in.StartBackoff != nil && in.StartBackoff.IsInBackOffSinceUpdate(key, in.Now) {
			a.Deferred = append(a.Deferred, c.Name)
			continue
		}
		cs := in.Observed.FindContainerStatusByName(c.Name)
		if in.Backoff != nil && cs != nil && cs.State == kubecontainer.ContainerStateExited && !cs.FinishedAt.IsZero() &&
			in.Backoff.IsInBackOffSince(key, cs.FinishedAt) {
			a.BackingOff = append(a.BackingOff, c.Name)
			continue
		}
		out = append(out, i)
	}
	return out
}

// initProgress reads the init containers of the current sandbox: the next one
// to start (-1 to wait), whether all succeeded, and whether one failed for
// good (restartPolicy Never).
func initProgress(pod *v1.Pod, obs Observed, sandboxID string) (next int, done, failed bool) {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return -1, true, false
	}
	for i := len(inits) - 1; i >= 0; i-- {
		cs := latestInSandbox(obs, inits[i].Name, sandboxID)
		if cs == nil {
			continue
		}
		switch {
		case cs.State == kubecontainer.ContainerStateRunning:
			return -1, false, false
		case cs.State == kubecontainer.ContainerStateExited && cs.ExitCode == 0:
			if i == len(inits)-1 {
				return -1, true, false
			}
			return i + 1, false, false
		case cs.State == kubecontainer.ContainerStateExited:
			if pod.Spec.RestartPolicy == v1.RestartPolicyNever {
				return -1, false, true
			}
			return i, false, false
		default:
			return i, false, false
		}
	}
	return 0, false, false
}

func latestInSandbox(obs Observed, name, sandboxID string) *kubecontainer.Status {
	for _, cs := range obs.ContainerStatuses {
		if cs.Name == name && obs.SandboxOf[cs.ID.ID] == sandboxID {
			return cs
		}
	}
	return nil
}

func allSucceeded(pod *v1.Pod, st *kubecontainer.PodStatus) bool {
	for _, c := range pod.Spec.Containers {
		cs := st.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != kubecontainer.ContainerStateExited || cs.ExitCode != 0 {
			return false
		}
	}
	return true
}
