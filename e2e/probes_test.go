//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestLivenessProbeRestart: an exec liveness probe that starts failing gets
// the container killed and restarted once (restartCount 1, same sandbox),
// with the kubelet's Unhealthy and Killing events.
func TestLivenessProbeRestart(t *testing.T) {
	t.Parallel()
	c, b := startBootlet(t)
	// The first run removes /tmp/alive after 3 s; the restarted one (it
	// finds /state/ran in the emptyDir) stays healthy.
	b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: liveness}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "touch /tmp/alive; if [ -f /state/ran ]; then echo second; exec sleep infinity; fi; touch /state/ran; echo first; sleep 3; rm /tmp/alive; exec sleep infinity"]
    volumeMounts: [{name: state, mountPath: /state}]
    livenessProbe:
      exec: {command: ["sh", "-c", "test -f /tmp/alive || { echo dead; exit 1; }"]}
      periodSeconds: 1
      failureThreshold: 2
  volumes:
  - name: state
    emptyDir: {}
`)
	first := b.WaitPod(t, "default", "liveness", 30*time.Second, "Running", Running)
	uid := string(first.UID)
	firstID := first.Status.ContainerStatuses[0].ContainerID
	sandboxes := criSandboxesOf(t, c, uid)

	p := b.WaitPod(t, "default", "liveness", 30*time.Second, "restarted by its liveness probe", func(p *v1.Pod) bool {
		return Running(p) && p.Status.ContainerStatuses[0].RestartCount == 1
	})
	cs := p.Status.ContainerStatuses[0]
	if cs.ContainerID == firstID {
		t.Fatalf("restartCount 1 but the same container %s", cs.ContainerID)
	}
	if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ContainerID != firstID {
		t.Errorf("lastState.terminated = %+v, want the killed first container %s", lt, firstID)
	}
	waitLogs(t, b, 10*time.Second, []string{"liveness"}, "second")
	waitLogs(t, b, 10*time.Second, []string{"liveness", "--previous"}, "first")

	events := podEvents(t, b, "liveness")
	if findEvent(events, "Unhealthy", "Liveness probe failed: dead") == nil {
		t.Errorf("no Unhealthy event \"Liveness probe failed: dead\" (the probe's output, as the kubelet reports it):%s", eventsString(events))
	}
	if findEvent(events, "Killing", "Container main failed liveness probe, will be restarted") == nil {
		t.Errorf("no Killing event \"Container main failed liveness probe, will be restarted\":%s", eventsString(events))
	}
	if out, err := b.CLI(t, "get", "events"); err != nil || !strings.Contains(out, "Unhealthy") || !strings.Contains(out, "Killing") {
		t.Errorf("`bootlet get events` does not show Unhealthy and Killing (%v):\n%s", err, out)
	}

	// The healthy second run stays; the sandbox was kept.
	time.Sleep(4 * time.Second)
	p = b.Pod(t, "default", "liveness")
	if got := p.Status.ContainerStatuses[0].RestartCount; got != 1 || !Running(p) {
		t.Errorf("after the restart: %s, want running with restartCount 1", statusSummary(p))
	}
	now := criSandboxesOf(t, c, uid)
	if len(now) != 1 || len(sandboxes) != 1 || now[0].Id != sandboxes[0].Id || now[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("a liveness restart must keep the sandbox: before %v, after %v", sandboxes, now)
	}
}

// TestReadinessHTTP: an httpGet readiness probe against testserver makes the
// pod Ready, then not Ready once /healthz returns 500, without a restart.
func TestReadinessHTTP(t *testing.T) {
	t.Parallel()
	_, b := startBootlet(t)
	b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: ready-http}
spec:
  containers:
  - name: server
    image: `+testserver+`
    command: ["sh", "-c", "(sleep 6; touch /tmp/unhealthy) & exec /testserver"]
    ports: [{name: http, containerPort: 8080}]
    readinessProbe:
      httpGet: {path: /healthz, port: http}
      periodSeconds: 1
      failureThreshold: 1
`)
	p := b.WaitPod(t, "default", "ready-http", 30*time.Second, "Ready", Ready)
	if !p.Status.ContainerStatuses[0].Ready || condition(p, v1.ContainersReady) != v1.ConditionTrue {
		t.Fatalf("pod Ready but container/ContainersReady not: %+v", p.Status)
	}
	if p.Status.PodIP == "" {
		t.Fatalf("pod-network pod has no IP")
	}
	p = b.WaitPod(t, "default", "ready-http", 20*time.Second, "not Ready", func(p *v1.Pod) bool { return !Ready(p) })
	cs := p.Status.ContainerStatuses[0]
	if cs.Ready || cs.RestartCount != 0 || cs.State.Running == nil || p.Status.Phase != v1.PodRunning {
		t.Errorf("an unready container must keep running unrestarted: %s", statusSummary(p))
	}
	events := podEvents(t, b, "ready-http")
	if findEvent(events, "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 500") == nil {
		t.Errorf("no Unhealthy readiness event with status 500:%s", eventsString(events))
	}
}

