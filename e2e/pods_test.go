//go:build e2e

package e2e

import (
	"context"
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
	metrics, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`bootlet_pods{phase="Running"} 1`, `bootlet_cri_request_duration_seconds_count{method="RunPodSandbox"} 1`,
		`bootlet_cri_request_duration_seconds_count{method="StartContainer"} 1`, `bootlet_api_request_duration_seconds`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
