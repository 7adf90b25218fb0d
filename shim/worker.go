package shim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/kuberuntime"

	"github.com/bootlet/bootlet/cri"
)

// worker drives one pod (one UID) toward its desired state: observe through
// CRI, Plan, execute, publish status. Like the kubelet's pod worker, it is
// the only goroutine that mutates this pod's runtime objects.
type worker struct {
	m    *Manager
	kick chan struct{}

	mu          sync.Mutex
	pod         *v1.Pod // API form (client-facing name)
	terminating bool
	grace       time.Duration
	volumesDone bool
	status      *v1.PodStatus
	startTime   *metav1.Time
	waiting     map[string]v1.ContainerStateWaiting
	probing     map[string]context.CancelFunc // container ID → probe loop
	runtimeName string
	// removeFailures counts failed removals while terminating.
	removeFailures int
}

func newWorker(m *Manager, pod *v1.Pod) *worker {
	return &worker{
		m:       m,
		kick:    make(chan struct{}, 1),
		pod:     pod,
		waiting: map[string]v1.ContainerStateWaiting{},
		probing: map[string]context.CancelFunc{},
	}
}

func (w *worker) kickNow() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *worker) setDesired(pod *v1.Pod) {
	w.mu.Lock()
	w.pod = pod
	w.mu.Unlock()
	w.kickNow()
}

func (w *worker) refreshVolumes() {
	w.mu.Lock()
	w.volumesDone = false
	w.mu.Unlock()
	w.kickNow()
}

func (w *worker) terminate(grace time.Duration) {
	w.mu.Lock()
	if !w.terminating || grace < w.grace {
		w.grace = grace
	}
	w.terminating = true
	w.mu.Unlock()
	w.kickNow()
}

func (w *worker) runtimePod() *v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return RuntimePod(w.pod, w.m.cfg.NodeName)
}

func (w *worker) event(eventType, reason, message string) {
	if w.m.cfg.Events == nil {
		return
	}
	w.mu.Lock()
	pod := w.pod
	w.mu.Unlock()
	w.m.cfg.Events.Event(pod, eventType, reason, message)
}

