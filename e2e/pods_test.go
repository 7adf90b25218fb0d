//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestPodsRun: a hostNetwork pod and a pod-network pod with an init
// container and a readiness probe come up, and logs are served.
func TestPodsRun(t *testing.T) {
	c := StartContainerd(t)
	b := StartBootlet(t, c)
	b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  hostNetwork: true
  containers:
  - name: main
    image: docker.io/library/busybox:1.36
    command: ["sh", "-c", "echo hello from $(POD_NAME); exec sleep infinity"]
    env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
`)
	p := b.WaitPod(t, "default", "hello", 30*time.Second, "Running", Running)
	if p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("unexpected restarts: %+v", p.Status.ContainerStatuses[0])
	}
	Eventually(t, 10*time.Second, func() (bool, string) {
		out, err := b.CLI(t, "logs", "hello")
		return err == nil && strings.Contains(out, "hello from hello-e2e-node"), out
	})
}
