package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"github.com/bootlet/bootlet/cri"
)

// startContainer is the kubelet's startContainer: image, config, create,
// start, postStart. A failed stage is shown in status with the kubelet's
// reason, backs the next attempt off (startBackoff, the kubelet's 10 s
// doubling to 5 min), and what the attempt made is removed again: the
// termination-log file of a container that was never created, a container
// that was created but would not start. It reports whether it changed
// anything on the runtime.
func (w *worker) startContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, obs Observed, env *startEnv) bool {
	key := BackoffKey(pod, c)
	fail := func(stage startStage, err error) {
		if ctx.Err() != nil {
			// The daemon is stopping: the attempt was cut short, it
			// did not fail.
			return
		}
		reason, eventReason := startFailure(stage)
		w.setWaiting(c.Name, v1.ContainerStateWaiting{Reason: reason, Message: err.Error()})
		w.m.startBackoff.next(pod.UID, key, w.m.clock.Now())
		msg := "Error: " + err.Error()
		if stage == stagePull || stage == stagePullNever {
			msg = err.Error()
		}
		w.event(v1.EventTypeWarning, eventReason, msg)
	}
	restartCount := 0
	if prev := obs.FindContainerStatusByName(c.Name); prev != nil {
		restartCount = prev.RestartCount + 1
		if prev.State == kubecontainer.ContainerStateExited && !prev.FinishedAt.IsZero() {
			w.m.backoff.next(pod.UID, key, prev.FinishedAt)
		}
	}
	img, pulled, err := cri.EnsureImage(ctx, w.m.cfg.Runtime, c.Image, c.ImagePullPolicy, env.sandbox)
	if err != nil {
		stage := stagePull
		if errors.Is(err, cri.ErrImageNeverPull) {
			stage = stagePullNever
		}
		fail(stage, err)
		return false
	}
	if pulled {
		w.event(v1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q", c.Image))
	} else {
		w.event(v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
	}
	envs, err := cri.MakeEnvironment(pod, c, w.facts(env.podIPs), w.m.cfg.Objects)
	if err != nil {
		fail(stageConfig, err)
		return false
	}
	mounts, err := ContainerMounts(w.podDirs(pod.UID), pod, c, env.volumes, envs, env.podIPs, env.hostname)
	if err != nil {
		fail(stageConfig, err)
		return false
	}
	// ContainerMounts made a fresh termination-log file; it belongs to the
	// container created below, or to nothing.
	termLog := mountSource(mounts, c.TerminationMessagePath)
	cfg, err := cri.ContainerConfig(pod, c, restartCount, cri.ContainerOptions{
		PodLogsDir: w.m.cfg.PodLogsDir, Envs: envs, Mounts: mounts, ImageRef: img.Ref,
		ImageUID: img.UID, ImageUser: img.User, MachineMemory: w.m.cfg.MachineMemory,
	})
	if err != nil {
		removeFile(termLog)
		fail(stageConfig, err)
		return false
	}
	logDir, err := cri.ContainerLogsDirectory(w.m.cfg.PodLogsDir, pod.Namespace, pod.Name, pod.UID, c.Name)
	if err == nil {
		err = os.MkdirAll(logDir, 0o755)
	}
	if err != nil {
		removeFile(termLog)
		fail(stageCreate, err)
		return false
	}
	id, err := w.m.createContainer(ctx, env.sandboxID, cfg, env.sandbox)
	if err != nil {
		removeFile(termLog)
		fail(stageCreate, err)
		return true
	}
	w.event(v1.EventTypeNormal, "Created", "Created container: "+c.Name)
	if err := w.m.startContainer(ctx, id); err != nil {
		if ctx.Err() == nil {
			if rerr := w.m.removeContainer(ctx, id); rerr != nil {
				klog.ErrorS(rerr, "Removing a container that failed to start failed; GC retries", "pod", klog.KObj(pod), "container", c.Name)
			} else {
				removeFile(termLog)
			}
		}
		fail(stageStart, err)
		return true
	}
	w.clearWaiting(c.Name)
	w.event(v1.EventTypeNormal, "Started", "Started container "+c.Name)
	if restartCount > 0 {
		containerRestarts.WithLabelValues(pod.Namespace, pod.Name, c.Name).Inc()
	}
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		podIP := ""
		if len(env.podIPs) > 0 {
			podIP = env.podIPs[0]
		}
		if err := w.m.handlers.runLifecycle(ctx, c.Lifecycle.PostStart, c, id, podIP, defaultGrace(pod)); err != nil {
			w.event(v1.EventTypeWarning, "FailedPostStartHook", err.Error())
			w.killContainer(ctx, pod, id, c.Name, defaultGrace(pod))
		}
	}
	return true
}

// mountSource is the host path mounted at containerPath, or "".
func mountSource(mounts []*runtimeapi.Mount, containerPath string) string {
	if containerPath == "" {
		return ""
	}
	for _, m := range mounts {
		if m.ContainerPath == containerPath {
			return m.HostPath
		}
	}
	return ""
}

func removeFile(path string) {
	if path == "" {
		return
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		klog.ErrorS(err, "Removing a file of a failed container start failed", "path", path)
	}
}

func (w *worker) setWaiting(name string, st v1.ContainerStateWaiting) {
	w.mu.Lock()
	w.waiting[name] = st
	w.mu.Unlock()
}

func (w *worker) clearWaiting(name string) {
	w.mu.Lock()
	delete(w.waiting, name)
	w.mu.Unlock()
}

// killContainer is the kubelet's killContainer: preStop within the grace
// period, then StopContainer with what is left (at least 2 s).
func (w *worker) killContainer(ctx context.Context, pod *v1.Pod, id, name string, grace time.Duration) {
	start := time.Now()
	if c := containerSpec(pod, name); c != nil && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && grace > 0 {
		hctx, cancel := context.WithTimeout(ctx, grace)
		if err := w.m.handlers.runLifecycle(hctx, c.Lifecycle.PreStop, c, id, "", grace); err != nil {
			w.event(v1.EventTypeWarning, "FailedPreStopHook", err.Error())
		}
		cancel()
	}
	if err := w.m.stopContainer(ctx, id, stopTimeoutSeconds(grace, time.Since(start))); err != nil {
		klog.ErrorS(err, "StopContainer failed", "pod", klog.KObj(pod), "container", name)
	}
}

// stopTimeoutSeconds is what is left of the grace period after the preStop
// hook took elapsed, at least the kubelet's minimumGracePeriod.
func stopTimeoutSeconds(grace, elapsed time.Duration) int64 {
	remaining := max(grace-elapsed, minimumGracePeriod)
	return int64(remaining.Round(time.Second) / time.Second)
}

func defaultGrace(pod *v1.Pod) time.Duration {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

func containerSpec(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
