package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/cri"
)

// Logs streams a container's log the way the kubelet's GetContainerLogs
// does, with the kubelet's own CRI log reader (k8s.io/cri-client/pkg/logs).
func (m *Manager) Logs(ctx context.Context, pod *v1.Pod, opts *v1.PodLogOptions, out io.Writer) error {
	name := opts.Container
	if name == "" {
		if len(pod.Spec.Containers) != 1 {
			names := make([]string, 0, len(pod.Spec.Containers))
			for _, c := range pod.Spec.Containers {
				names = append(names, c.Name)
			}
			return apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", pod.Name, names))
		}
		name = pod.Spec.Containers[0].Name
	}
	if containerSpec(pod, name) == nil {
		return apierrors.NewBadRequest(fmt.Sprintf("container %s is not valid for pod %s", name, pod.Name))
	}
	list, err := m.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{
		cri.LabelPodUID: string(pod.UID), cri.LabelContainerName: name,
	}})
	if err != nil {
		return apierrors.NewServiceUnavailable("container runtime unavailable: " + err.Error())
	}
	sort.Slice(list, func(i, j int) bool { return list[i].CreatedAt > list[j].CreatedAt })
	idx := 0
	if opts.Previous {
		idx = 1
	}
	if len(list) <= idx {
		what := "is waiting to start"
		if opts.Previous {
			what = "has no previous terminated container"
		}
		return apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q %s", name, pod.Name, what))
	}
	id := list[idx].Id
	resp, err := m.cfg.Runtime.ContainerStatus(ctx, id, false)
	if err != nil {
		return apierrors.NewServiceUnavailable("container runtime unavailable: " + err.Error())
	}
	return logs.ReadLogs(ctx, resp.GetStatus().GetLogPath(), id, logOptions(opts, time.Now()), m.cfg.Runtime, out, out)
}

// logOptions maps the API's PodLogOptions onto the CRI log reader's, as the
// kubelet does.
func logOptions(o *v1.PodLogOptions, now time.Time) *logs.LogOptions {
	out := &logs.LogOptions{TailLines: o.TailLines, LimitBytes: o.LimitBytes, Follow: o.Follow, Timestamp: o.Timestamps}
	if o.SinceSeconds != nil {
		out.Since = now.Add(-time.Duration(*o.SinceSeconds) * time.Second)
	}
	if o.SinceTime != nil && (out.Since.IsZero() || o.SinceTime.After(out.Since)) {
		out.Since = o.SinceTime.Time
	}
	return out
}

// Container log symlinks: the kubelet links every container's log into
// /var/log/containers as POD_NAMESPACE_CONTAINER-ID.log (kuberuntime
// legacy.go), and node log agents (fluent-bit, promtail, ...) tail that
// directory. bootlet makes the same links for its containers, so agents find
// them the same way before and after the kubelet adopts them.
//
// The links follow the container's life through the runtime itself:
// logLinkingRuntime wraps the manager's CRI client, so a link appears when a
// container starts (where the kubelet's startContainer makes it, once the
// log file exists) and goes whenever the container is removed, on every path
// (gc, pod removal, orphan cleanup), as the kubelet's removeContainerLog.

// DefaultContainerLogsDir is the kubelet's containerLogsDir.
const DefaultContainerLogsDir = "/var/log/containers"

// ext4MaxFileNameLen is the kubelet's bound on the link's file name.
const ext4MaxFileNameLen = 255

// LogSymlinkPath is the kubelet's legacyLogSymlink: podName is the runtime
// (static-pod) name, as in the sandbox metadata. It is pure.
func LogSymlinkPath(dir, podName, podNamespace, containerName, containerID string) string {
	const suffix = ".log"
	name := fmt.Sprintf("%s_%s_%s-%s", podName, podNamespace, containerName, containerID)
	if len(name) > ext4MaxFileNameLen-len(suffix) {
		name = name[:ext4MaxFileNameLen-len(suffix)]
	}
	return filepath.Join(dir, name+suffix)
}

// logLinkingRuntime is the CRI runtime service with container log links
// kept in dir.
type logLinkingRuntime struct {
	internalapi.RuntimeService
	dir string
}

// withLogSymlinks returns rt whose runtime service keeps log links in dir;
// an empty dir turns them off.
func withLogSymlinks(rt *cri.Runtime, dir string) *cri.Runtime {
	if rt == nil || dir == "" {
		return rt
	}
	wrapped := *rt
	wrapped.RuntimeService = logLinkingRuntime{RuntimeService: rt.RuntimeService, dir: dir}
	return &wrapped
}

// linkFor is the link of a listed or inspected container, from the labels
// the kubelet (and bootlet) put on it.
func (r logLinkingRuntime) linkFor(id string, labels map[string]string) (string, bool) {
	pod, ns, name := labels[cri.LabelPodName], labels[cri.LabelPodNamespace], labels[cri.LabelContainerName]
	if pod == "" || ns == "" || name == "" {
		return "", false
	}
	return LogSymlinkPath(r.dir, pod, ns, name, id), true
}

func (r logLinkingRuntime) StartContainer(ctx context.Context, id string) error {
	if err := r.RuntimeService.StartContainer(ctx, id); err != nil {
		return err
	}
	resp, err := r.RuntimeService.ContainerStatus(ctx, id, false)
	if err != nil {
		klog.ErrorS(err, "Cannot link the container log", "containerID", id)
		return nil
	}
	st := resp.GetStatus()
	link, ok := r.linkFor(id, st.GetLabels())
	if !ok || st.GetLogPath() == "" {
		return nil
	}
	// As the kubelet: no dangling link when the runtime made no log file.
	if _, err := os.Stat(st.GetLogPath()); os.IsNotExist(err) {
		return nil
	}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		klog.ErrorS(err, "Cannot create the container log link directory", "dir", r.dir)
		return nil
	}
	_ = os.Remove(link) // a link left by a crash between start and here
	if err := os.Symlink(st.GetLogPath(), link); err != nil {
		klog.ErrorS(err, "Failed to create legacy symbolic link", "path", link, "containerID", id)
	}
	return nil
}

func (r logLinkingRuntime) RemoveContainer(ctx context.Context, id string) error {
	links := r.linksOf(ctx, &runtimeapi.ContainerFilter{Id: id})
	if err := r.RuntimeService.RemoveContainer(ctx, id); err != nil {
		return err
	}
	r.unlink(links)
	return nil
}

func (r logLinkingRuntime) RemovePodSandbox(ctx context.Context, id string) error {
	// Removing a sandbox removes its containers.
	links := r.linksOf(ctx, &runtimeapi.ContainerFilter{PodSandboxId: id})
	if err := r.RuntimeService.RemovePodSandbox(ctx, id); err != nil {
		return err
	}
	r.unlink(links)
	return nil
}

func (r logLinkingRuntime) linksOf(ctx context.Context, f *runtimeapi.ContainerFilter) []string {
	list, err := r.RuntimeService.ListContainers(ctx, f)
	if err != nil {
		return nil
	}
	var links []string
	for _, c := range list {
		if link, ok := r.linkFor(c.Id, c.Labels); ok {
			links = append(links, link)
		}
	}
	return links
}

func (r logLinkingRuntime) unlink(links []string) {
	for _, l := range links {
		if err := os.Remove(l); err != nil && !os.IsNotExist(err) {
			klog.ErrorS(err, "Failed to remove legacy symbolic link", "path", l)
		}
	}
}