func (w *worker) run(ctx context.Context) {
	defer func() {
		w.mu.Lock()
		for _, cancel := range w.probing {
			cancel()
		}
		w.mu.Unlock()
	}()
	for {
		acted, done := w.sync(ctx)
		if done {
			return
		}
		wait := resyncPeriod
		if acted {
			wait = 0
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-w.kick:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// sync is one pass: it reports whether it changed anything (so the next
// observation follows at once) and whether the worker is finished.
func (w *worker) sync(ctx context.Context) (acted, done bool) {
	pod := w.runtimePod()
	w.mu.Lock()
	terminating, grace := w.terminating, w.grace
	w.mu.Unlock()

	obs, err := w.observe(ctx, pod)
	if err != nil {
		klog.ErrorS(err, "Observing pod failed", "pod", klog.KObj(pod))
		return false, false
	}
	if terminating {
		w.killPod(ctx, pod, obs, grace)
		if err := w.removeAll(ctx, pod); err != nil {
			if !w.removalStuck(ctx, pod) {
				klog.ErrorS(err, "Removing pod from the runtime failed; will retry", "pod", klog.KObj(pod))
				return false, false
			}
			// Like the kubelet, whose pod deletion needs nothing running
			// but not the removal (PodResourcesAreReclaimed): the deletion
			// completes; CleanupOrphans retries the removal at the next
			// start.
			klog.ErrorS(err, "Pod runtime objects cannot be removed, but nothing runs; finishing the deletion and leaving them to orphan cleanup",
				"pod", klog.KObj(pod), "attempts", removeAttempts)
		}
		if err := RemovePodDir(w.m.dirs, pod); err != nil {
			klog.ErrorS(err, "Removing the pod directory failed", "pod", klog.KObj(pod))
		}
		w.m.cfg.Status.PodTerminated(PodKey{w.pod.Namespace, w.pod.Name}, pod.UID)
		return true, true
	}

	ids := make([]string, 0, len(obs.ContainerStatuses))
	for _, cs := range obs.ContainerStatuses {
		ids = append(ids, cs.ID.ID)
	}
	in := PlanInput{Pod: pod, Observed: obs, Probes: w.m.probes.snapshot(ids), Backoff: w.m.backoff, Now: time.Now()}
	a := Plan(in)
	acted = w.execute(ctx, pod, obs, a)
	if acted {
		if obs, err = w.observe(ctx, pod); err != nil {
			return acted, false
		}
	}
	w.syncVolumes(pod, obs)
	w.ensureProbes(ctx, pod, obs)
	w.gc(ctx, obs)
	w.publish(pod, obs, a)
	return acted, false
}

// observe is the kubelet's GetPodStatus: sandboxes and containers of this
// UID, newest first.
func (w *worker) observe(ctx context.Context, pod *v1.Pod) (Observed, error) {
	rt := w.m.cfg.Runtime
	uid := string(pod.UID)
	obs := Observed{PodStatus: &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace, TimeStamp: time.Now()}, SandboxOf: map[string]string{}}
	sandboxes, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{cri.LabelPodUID: uid}})
	if err != nil {
		return obs, err
	}
	sort.Slice(sandboxes, func(i, j int) bool { return sandboxes[i].CreatedAt > sandboxes[j].CreatedAt })
	for i, sb := range sandboxes {
		resp, err := rt.PodSandboxStatus(ctx, sb.Id, false)
		if err != nil || resp.GetStatus() == nil {
			continue
		}
		st := resp.Status
		obs.SandboxStatuses = append(obs.SandboxStatuses, st)
		if i == 0 && st.State == runtimeapi.PodSandboxState_SANDBOX_READY && st.Network != nil && st.Network.Ip != "" {
			obs.IPs = append(obs.IPs, st.Network.Ip)
			for _, ip := range st.Network.AdditionalIps {
				obs.IPs = append(obs.IPs, ip.Ip)
			}
		}
	}
	containers, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelPodUID: uid}})
	if err != nil {
		return obs, err
	}
	for _, c := range containers {
		resp, err := rt.ContainerStatus(ctx, c.Id, false)
		if err != nil || resp.GetStatus() == nil {
			continue
		}
		obs.SandboxOf[c.Id] = c.PodSandboxId
		obs.ContainerStatuses = append(obs.ContainerStatuses, w.toKubeStatus(resp.Status))
	}
	sort.SliceStable(obs.ContainerStatuses, func(i, j int) bool {
		return obs.ContainerStatuses[i].CreatedAt.After(obs.ContainerStatuses[j].CreatedAt)
	})
	for _, cs := range obs.ContainerStatuses {
		if cs.State == kubecontainer.ContainerStateRunning {
			obs.ActiveContainerStatuses = append(obs.ActiveContainerStatuses, cs)
		}
	}
	return obs, nil
}

func (w *worker) toKubeStatus(s *runtimeapi.ContainerStatus) *kubecontainer.Status {
	hash, _ := strconv.ParseUint(s.Annotations[cri.AnnotationContainerHash], 16, 64)
	restarts, _ := strconv.Atoi(s.Annotations[cri.AnnotationRestartCount])
	cs := &kubecontainer.Status{
		ID:           kubecontainer.ContainerID{Type: w.runtimeType(), ID: s.Id},
		Name:         s.Labels[cri.LabelContainerName],
		CreatedAt:    time.Unix(0, s.CreatedAt),
		ExitCode:     int(s.ExitCode),
		Image:        s.GetImage().GetUserSpecifiedImage(),
		ImageID:      s.ImageId,
		ImageRef:     s.ImageRef,
		Hash:         hash,
		RestartCount: restarts,
		Reason:       s.Reason,
		Message:      s.Message,
	}
	if s.StartedAt > 0 {
		cs.StartedAt = time.Unix(0, s.StartedAt)
	}
	if s.FinishedAt > 0 {
		cs.FinishedAt = time.Unix(0, s.FinishedAt)
	}
	switch s.State {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		cs.State = kubecontainer.ContainerStateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		cs.State = kubecontainer.ContainerStateExited
		if cs.Message == "" {
			cs.Message = w.terminationMessage(s)
		}
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		cs.State = kubecontainer.ContainerStateCreated
	default:
		cs.State = kubecontainer.ContainerStateUnknown
	}
	return cs
}

