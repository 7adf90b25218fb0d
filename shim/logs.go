package shim

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/logs"

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
