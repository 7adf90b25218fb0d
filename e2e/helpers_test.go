//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Small helpers shared by the lifecycle, probe, adoption, volume and image
// tests. framework.go is owned elsewhere; keep additions here.

const (
	busybox    = "docker.io/library/busybox:1.36"
	testserver = "bootlet.dev/testserver:1"
)

// podUID returns the UID of a pod in the default namespace.
func podUID(t testing.TB, b *Bootlet, name string) string {
	t.Helper()
	return string(b.Pod(t, "default", name).UID)
}

// criStatus returns the CRI status of a container (nil if it is gone).
func criStatus(c *Containerd, id string) *runtimeapi.ContainerStatus {
	resp, err := c.RT.ContainerStatus(context.Background(), id, false)
	if err != nil {
		return nil
	}
	return resp.GetStatus()
}

// podEvents lists the events about one pod (client-facing name).
func podEvents(t testing.TB, b *Bootlet, name string) []v1.Event {
	t.Helper()
	l, err := b.Client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	return l.Items
}

// findEvent returns the first event of the pod with reason whose message
// contains substr.
func findEvent(events []v1.Event, reason, substr string) *v1.Event {
	for i := range events {
		if events[i].Reason == reason && strings.Contains(events[i].Message, substr) {
			return &events[i]
		}
	}
	return nil
}

func eventsString(events []v1.Event) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "\n  %s %s x%d: %s", e.Type, e.Reason, e.Count, e.Message)
	}
	return b.String()
}

// waitLogs waits until `bootlet logs ARGS...` succeeds and its output
// contains every one of want; it returns that output.
func waitLogs(t testing.TB, b *Bootlet, timeout time.Duration, args []string, want ...string) string {
	t.Helper()
	var out string
	Eventually(t, timeout, func() (bool, string) {
		var err error
		out, err = b.CLI(t, append([]string{"logs"}, args...)...)
		if err != nil {
			return false, fmt.Sprintf("bootlet logs %v: %v\n%s", args, err, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				return false, fmt.Sprintf("bootlet logs %v lacks %q:\n%s", args, w, out)
			}
		}
		return true, ""
	})
	return out
}

// applyFails runs `bootlet apply` on manifest and expects it to fail; it
// returns the combined output.
func applyFails(t testing.TB, b *Bootlet, manifest string) string {
	t.Helper()
	f := filepath.Join(b.Ctrd.Dir, fmt.Sprintf("bad-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := b.CLI(t, "apply", "-f", f)
	if err == nil {
		t.Fatalf("bootlet apply accepted an invalid manifest:\n%s", out)
	}
	return out
}

// containerStatus returns the named (init) container status of a pod.
func containerStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for _, l := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range l {
			if l[i].Name == name {
				return &l[i]
			}
		}
	}
	return nil
}

// condition returns the status of a pod condition ("" when absent).
func condition(p *v1.Pod, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// phaseIs is a WaitPod condition on the phase.
func phaseIs(phase v1.PodPhase) func(*v1.Pod) bool {
	return func(p *v1.Pod) bool { return p.Status.Phase == phase }
}

// startBootlet is StartContainerd + StartBootlet, with the daemon's log
// dumped when the test fails.
func startBootlet(t *testing.T) (*Containerd, *Bootlet) {
	t.Helper()
	c := StartContainerd(t)
	b := StartBootlet(t, c)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bootlet log (tail):\n%s", b.Log())
		}
	})
	return c, b
}
