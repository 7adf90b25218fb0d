package cri

import (
	"context"
	"errors"
	"fmt"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
)

// Runtime is a connection to a CRI endpoint, through the same client the
// kubelet uses (k8s.io/cri-client), so timeouts, message sizes and error
// shapes are the kubelet's.
type Runtime struct {
	internalapi.RuntimeService
	internalapi.ImageManagerService
	Endpoint string
}

// Connect dials endpoint (unix:///path or a bare path). It does not wait for
// the runtime to answer: callers probe with Version and reconnect on error.
func Connect(ctx context.Context, endpoint string, timeout time.Duration) (*Runtime, error) {
	rs, err := remote.NewRemoteRuntimeService(ctx, endpoint, timeout, nil, false)
	if err != nil {
		return nil, fmt.Errorf("connect runtime service %s: %w", endpoint, err)
	}
	is, err := remote.NewRemoteImageService(ctx, endpoint, timeout, nil, false)
	if err != nil {
		return nil, fmt.Errorf("connect image service %s: %w", endpoint, err)
	}
	return &Runtime{RuntimeService: instrumentedRuntime{rs}, ImageManagerService: instrumentedImages{is}, Endpoint: endpoint}, nil
}

// Close closes both connections.
func (r *Runtime) Close(ctx context.Context) error {
	return errors.Join(r.RuntimeService.Close(ctx), r.ImageManagerService.Close(ctx))
}
