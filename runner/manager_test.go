package runner

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critesting "k8s.io/cri-api/pkg/apis/testing"

	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/runner/runnertest"
)

// managerSizes is every per-pod collection the manager keeps.
func managerSizes(m *Manager) map[string]int {
	m.mu.Lock()
	workers := len(m.workers)
	m.mu.Unlock()
	return map[string]int{
		"workers":         workers,
		"crash backoff":   m.backoff.pods(),
		"start backoff":   m.startBackoff.pods(),
		"probe results":   m.probes.size(),
		"restart series":  testutil.CollectAndCount(containerRestarts),
		"in-flight calls": m.calls.count(),
	}
}

// TestManagerForgetsDeletedPods: create and delete 200 pods (some running
// with a readiness probe and a restart, some failing their image pull, so
// every per-pod collection is used); afterwards every collection has its
// size from before.
func TestManagerForgetsDeletedPods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newTestEnv(t, ctx, nil)
	before := managerSizes(e.m)
	const n = 200
	var pods []*v1.Pod
	for i := range n {
		image := "busybox"
		if i%2 == 1 {
			image = "missing"
		}
		p := e.pod(fmt.Sprintf("p%d", i), image)
		p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
			PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
		pods = append(pods, p)
	}
	e.img.Lock()
	for range n {
		e.img.Errors["PullImage"] = append(e.img.Errors["PullImage"], runnertest.Unavailable())
	}
	e.img.Unlock()
	for _, p := range pods {
		e.m.Sync(p)
	}
	// A restart: the first pod's container exits and is started again.
	runnertest.WaitFor(t, 30*time.Second, "the first pod to run", func() bool { st, _ := e.sink.Status(pods[0].UID); return runnertest.Running(st) })
	e.rt.Lock()
	for _, c := range e.rt.Containers {
		if c.Labels[cri.LabelPodUID] == string(pods[0].UID) {
			c.State, c.FinishedAt, c.ExitCode = runtimeapi.ContainerState_CONTAINER_EXITED, time.Now().UnixNano(), 1
		}
	}
	e.rt.Unlock()
	runnertest.WaitFor(t, 30*time.Second, "a restart", func() bool { return testutil.CollectAndCount(containerRestarts) > before["restart series"] })
	runnertest.WaitFor(t, 30*time.Second, "pods to be worked on", func() bool {
		s := managerSizes(e.m)
		return s["workers"] == n && s["start backoff"] > 0 && s["probe results"] > 0 && s["crash backoff"] > 0
	})

	for _, p := range pods {
		if !e.m.Terminate(p.UID, 0) {
			t.Fatalf("no worker for %s", p.Name)
		}
	}
	runnertest.WaitFor(t, 60*time.Second, "every pod to terminate", func() bool { return e.sink.TerminatedCount() == n })
	if after := managerSizes(e.m); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("per-pod state left after deleting %d pods:\nbefore %v\nafter  %v", n, before, after)
	}
	e.rt.Lock()
	left := len(e.rt.Sandboxes) + len(e.rt.Containers)
	e.rt.Unlock()
	if left != 0 {
		t.Errorf("%d runtime objects left", left)
	}
}

// TestShutdownLetsMutatingCallsFinish: a CreateContainer under way when the
// daemon's context ends is not cancelled; Shutdown waits for it (bounded)
// and no new mutating call starts afterwards. Pods are not stopped.
func TestShutdownLetsMutatingCallsFinish(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	blocking := &blockingRuntime{method: "CreateContainer", entered: make(chan struct{}, 1), release: release, cancelled: make(chan bool, 1)}
	e := newTestEnv(t, ctx, func(f *critesting.FakeRuntimeService) cri.Runtime {
		blocking.FakeRuntimeService = f
		return cri.Runtime{RuntimeService: blocking}
	})
	pod := e.pod("web", "busybox")
	e.m.Sync(pod)
	<-blocking.entered
	cancel()
	if e.m.Shutdown(200 * time.Millisecond) {
		t.Fatal("Shutdown returned while a CreateContainer was still under way")
	}
	done := make(chan bool)
	go func() { done <- e.m.Shutdown(ShutdownWait) }()
	close(release)
	if cancelled := <-blocking.cancelled; cancelled {
		t.Error("the in-flight CreateContainer's context was cancelled by the shutdown")
	}
	if !<-done {
		t.Error("Shutdown timed out although the call finished")
	}
	calls := e.rt.GetCalls()
	for _, c := range calls {
		if c == "StartContainer" || c == "StopContainer" || c == "StopPodSandbox" || c == "RemovePodSandbox" {
			t.Errorf("%s was called after the shutdown began: %v", c, calls)
		}
	}
	if len(e.rt.Sandboxes) != 1 {
		t.Errorf("the pod's sandbox was not left running: %d sandboxes", len(e.rt.Sandboxes))
	}
}

// TestProbesAgainstFakeRuntime: an exec readiness probe runs through CRI
// ExecSync; its verdict reaches status, and a failing probe takes it back.
func TestProbesAgainstFakeRuntime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newTestEnv(t, ctx, nil)
	pod := e.pod("web", "busybox")
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}},
		PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 1}
	e.m.Sync(pod)
	ready := func(uid types.UID) bool {
		st, _ := e.sink.Status(uid)
		return len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].Ready
	}
	runnertest.WaitFor(t, 30*time.Second, "readiness", func() bool { return ready(pod.UID) })
	for range 5 {
		e.rt.InjectError("ExecSync", runnertest.Unavailable())
	}
	runnertest.WaitFor(t, 30*time.Second, "unreadiness after failed probes", func() bool { return !ready(pod.UID) })
}
