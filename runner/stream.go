package runner

import (
	"context"
	"fmt"
	"net/url"
	"sort"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/bootlet/bootlet/cri"
)

// Streaming: exec, attach and port-forward are served by the runtime's own
// streaming server (containerd's CRI stream server, loopback only). The
// kubelet asks CRI Exec/Attach/PortForward for a one-time URL and proxies the
// client's stream to it (pkg/kubelet/server getExec and friends); these are
// the kubelet's GetExec/GetAttach/GetPortForward for bootlet's pods. The HTTP
// proxying lives in podapi/stream.go.

// GetExec returns the runtime's streaming URL for running cmd in the pod's
// running container.
func (m *Manager) GetExec(ctx context.Context, pod *v1.Pod, container string, cmd []string, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	id, err := m.runningContainer(ctx, pod, container)
	if err != nil {
		return nil, err
	}
	resp, err := m.cfg.Runtime.Exec(ctx, &runtimeapi.ExecRequest{
		ContainerId: id, Cmd: cmd, Tty: tty, Stdin: stdin, Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		return nil, runtimeStreamError(err)
	}
	return url.Parse(resp.Url)
}

// GetAttach returns the runtime's streaming URL for attaching to the pod's
// running container. As the kubelet's GetAttach, the TTY follows the
// container's spec: whether the process runs on a terminal cannot change
// after it started.
func (m *Manager) GetAttach(ctx context.Context, pod *v1.Pod, container string, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	id, err := m.runningContainer(ctx, pod, container)
	if err != nil {
		return nil, err
	}
	if c := containerSpec(pod, container); c != nil {
		tty = c.TTY
	}
	resp, err := m.cfg.Runtime.Attach(ctx, &runtimeapi.AttachRequest{
		ContainerId: id, Stdin: stdin, Stdout: stdout, Stderr: stderr, Tty: tty,
	})
	if err != nil {
		return nil, runtimeStreamError(err)
	}
	return url.Parse(resp.Url)
}

// GetPortForward returns the runtime's streaming URL for forwarding ports
// into the pod's network namespace (the host's for a hostNetwork pod).
func (m *Manager) GetPortForward(ctx context.Context, pod *v1.Pod, ports []int32) (*url.URL, error) {
	sandboxes, err := m.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{cri.LabelPodUID: string(pod.UID)},
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	})
	if err != nil {
		return nil, runtimeStreamError(err)
	}
	if len(sandboxes) == 0 {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s/%s has no running sandbox", pod.Namespace, pod.Name))
	}
	sort.Slice(sandboxes, func(i, j int) bool { return sandboxes[i].CreatedAt > sandboxes[j].CreatedAt })
	resp, err := m.cfg.Runtime.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sandboxes[0].Id, Port: ports})
	if err != nil {
		return nil, runtimeStreamError(err)
	}
	return url.Parse(resp.Url)
}

// runningContainer finds the newest running container of that name, as the
// kubelet's findContainer does over its running pods.
func (m *Manager) runningContainer(ctx context.Context, pod *v1.Pod, name string) (string, error) {
	list, err := m.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{cri.LabelPodUID: string(pod.UID), cri.LabelContainerName: name},
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		return "", runtimeStreamError(err)
	}
	if len(list) == 0 {
		return "", apierrors.NewBadRequest(fmt.Sprintf("container %s in pod %s/%s is not running", name, pod.Namespace, pod.Name))
	}
	sort.Slice(list, func(i, j int) bool { return list[i].CreatedAt > list[j].CreatedAt })
	return list[0].Id, nil
}

func runtimeStreamError(err error) error {
	return apierrors.NewServiceUnavailable("container runtime: " + err.Error())
}
