package runner

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critesting "k8s.io/cri-api/pkg/apis/testing"

	"github.com/bootlet/bootlet/runner/runnertest"
)

// runtimeIDs is the pod's sandbox and container IDs on the fake runtime.
func (e *testEnv) runtimeIDs() []string {
	e.rt.Lock()
	defer e.rt.Unlock()
	var ids []string
	for id := range e.rt.Sandboxes {
		ids = append(ids, "sandbox/"+id)
	}
	for id, c := range e.rt.Containers {
		ids = append(ids, "container/"+id+"/"+c.State.String())
	}
	sort.Strings(ids)
	return ids
}

// TestObserveFailureNeverActs: one failed runtime read (each read call in
// turn) aborts the sync: no CRI write, the pod keeps its sandbox and
// containers, and the published status stays the last good one. Skipping
// the failed read instead made the running sandbox or container invisible,
// and the plan replaced it.
func TestObserveFailureNeverActs(t *testing.T) {
	for _, method := range []string{"ListPodSandbox", "PodSandboxStatus", "ListContainers", "ContainerStatus"} {
		t.Run(method, func(t *testing.T) {
			e := newTestEnv(t, context.Background(), nil)
			pod := e.pod("web", "busybox", "busybox")
			w := newWorker(e.m, pod)
			e.syncUntil(w, "running", runnertest.Running)
			before := e.runtimeIDs()
			good, published := e.sink.Status(pod.UID)
			n := len(e.rt.GetCalls())

			e.rt.InjectError(method, runnertest.Unavailable())
			acted, done, err := w.sync(context.Background())
			if err == nil || acted || done {
				t.Fatalf("sync with a failed %s: acted=%v done=%v err=%v; want an error and nothing done", method, acted, done, err)
			}
			calls := e.rt.GetCalls()
			for c, k := range runnertest.CallsSince(calls, n) {
				if runnertest.WriteCalls[c] {
					t.Errorf("a failed %s led to %d %s call(s): %v", method, k, c, calls[n:])
				}
			}
			if after := e.runtimeIDs(); !equalStrings(before, after) {
				t.Errorf("runtime objects changed after a failed %s:\nbefore %v\nafter  %v", method, before, after)
			}
			if st, p := e.sink.Status(pod.UID); p != published || st.ContainerStatuses[0].ContainerID != good.ContainerStatuses[0].ContainerID {
				t.Errorf("status was republished from a partial view: %d → %d publications", published, p)
			}

			// The next sync sees everything again and changes nothing.
			n = len(e.rt.GetCalls())
			if _, _, err := w.sync(context.Background()); err != nil {
				t.Fatal(err)
			}
			for c := range runnertest.CallsSince(e.rt.GetCalls(), n) {
				if runnertest.WriteCalls[c] {
					t.Errorf("the sync after recovery made a %s call", c)
				}
			}
			if after := e.runtimeIDs(); !equalStrings(before, after) {
				t.Errorf("runtime objects changed after recovery: %v → %v", before, after)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestStartFailuresBackOff: a start that keeps failing at one stage is tried
// as the kubelet tries it (10 s, then doubling), shows the kubelet's waiting
// reason, and leaves nothing behind: over 60 s of 1 s syncs, at most 4
// attempts, no termination-log files of containers that never ran, no
// created-but-never-started containers. Today's code retried every sync.
func TestStartFailuresBackOff(t *testing.T) {
	tests := []struct {
		name, method string
		image        bool // the method is on the image service
		reason       string
		backoff      string // waiting reason while backing off
	}{
		{name: "image pull", method: "PullImage", image: true, reason: "ErrImagePull", backoff: "ImagePullBackOff"},
		{name: "create", method: "CreateContainer", reason: "CreateContainerError", backoff: "CreateContainerError"},
		{name: "start", method: "StartContainer", reason: "RunContainerError", backoff: "RunContainerError"},
		{name: "sandbox", method: "RunPodSandbox"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEnv(t, context.Background(), nil)
			image := "busybox"
			if tc.image {
				image = "missing"
			}
			pod := e.pod("web", image)
			w := newWorker(e.m, pod)
			fail := func() { runnertest.KeepFailing(e.rt, e.rt.Errors, tc.method) }
			calls := e.rt.GetCalls
			if tc.image {
				fail = func() { runnertest.KeepFailing(e.img, e.img.Errors, tc.method) }
				calls = func() []string { e.img.Lock(); defer e.img.Unlock(); return append([]string{}, e.img.Called...) }
			}
			sawReason, sawBackoff := false, false
			for range 60 {
				fail()
				if _, _, err := w.sync(context.Background()); err != nil {
					t.Fatal(err)
				}
				st, _ := e.sink.Status(pod.UID)
				if len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Waiting != nil {
					// The kubelet keeps CreateContainerError and
					// RunContainerError while it backs off: reason and
					// backoff reason may be the same.
					r := st.ContainerStatuses[0].State.Waiting.Reason
					sawBackoff = sawBackoff || (sawReason && r == tc.backoff)
					sawReason = sawReason || r == tc.reason
				}
				e.clock.Step(time.Second)
			}
			n := runnertest.CallsSince(calls(), 0)[tc.method]
			if n > 4 || n < 2 {
				t.Errorf("%s was called %d times in 60 s; the kubelet's backoff makes 3 (at 0, 10 and 30 s)", tc.method, n)
			}
			if tc.reason != "" && (!sawReason || !sawBackoff) {
				t.Errorf("status never showed %s (%v) and then %s (%v)", tc.reason, sawReason, tc.backoff, sawBackoff)
			}
			if files := countFiles(t, mustPath(e.m.dirs.Pod(string(pod.UID)))); files > 2 {
				t.Errorf("%d files under the pod directory after failed attempts; want the etc-hosts file at most", files)
			}
			for _, id := range e.runtimeIDs() {
				if filepath.Base(id) == runtimeapi.ContainerState_CONTAINER_CREATED.String() {
					t.Errorf("a container that failed to start was left behind: %s", id)
				}
			}
		})
	}
}

// countFiles counts regular files under dir.
func countFiles(t *testing.T, dir string) int {
	n := 0
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// TestStartBackoffClearsOnSuccess: once the failure stops, the next allowed
// attempt starts the container and the waiting reason goes.
func TestStartBackoffClearsOnSuccess(t *testing.T) {
	e := newTestEnv(t, context.Background(), nil)
	pod := e.pod("web", "busybox")
	w := newWorker(e.m, pod)
	e.rt.InjectError("CreateContainer", runnertest.Unavailable())
	if _, _, err := w.sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.sink.Status(pod.UID); st.ContainerStatuses[0].State.Waiting == nil || st.ContainerStatuses[0].State.Waiting.Reason != "CreateContainerError" {
		t.Fatalf("want CreateContainerError, got %+v", st.ContainerStatuses[0].State)
	}
	e.clock.Step(11 * time.Second)
	e.syncUntil(w, "running", runnertest.Running)
	if st, _ := e.sink.Status(pod.UID); st.ContainerStatuses[0].State.Waiting != nil {
		t.Errorf("waiting state stayed after a successful start: %+v", st.ContainerStatuses[0].State)
	}
}

// TestLocksNotHeldAcrossCRI: while a CRI call hangs, the worker's and the
// manager's locks stay free (the API reads and Syncs through them).
func TestLocksNotHeldAcrossCRI(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	e := newTestEnv(t, context.Background(), nil)
	blocking := &blockingRuntime{FakeRuntimeService: e.rt, method: "Version", entered: entered, release: release}
	e.m.cfg.Runtime.RuntimeService = blocking
	pod := e.pod("web", "busybox")
	w := newWorker(e.m, pod)
	e.m.workers[pod.UID] = w
	// The sync writes into the test's TempDir (resolv.conf, pod dirs):
	// it must end before the test does, or TempDir's cleanup races it.
	synced := make(chan struct{})
	go func() { defer close(synced); _, _, _ = w.sync(context.Background()) }()
	<-entered
	free := make(chan struct{})
	go func() {
		w.desired()
		w.setDesired(pod)
		e.m.Refresh()
		close(free)
	}()
	select {
	case <-free:
	case <-time.After(10 * time.Second):
		t.Fatal("worker or manager lock held across a CRI call")
	}
	close(release)
	select {
	case <-synced:
	case <-time.After(30 * time.Second):
		t.Fatal("the sync did not end after the runtime call returned")
	}
}

// blockingRuntime blocks one method until release is closed, and reports
// whether the call's context was cancelled by then.
type blockingRuntime struct {
	*critesting.FakeRuntimeService
	method    string
	entered   chan struct{}
	release   chan struct{}
	cancelled chan bool
}

func (b *blockingRuntime) block(ctx context.Context) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	if b.cancelled != nil {
		select {
		case b.cancelled <- ctx.Err() != nil:
		default:
		}
	}
}

func (b *blockingRuntime) Version(ctx context.Context, v string) (*runtimeapi.VersionResponse, error) {
	if b.method == "Version" {
		b.block(ctx)
	}
	return b.FakeRuntimeService.Version(ctx, v)
}

func (b *blockingRuntime) CreateContainer(ctx context.Context, sb string, c *runtimeapi.ContainerConfig, sc *runtimeapi.PodSandboxConfig) (string, error) {
	if b.method == "CreateContainer" {
		b.block(ctx)
	}
	return b.FakeRuntimeService.CreateContainer(ctx, sb, c, sc)
}