// terminationMessage reads the file mounted at terminationMessagePath, as
// the kubelet's getTerminationMessage (FallbackToLogsOnError is not read).
func (w *worker) terminationMessage(s *runtimeapi.ContainerStatus) string {
	path := s.Annotations[cri.AnnotationTerminationMessagePath]
	if path == "" {
		return ""
	}
	for _, m := range s.Mounts {
		if m.ContainerPath == path {
			b, err := os.ReadFile(m.HostPath)
			if err != nil {
				return ""
			}
			if len(b) > 4096 {
				b = b[:4096]
			}
			return string(b)
		}
	}
	return ""
}

func (w *worker) runtimeType() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.runtimeName == "" {
		w.runtimeName = "containerd"
		if v, err := w.m.cfg.Runtime.Version(context.Background(), "v1"); err == nil && v.RuntimeName != "" {
			w.runtimeName = v.RuntimeName
		}
	}
	return w.runtimeName
}

// execute carries out the planner's actions in the kubelet's order.
func (w *worker) execute(ctx context.Context, pod *v1.Pod, obs Observed, a Actions) bool {
	acted := false
	w.mu.Lock()
	for name := range w.waiting {
		delete(w.waiting, name)
	}
	w.mu.Unlock()
	if a.KillPod {
		if w.killPod(ctx, pod, obs, w.defaultGrace(pod)) {
			acted = true
		}
	}
	for _, k := range a.Kill {
		// The kubelet's Killing event carries the planner's reason.
		w.event(v1.EventTypeNormal, "Killing", k.Message)
		klog.InfoS("Killing container", "pod", klog.KObj(pod), "container", k.Name, "reason", k.Message)
		w.killContainer(ctx, pod, k.ID.ID, k.Name, w.defaultGrace(pod))
		acted = true
	}
	if a.KillPod && !a.CreateSandbox {
		return acted
	}
	sandboxID := a.SandboxID
	if a.CreateSandbox {
		id, err := w.runSandbox(ctx, pod, a.Attempt)
		if err != nil {
			w.event(v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
			klog.ErrorS(err, "RunPodSandbox failed", "pod", klog.KObj(pod))
			return true
		}
		sandboxID = id
		acted = true
		w.mu.Lock()
		w.volumesDone = false
		w.mu.Unlock()
	}
	if a.NextInit < 0 && len(a.Start) == 0 {
		return acted
	}
	env, err := w.startEnv(ctx, pod, sandboxID, a.Attempt)
	if err != nil {
		klog.ErrorS(err, "Preparing containers failed", "pod", klog.KObj(pod))
		return acted
	}
	if a.NextInit >= 0 {
		if w.startContainer(ctx, pod, &pod.Spec.InitContainers[a.NextInit], obs, env) {
			acted = true
		}
		return acted
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, i := range a.Start {
		wg.Add(1)
		go func(c *v1.Container) {
			defer wg.Done()
			if w.startContainer(ctx, pod, c, obs, env) {
				mu.Lock()
				acted = true
				mu.Unlock()
			}
		}(&pod.Spec.Containers[i])
	}
	wg.Wait()
	return acted
}

func (w *worker) defaultGrace(pod *v1.Pod) time.Duration {
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// startEnv is what every container start of one sync shares.
type startEnv struct {
	sandboxID string
	sandbox   *runtimeapi.PodSandboxConfig
	podIPs    []string
	volumes   map[string]string
	hostname  string
}

func (w *worker) startEnv(ctx context.Context, pod *v1.Pod, sandboxID string, attempt uint32) (*startEnv, error) {
	sbCfg, err := w.sandboxConfig(ctx, pod, attempt)
	if err != nil {
		return nil, err
	}
	env := &startEnv{sandboxID: sandboxID, sandbox: sbCfg}
	if pod.Spec.HostNetwork {
		env.podIPs = w.m.cfg.HostIPs
	} else if resp, err := w.m.cfg.Runtime.PodSandboxStatus(ctx, sandboxID, false); err == nil && resp.GetStatus().GetNetwork() != nil {
		if ip := resp.Status.Network.Ip; ip != "" {
			env.podIPs = append(env.podIPs, ip)
		}
		for _, ip := range resp.Status.Network.AdditionalIps {
			env.podIPs = append(env.podIPs, ip.Ip)
		}
	}
	env.hostname = pod.Name
	if pod.Spec.Hostname != "" {
		env.hostname = pod.Spec.Hostname
	}
	vols, err := SetupVolumes(w.m.dirs, pod, w.m.cfg.Objects, w.facts(env.podIPs))
	if err != nil {
		w.event(v1.EventTypeWarning, "FailedMount", err.Error())
		return nil, err
	}
	env.volumes = vols
	w.mu.Lock()
	w.volumesDone = true
	w.mu.Unlock()
	return env, nil
}

// syncVolumes rewrites the Secret, ConfigMap, downwardAPI and projected
// volume contents of a pod with running containers after refreshVolumes
// asked for it (an object changed, or the daemon restarted), as the
// kubelet's volume manager remounts them on a pod sync. Container starts
// refresh them through startEnv.
func (w *worker) syncVolumes(pod *v1.Pod, obs Observed) {
	if len(obs.ActiveContainerStatuses) == 0 {
		return
	}
	w.mu.Lock()
	done := w.volumesDone
	w.volumesDone = true
	w.mu.Unlock()
	if done {
		return
	}
	podIPs := obs.IPs
	if pod.Spec.HostNetwork {
		podIPs = w.m.cfg.HostIPs
	}
	if _, err := SetupVolumes(w.m.dirs, pod, w.m.cfg.Objects, w.facts(podIPs)); err != nil {
		w.event(v1.EventTypeWarning, "FailedMount", err.Error())
		w.mu.Lock()
		w.volumesDone = false
		w.mu.Unlock()
	}
}

func (w *worker) facts(podIPs []string) cri.EnvFacts {
	return cri.EnvFacts{PodIPs: podIPs, HostIPs: w.m.cfg.HostIPs, NodeAllocatable: w.m.cfg.Allocatable}
}

func (w *worker) sandboxConfig(ctx context.Context, pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	dnsCfg, err := w.m.dns.GetPodDNS(ctx, pod)
	if err != nil {
		return nil, err
	}
	return cri.SandboxConfig(pod, attempt, cri.SandboxOptions{PodLogsDir: w.m.cfg.PodLogsDir, CgroupDriver: w.m.cfg.CgroupDriver, DNS: dnsCfg})
}

func (w *worker) runSandbox(ctx context.Context, pod *v1.Pod, attempt uint32) (string, error) {
	cfg, err := w.sandboxConfig(ctx, pod, attempt)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		return "", err
	}
	if err := os.MkdirAll(w.m.dirs.Pod(string(pod.UID)), 0o750); err != nil {
		return "", err
	}
	w.mu.Lock()
	if w.startTime == nil {
		now := metav1.Now()
		w.startTime = &now
	}
	w.mu.Unlock()
	return w.m.cfg.Runtime.RunPodSandbox(ctx, cfg, "")
}

// startContainer is the kubelet's startContainer: backoff, image, config,
// create, start, postStart.
func (w *worker) startContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, obs Observed, env *startEnv) bool {
	setWaiting := func(reason, msg string) {
		w.mu.Lock()
		w.waiting[c.Name] = v1.ContainerStateWaiting{Reason: reason, Message: msg}
		w.mu.Unlock()
	}
	restartCount := 0
	if prev := obs.FindContainerStatusByName(c.Name); prev != nil {
		restartCount = prev.RestartCount + 1
		if prev.State == kubecontainer.ContainerStateExited && !prev.FinishedAt.IsZero() {
			w.m.backoff.Next(BackoffKey(pod, c), prev.FinishedAt)
		}
	}
	img, pulled, err := cri.EnsureImage(ctx, w.m.cfg.Runtime, c.Image, c.ImagePullPolicy, env.sandbox)
	if err != nil {
		reason, eventReason := "ErrImagePull", "Failed"
		if errors.Is(err, cri.ErrImageNeverPull) {
			reason, eventReason = "ErrImageNeverPull", "ErrImageNeverPull"
		}
		setWaiting(reason, err.Error())
		w.event(v1.EventTypeWarning, eventReason, err.Error())
		return false
	}
	if pulled {
		w.event(v1.EventTypeNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q", c.Image))
	} else {
		w.event(v1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
	}
	envs, err := cri.MakeEnvironment(pod, c, w.facts(env.podIPs), w.m.cfg.Objects)
	if err != nil {
		setWaiting("CreateContainerConfigError", err.Error())
		w.event(v1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return false
	}
	mounts, err := ContainerMounts(w.m.dirs, pod, c, env.volumes, envs, env.podIPs, env.hostname)
	if err != nil {
		setWaiting("CreateContainerConfigError", err.Error())
		w.event(v1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return false
	}
	cfg, err := cri.ContainerConfig(pod, c, restartCount, cri.ContainerOptions{
		PodLogsDir: w.m.cfg.PodLogsDir, Envs: envs, Mounts: mounts, ImageRef: img.Ref,
		ImageUID: img.UID, ImageUser: img.User, MachineMemory: w.m.cfg.MachineMemory,
	})
	if err != nil {
		setWaiting("CreateContainerConfigError", err.Error())
		return false
	}
	logDir := kuberuntime.BuildContainerLogsDirectory(w.m.cfg.PodLogsDir, pod.Namespace, pod.Name, pod.UID, c.Name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		setWaiting("CreateContainerError", err.Error())
		return false
	}
	id, err := w.m.cfg.Runtime.CreateContainer(ctx, env.sandboxID, cfg, env.sandbox)
	if err != nil {
		setWaiting("CreateContainerError", err.Error())
		w.event(v1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return true
	}
	w.event(v1.EventTypeNormal, "Created", "Created container: "+c.Name)
	if err := w.m.cfg.Runtime.StartContainer(ctx, id); err != nil {
		setWaiting("RunContainerError", err.Error())
		w.event(v1.EventTypeWarning, "Failed", "Error: "+err.Error())
		return true
	}
	w.event(v1.EventTypeNormal, "Started", "Started container "+c.Name)
	if restartCount > 0 {
		containerRestarts.WithLabelValues(pod.Namespace, pod.Name, c.Name).Inc()
	}
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		podIP := ""
		if len(env.podIPs) > 0 {
			podIP = env.podIPs[0]
		}
		if err := w.m.handlers.runLifecycle(ctx, c.Lifecycle.PostStart, c, id, podIP, w.defaultGrace(pod)); err != nil {
			w.event(v1.EventTypeWarning, "FailedPostStartHook", err.Error())
			w.killContainer(ctx, pod, id, c.Name, w.defaultGrace(pod))
		}
	}
	return true
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
	remaining := grace - time.Since(start)
	if remaining < minimumGracePeriod {
		remaining = minimumGracePeriod
	}
	if err := w.m.cfg.Runtime.StopContainer(ctx, id, int64(remaining.Round(time.Second)/time.Second)); err != nil {
		klog.ErrorS(err, "StopContainer failed", "pod", klog.KObj(pod), "container", name)
	}
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

// killPod stops every running container in parallel, then every ready
// sandbox. It reports whether anything was running.
func (w *worker) killPod(ctx context.Context, pod *v1.Pod, obs Observed, grace time.Duration) bool {
	var wg sync.WaitGroup
	acted := false
	for _, cs := range obs.ContainerStatuses {
		if cs.State != kubecontainer.ContainerStateRunning {
			continue
		}
		acted = true
		wg.Add(1)
		go func(cs *kubecontainer.Status) {
			defer wg.Done()
			w.event(v1.EventTypeNormal, "Killing", "Stopping container "+cs.Name)
			w.killContainer(ctx, pod, cs.ID.ID, cs.Name, grace)
		}(cs)
	}
	wg.Wait()
	for _, sb := range obs.SandboxStatuses {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			acted = true
			if err := w.m.cfg.Runtime.StopPodSandbox(ctx, sb.Id); err != nil {
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
	for _, cs := range obs.ContainerStatuses {
		if cs.State == kubecontainer.ContainerStateRunning {
			return false
		}
	}
	for _, sb := range obs.SandboxStatuses {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			return false
		}
	}
	return true
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

// gc removes dead containers superseded by a newer dead one of the same name
// and dead sandboxes older than the newest, like the kubelet's container GC
// with MaxPerPodContainer=1 (and its pod container deletor): running
// containers are never counted, and the last dead run of each container stays
// for lastState and `logs --previous`.
func (w *worker) gc(ctx context.Context, obs Observed) {
	seenDead := map[string]bool{}
	kept := map[string]bool{}
	for _, cs := range obs.ContainerStatuses {
		// A container that was created but never started (its start was
		// cut short, e.g. by a runtime crash) has no run to keep once a
		// newer container of that name exists: remove it rather than let
		// it take the one dead slot.
		if cs.State == kubecontainer.ContainerStateCreated {
			if latest := obs.FindContainerStatusByName(cs.Name); latest != nil && latest.ID != cs.ID {
				_ = w.m.cfg.Runtime.RemoveContainer(ctx, cs.ID.ID)
				continue
			}
		}
		if cs.State == kubecontainer.ContainerStateRunning || !seenDead[cs.Name] {
			seenDead[cs.Name] = seenDead[cs.Name] || cs.State != kubecontainer.ContainerStateRunning
			kept[cs.ID.ID] = true
			continue
		}
		_ = w.m.cfg.Runtime.RemoveContainer(ctx, cs.ID.ID)
	}
	for i, sb := range obs.SandboxStatuses {
		if i == 0 || sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		inUse := false
		for _, cs := range obs.ContainerStatuses {
			// Keep a sandbox while a kept container lives in it.
			if obs.SandboxOf[cs.ID.ID] == sb.Id && kept[cs.ID.ID] {
				inUse = true
			}
		}
		if !inUse {
			_ = w.m.cfg.Runtime.RemovePodSandbox(ctx, sb.Id)
		}
	}
}

// ensureProbes runs one probe loop per running container and stops loops of
// containers that are gone.
func (w *worker) ensureProbes(ctx context.Context, pod *v1.Pod, obs Observed) {
	running := map[string]*kubecontainer.Status{}
	for _, cs := range obs.ContainerStatuses {
		if cs.State == kubecontainer.ContainerStateRunning {
			running[cs.ID.ID] = cs
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, cancel := range w.probing {
		if running[id] == nil {
			cancel()
			delete(w.probing, id)
		}
	}
	podIP := ""
	if len(obs.IPs) > 0 {
		podIP = obs.IPs[0]
	}
	for id, cs := range running {
		if _, ok := w.probing[id]; ok {
			continue
		}
		c := containerSpec(pod, cs.Name)
		if c == nil {
			continue
		}
		pctx, cancel := context.WithCancel(ctx)
		w.probing[id] = cancel
		go w.probeLoop(pctx, *c, id, podIP)
	}
}

func (w *worker) publish(pod *v1.Pod, obs Observed, a Actions) {
	backingOff := map[string]time.Duration{}
	for _, name := range a.BackingOff {
		if c := containerSpec(pod, name); c != nil {
			backingOff[name] = w.m.backoff.Get(BackoffKey(pod, c))
		}
	}
	ids := make([]string, 0, len(obs.ContainerStatuses))
	for _, cs := range obs.ContainerStatuses {
		ids = append(ids, cs.ID.ID)
	}
	for _, name := range a.BackingOff {
		w.event(v1.EventTypeWarning, "BackOff", "Back-off restarting failed container "+name+" in pod "+pod.Name)
	}
	w.mu.Lock()
	if w.startTime == nil && len(obs.SandboxStatuses) > 0 {
		// An adopted pod (the daemon restarted): the kubelet keeps startTime
		// in the apiserver; bootlet's record of it is the oldest sandbox.
		t := metav1.NewTime(time.Unix(0, obs.SandboxStatuses[len(obs.SandboxStatuses)-1].CreatedAt))
		w.startTime = &t
	}
	waiting := map[string]v1.ContainerStateWaiting{}
	for k, v := range w.waiting {
		waiting[k] = v
	}
	in := StatusInput{Pod: pod, Observed: obs, Probes: w.m.probes.snapshot(ids), BackingOff: backingOff, Waiting: waiting,
		Old: w.status, HostIPs: w.m.cfg.HostIPs, StartTime: w.startTime, Now: time.Now()}
	w.mu.Unlock()
	st := ComputeStatus(in)
	w.mu.Lock()
	w.status = &st
	key := PodKey{w.pod.Namespace, w.pod.Name}
	w.mu.Unlock()
	w.m.cfg.Status.PodStatus(key, pod.UID, st)
}
