package runner

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestRuntimeGateBeforeOpen: before recovery opens the gate, writes are only
// stored (Sync and Refresh do nothing, Terminate reports the deletion as
// taken), logs answer 503, and readiness names why the runtime is missing.
func TestRuntimeGateBeforeOpen(t *testing.T) {
	g := &RuntimeGate{}
	if err := g.RuntimeError(); err == nil || !strings.Contains(err.Error(), "not connected") {
		t.Errorf("RuntimeError() = %v before any connect attempt", err)
	}
	connErr := errors.New("dial unix /run/containerd/containerd.sock: connect: no such file")
	g.SetConnectError(connErr)
	if err := g.RuntimeError(); !errors.Is(err, connErr) {
		t.Errorf("RuntimeError() = %v, want the connect error", err)
	}
	g.Sync(&v1.Pod{})
	g.Refresh()
	if !g.Terminate("uid-1", 0) {
		t.Error("Terminate before Start reported false: the stored deletion would complete without stopping the pod")
	}
	err := g.Logs(context.Background(), &v1.Pod{}, &v1.PodLogOptions{}, nil)
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("Logs before Open = %v, want 503", err)
	}
}
