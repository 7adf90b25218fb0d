package node

import (
	"context"
	"fmt"
	"net"
	"time"

	criutil "k8s.io/cri-client/pkg/util"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/internal/retry"
	"github.com/bootlet/bootlet/runner"
)

// connectRuntime connects to the CRI endpoint, retrying with backoff (up to
// 5 s apart) until it answers or ctx ends. cri-client validates the
// connection with a Version call and gives up at once when the socket is
// missing, so bootlet must not exit when containerd starts after it or is
// down. A failed validation leaks the dialled connection, so the socket is
// probed first with a plain connect. onChange sees the first failure and the
// recovery after one.
func connectRuntime(ctx context.Context, endpoint string, gate *runner.RuntimeGate, onChange func(error)) (*cri.Runtime, error) {
	addr, dialer, err := criutil.GetAddressAndDialer(endpoint)
	if err != nil {
		return nil, fmt.Errorf("--runtime-endpoint %s: %w", endpoint, err)
	}
	var rt *cri.Runtime
	failed := false
	ok := retry.Doubling(ctx, 100*time.Millisecond, 5*time.Second, func() error {
		var err error
		rt, err = dialRuntime(ctx, endpoint, addr, dialer)
		return err
	}, func(err error, next time.Duration) {
		gate.SetConnectError(err)
		if !failed {
			failed = true
			onChange(err)
		}
		klog.ErrorS(err, "Container runtime not ready; retrying", "in", next)
	})
	if !ok {
		return nil, ctx.Err()
	}
	if failed {
		onChange(nil)
	}
	return rt, nil
}

func dialRuntime(ctx context.Context, endpoint, addr string, dialer func(context.Context, string) (net.Conn, error)) (*cri.Runtime, error) {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	conn, err := dialer(dctx, addr)
	cancel()
	if err != nil {
		return nil, err
	}
	_ = conn.Close()
	rt, err := cri.Connect(ctx, endpoint, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	v, err := rt.Version(ctx, "v1")
	if err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	klog.InfoS("Connected to the container runtime", "name", v.RuntimeName, "version", v.RuntimeVersion)
	return rt, nil
}