// TestReadinessTCPAndGRPC: tcpSocket and grpc readiness probes make pods
// Ready when the port answers / the health service reports SERVING, and keep
// them unready otherwise.
func TestReadinessTCPAndGRPC(t *testing.T) {
	t.Parallel()
	_, b := startBootlet(t)
	pod := func(name, cmd, probe string) string {
		return `
apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  containers:
  - name: server
    image: ` + testserver + `
    command: ["sh", "-c", "` + cmd + `"]
    readinessProbe:
      ` + probe + `
      periodSeconds: 1
      failureThreshold: 1
`
	}
	b.Apply(t, pod("tcp-ok", "exec /testserver", "tcpSocket: {port: 8081}")+"---"+
		pod("tcp-bad", "exec /testserver", "tcpSocket: {port: 9999}")+"---"+
		pod("grpc-ok", "exec /testserver", "grpc: {port: 9090}")+"---"+
		pod("grpc-bad", "touch /tmp/unhealthy; exec /testserver", "grpc: {port: 9090}"))
	for _, name := range []string{"tcp-ok", "grpc-ok"} {
		b.WaitPod(t, "default", name, 30*time.Second, "Ready", Ready)
	}
	for _, name := range []string{"tcp-bad", "grpc-bad"} {
		b.WaitPod(t, "default", name, 30*time.Second, "Running", Running)
	}
	time.Sleep(3 * time.Second)
	for _, name := range []string{"tcp-bad", "grpc-bad"} {
		if p := b.Pod(t, "default", name); Ready(p) || p.Status.ContainerStatuses[0].Ready {
			t.Errorf("%s is Ready though its probe target fails: %s", name, statusSummary(p))
		}
	}
	if ev := podEvents(t, b, "tcp-bad"); findEvent(ev, "Unhealthy", "Readiness probe failed:") == nil || findEvent(ev, "Unhealthy", "9999") == nil {
		t.Errorf("tcp-bad: no Unhealthy event naming port 9999:%s", eventsString(ev))
	}
	if ev := podEvents(t, b, "grpc-bad"); findEvent(ev, "Unhealthy", "NOT_SERVING") == nil {
		t.Errorf("grpc-bad: no Unhealthy event with NOT_SERVING:%s", eventsString(ev))
	}
	for _, name := range []string{"tcp-ok", "grpc-ok"} {
		if p := b.Pod(t, "default", name); !Ready(p) {
			t.Errorf("%s lost readiness: %s", name, statusSummary(p))
		}
	}
}

// TestStartupProbeDelaysReadiness: while the startup probe has not
// succeeded, the container is running but neither started nor ready, even
// though its readiness endpoint already answers; readiness follows the
// startup probe's success.
func TestStartupProbeDelaysReadiness(t *testing.T) {
	t.Parallel()
	c, b := startBootlet(t)
	b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: startup}
spec:
  containers:
  - name: server
    image: `+testserver+`
    command: ["sh", "-c", "(sleep 5; touch /tmp/started) & exec /testserver"]
    startupProbe:
      exec: {command: ["sh", "-c", "test -f /tmp/started"]}
      periodSeconds: 1
      failureThreshold: 30
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
`)
	p := b.WaitPod(t, "default", "startup", 30*time.Second, "Running", Running)
	uid := string(p.UID)
	ctrs := criContainersOf(t, c, uid)
	if len(ctrs) != 1 {
		t.Fatalf("CRI containers: %v", ctrs)
	}
	startedAt := time.Unix(0, criStatus(c, ctrs[0].Id).StartedAt)

	// Before the startup probe can pass (~5 s), it must not be started/ready.
	for time.Since(startedAt) < 4*time.Second {
		p = b.Pod(t, "default", "startup")
		cs := p.Status.ContainerStatuses[0]
		if cs.Ready || Ready(p) || (cs.Started != nil && *cs.Started) {
			t.Fatalf("%s after start: started=%v ready=%v before the startup probe succeeded", time.Since(startedAt), *cs.Started, cs.Ready)
		}
		time.Sleep(200 * time.Millisecond)
	}
	p = b.WaitPod(t, "default", "startup", 20*time.Second, "Ready", Ready)
	readyAfter := time.Since(startedAt)
	cs := p.Status.ContainerStatuses[0]
	if cs.Started == nil || !*cs.Started || !cs.Ready || cs.RestartCount != 0 {
		t.Errorf("after startup: %+v", cs)
	}
	if readyAfter < 5*time.Second {
		t.Errorf("Ready %s after the container started, before the startup probe could pass (5s)", readyAfter)
	}
	t.Logf("ready %s after container start", readyAfter)
}
