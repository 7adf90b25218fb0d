package runner

import (
	"context"
	"net/url"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The gate also resolves streaming URLs (exec, attach, port-forward) once the
// runtime is connected; podapi/stream.go proxies the client to them.

func errNotConnected() error {
	return apierrors.NewServiceUnavailable("the container runtime is not connected yet")
}

// GetExec implements podapi.StreamRuntime.
func (g *RuntimeGate) GetExec(ctx context.Context, pod *v1.Pod, container string, cmd []string, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	mgr := g.manager()
	if mgr == nil {
		return nil, errNotConnected()
	}
	return mgr.GetExec(ctx, pod, container, cmd, stdin, stdout, stderr, tty)
}

// GetAttach implements podapi.StreamRuntime.
func (g *RuntimeGate) GetAttach(ctx context.Context, pod *v1.Pod, container string, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	mgr := g.manager()
	if mgr == nil {
		return nil, errNotConnected()
	}
	return mgr.GetAttach(ctx, pod, container, stdin, stdout, stderr, tty)
}

// GetPortForward implements podapi.StreamRuntime.
func (g *RuntimeGate) GetPortForward(ctx context.Context, pod *v1.Pod, ports []int32) (*url.URL, error) {
	mgr := g.manager()
	if mgr == nil {
		return nil, errNotConnected()
	}
	return mgr.GetPortForward(ctx, pod, ports)
}
