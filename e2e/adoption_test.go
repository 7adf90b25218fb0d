//go:build e2e

package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestAdoptionAfterKill9: pods keep running while the daemon is SIGKILLed;
// the restarted daemon adopts exactly the sandboxes and containers that run
// (same IDs, attempt 0, restartCount 0, nothing created, stopped or
// removed) and reports them Running and Ready again.
func TestAdoptionAfterKill9(t *testing.T) {
	t.Parallel()
	c, b := startBootlet(t)
	b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: hostnet}
spec:
  hostNetwork: true
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "echo hostnet up; exec sleep infinity"]
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: server
    image: `+testserver+`
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
    livenessProbe:
      tcpSocket: {port: 8081}
      periodSeconds: 1
---
apiVersion: v1
kind: Pod
metadata: {name: multi}
spec:
  initContainers:
  - name: init
    image: `+busybox+`
    command: ["sh", "-c", "echo init done"]
  containers:
  - name: first
    image: `+busybox+`
    command: ["sh", "-c", "echo first up; exec sleep infinity"]
  - name: second
    image: `+busybox+`
    command: ["sh", "-c", "echo second up; exec sleep infinity"]
`)
	names := []string{"hostnet", "web", "multi"}
	uids := map[string]string{}
	startTimes := map[string]time.Time{}
	for _, n := range names {
		p := b.WaitPod(t, "default", n, 30*time.Second, "Running and Ready", func(p *v1.Pod) bool { return Running(p) && Ready(p) })
		uids[n] = string(p.UID)
		if p.Status.StartTime == nil {
			t.Fatalf("%s: no status.startTime", n)
		}
		startTimes[n] = p.Status.StartTime.Time
	}
	waitLogs(t, b, 10*time.Second, []string{"multi", "-c", "second"}, "second up")

	// snapshot describes every CRI object of the three pods.
	snapshot := func() string {
		var lines []string
		for _, n := range names {
			for _, sb := range criSandboxesOf(t, c, uids[n]) {
				lines = append(lines, fmt.Sprintf("%s sandbox %s attempt=%d %s", n, sb.Id, sb.Metadata.Attempt, sb.State))
			}
			for _, ctr := range criContainersOf(t, c, uids[n]) {
				lines = append(lines, fmt.Sprintf("%s container %s/%s attempt=%d %s sandbox=%s", n, ctr.Labels[ctrNameKey], ctr.Id, ctr.Metadata.Attempt, ctr.State, ctr.PodSandboxId))
			}
		}
		sort.Strings(lines)
		return strings.Join(lines, "\n")
	}
	// Let the pods settle (init GC, probes) before recording.
	time.Sleep(2 * time.Second)
	before := snapshot()
	t.Logf("before:\n%s", before)
	if got := strings.Count(before, " sandbox "); got != 3 {
		t.Fatalf("%d sandboxes before the kill, want 3", got)
	}
	if got := strings.Count(before, " container "); got != 5 {
		t.Fatalf("%d containers before the kill, want 5 (3 running + 1 exited init + web)", got)
	}
	totalSandboxes, totalContainers := len(c.Sandboxes(t)), len(c.Containers(t))

	b.Kill9()
	time.Sleep(3 * time.Second)
	if mid := snapshot(); mid != before {
		t.Fatalf("runtime changed while the daemon was down:\n%s", mid)
	}
	b.Start(t)
	for _, n := range names {
		b.WaitPod(t, "default", n, 20*time.Second, "Running and Ready after restart", func(p *v1.Pod) bool { return Running(p) && Ready(p) })
	}
	// Several sync rounds.
	time.Sleep(4 * time.Second)
	if after := snapshot(); after != before {
		t.Errorf("adoption changed the runtime objects:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if len(c.Sandboxes(t)) != totalSandboxes || len(c.Containers(t)) != totalContainers {
		t.Errorf("runtime has %d sandboxes / %d containers, had %d / %d", len(c.Sandboxes(t)), len(c.Containers(t)), totalSandboxes, totalContainers)
	}
	for _, n := range names {
		p := b.Pod(t, "default", n)
		if !Running(p) || !Ready(p) {
			t.Errorf("%s after adoption: %s", n, statusSummary(p))
		}
		for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if cs.RestartCount != 0 {
				t.Errorf("%s/%s: restartCount %d after adoption", n, cs.Name, cs.RestartCount)
			}
		}
		for _, ctr := range criContainersOf(t, c, uids[n]) {
			if ctr.Metadata.Attempt != 0 {
				t.Errorf("%s/%s: CRI attempt %d", n, ctr.Labels[ctrNameKey], ctr.Metadata.Attempt)
			}
			if ctr.Labels[ctrNameKey] != "init" && ctr.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
				t.Errorf("%s/%s: %s after adoption", n, ctr.Labels[ctrNameKey], ctr.State)
			}
		}
		for _, sb := range criSandboxesOf(t, c, uids[n]) {
			if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY || sb.Metadata.Attempt != 0 {
				t.Errorf("%s: sandbox %s %s attempt %d", n, sb.Id, sb.State, sb.Metadata.Attempt)
			}
		}
		if st := p.Status.StartTime; st == nil || st.Time.Sub(startTimes[n]).Abs() > 2*time.Second {
			t.Errorf("%s: status.startTime %v after adoption, was %s", n, st, startTimes[n])
		}
		// Nothing was (re)created or killed by the new daemon.
		for _, e := range podEvents(t, b, n) {
			if e.Reason == "Created" || e.Reason == "Started" || e.Reason == "Killing" || e.Reason == "BackOff" {
				t.Errorf("%s: event %s %q after adoption", n, e.Reason, e.Message)
			}
		}
	}
	// Logs of adopted containers are still served.
	waitLogs(t, b, 10*time.Second, []string{"hostnet"}, "hostnet up")
	waitLogs(t, b, 10*time.Second, []string{"multi", "-c", "first"}, "first up")
	waitLogs(t, b, 10*time.Second, []string{"multi", "-c", "init"}, "init done")
}
