package runner

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"github.com/bootlet/bootlet/cri"
)

// observe is the kubelet's GetPodStatus: the sandboxes and containers of
// this UID, newest first. An object removed between the list and its status
// read (NotFound) is skipped, as the kubelet does; any other error aborts:
// planning from a partial view would make a running sandbox or container
// invisible, and the plan would kill it or start a second one. The caller
// keeps the last good status and retries with backoff.
func (w *worker) observe(ctx context.Context, pod *v1.Pod) (Observed, error) {
	rt := w.m.cfg.Runtime
	uid := string(pod.UID)
	sandboxes, err := rt.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{cri.LabelPodUID: uid}})
	if err != nil {
		return Observed{}, fmt.Errorf("ListPodSandbox: %w", err)
	}
	sort.SliceStable(sandboxes, func(i, j int) bool { return sandboxes[i].CreatedAt > sandboxes[j].CreatedAt })
	var sbStatuses []*runtimeapi.PodSandboxStatus
	for _, sb := range sandboxes {
		resp, err := rt.PodSandboxStatus(ctx, sb.Id, false)
		if crierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return Observed{}, fmt.Errorf("PodSandboxStatus %s: %w", sb.Id, err)
		}
		if resp.GetStatus() == nil {
			return Observed{}, fmt.Errorf("PodSandboxStatus %s: the runtime returned no status", sb.Id)
		}
		sbStatuses = append(sbStatuses, resp.Status)
	}
	containers, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{cri.LabelPodUID: uid}})
	if err != nil {
		return Observed{}, fmt.Errorf("ListContainers: %w", err)
	}
	var seen []observedContainer
	for _, c := range containers {
		resp, err := rt.ContainerStatus(ctx, c.Id, false)
		if crierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return Observed{}, fmt.Errorf("ContainerStatus %s: %w", c.Id, err)
		}
		if resp.GetStatus() == nil {
			return Observed{}, fmt.Errorf("ContainerStatus %s: the runtime returned no status", c.Id)
		}
		oc := observedContainer{status: resp.Status, sandboxID: c.PodSandboxId, terminationLog: terminationLogPath(resp.Status)}
		if resp.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED && resp.Status.Message == "" {
			oc.message = readTerminationMessage(oc.terminationLog)
		}
		seen = append(seen, oc)
	}
	return buildObserved(pod, w.m.runtimeName(ctx), sbStatuses, seen, time.Now()), nil
}

// observedContainer is one container's runtime status and what observe read
// for it from disk.
type observedContainer struct {
	status         *runtimeapi.ContainerStatus
	sandboxID      string
	terminationLog string // host path, "" if none
	message        string // termination message read from terminationLog
}

// buildObserved assembles the kubelet's PodStatus from the runtime's
// answers: sandboxes newest first (the pod IPs come from the newest, if
// ready), containers newest first.
func buildObserved(pod *v1.Pod, runtimeName string, sandboxes []*runtimeapi.PodSandboxStatus, containers []observedContainer, now time.Time) Observed {
	obs := Observed{
		PodStatus:        &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace, TimeStamp: now},
		SandboxOf:        map[string]string{},
		TerminationLogOf: map[string]string{},
	}
	for i, st := range sandboxes {
		obs.SandboxStatuses = append(obs.SandboxStatuses, st)
		if i == 0 && st.State == runtimeapi.PodSandboxState_SANDBOX_READY && st.Network != nil && st.Network.Ip != "" {
			obs.IPs = append(obs.IPs, st.Network.Ip)
			for _, ip := range st.Network.AdditionalIps {
				obs.IPs = append(obs.IPs, ip.Ip)
			}
		}
	}
	for _, c := range containers {
		obs.SandboxOf[c.status.Id] = c.sandboxID
		if c.terminationLog != "" {
			obs.TerminationLogOf[c.status.Id] = c.terminationLog
		}
		obs.ContainerStatuses = append(obs.ContainerStatuses, toKubeStatus(c.status, runtimeName, c.message))
	}
	sort.SliceStable(obs.ContainerStatuses, func(i, j int) bool {
		return obs.ContainerStatuses[i].CreatedAt.After(obs.ContainerStatuses[j].CreatedAt)
	})
	for _, cs := range obs.ContainerStatuses {
		if cs.State == kubecontainer.ContainerStateRunning {
			obs.ActiveContainerStatuses = append(obs.ActiveContainerStatuses, cs)
		}
	}
	return obs
}

// toKubeStatus is the kubelet's toKubeContainerStatus for what bootlet
// reads; message is the termination message when the runtime has none.
func toKubeStatus(s *runtimeapi.ContainerStatus, runtimeName, message string) *kubecontainer.Status {
	hash, _ := strconv.ParseUint(s.Annotations[cri.AnnotationContainerHash], 16, 64)
	restarts, _ := strconv.Atoi(s.Annotations[cri.AnnotationRestartCount])
	cs := &kubecontainer.Status{
		ID:           kubecontainer.ContainerID{Type: runtimeName, ID: s.Id},
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
			cs.Message = message
		}
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		cs.State = kubecontainer.ContainerStateCreated
	default:
		cs.State = kubecontainer.ContainerStateUnknown
	}
	return cs
}

// terminationLogPath is the host file mounted at the container's
// terminationMessagePath, or "".
func terminationLogPath(s *runtimeapi.ContainerStatus) string {
	path := s.Annotations[cri.AnnotationTerminationMessagePath]
	if path == "" {
		return ""
	}
	for _, m := range s.Mounts {
		if m.ContainerPath == path {
			return m.HostPath
		}
	}
	return ""
}

// readTerminationMessage reads at most 4096 bytes of the termination-log
// file, as the kubelet's getTerminationMessage (FallbackToLogsOnError is not
// read).
func readTerminationMessage(hostPath string) string {
	if hostPath == "" {
		return ""
	}
	b, err := os.ReadFile(hostPath)
	if err != nil {
		return ""
	}
	if len(b) > 4096 {
		b = b[:4096]
	}
	return string(b)
}

// runtimeName is the runtime's name for container IDs (containerd://…),
// asked once. No lock is held across the Version call: concurrent first
// callers may both ask, and agree.
func (m *Manager) runtimeName(ctx context.Context) string {
	m.nameMu.Lock()
	name := m.rtName
	m.nameMu.Unlock()
	if name != "" {
		return name
	}
	vctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := m.cfg.Runtime.Version(vctx, "v1")
	if err != nil || v.RuntimeName == "" {
		return "containerd"
	}
	m.nameMu.Lock()
	m.rtName = v.RuntimeName
	m.nameMu.Unlock()
	return v.RuntimeName
}

// PodRunning reports whether the runtime has a READY sandbox and a running
// container with the pod UID uid, whoever made them (bootlet or the
// kubelet: they share the runtime). For CheckpointerConfig.PodRunning.
func (m *Manager) PodRunning(ctx context.Context, uid types.UID) (bool, error) {
	sel := map[string]string{cri.LabelPodUID: string(uid)}
	sbs, err := m.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel,
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil || len(sbs) == 0 {
		return false, err
	}
	ctrs, err := m.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel,
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	return err == nil && len(ctrs) > 0, err
}
