package runner

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critesting "k8s.io/cri-api/pkg/apis/testing"

	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/runner/runnertest"
)

// panickingRuntime is the fake CRI with a panic injected into the next n
// calls of one method, as a bug in a runtime client or in bootlet's own
// handling of one pod's data would raise it.
type panickingRuntime struct {
	*critesting.FakeRuntimeService
	mu     sync.Mutex
	panics map[string]int
}

func (p *panickingRuntime) maybePanic(method string) {
	p.mu.Lock()
	n := p.panics[method]
	if n > 0 {
		p.panics[method] = n - 1
	}
	p.mu.Unlock()
	if n > 0 {
		panic("injected panic in " + method)
	}
}

func (p *panickingRuntime) inject(method string, n int) {
	p.mu.Lock()
	p.panics[method] += n
	p.mu.Unlock()
}

func (p *panickingRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	p.maybePanic("RunPodSandbox")
	return p.FakeRuntimeService.RunPodSandbox(ctx, config, handler)
}

func (p *panickingRuntime) StartContainer(ctx context.Context, id string) error {
	p.maybePanic("StartContainer")
	return p.FakeRuntimeService.StartContainer(ctx, id)
}

// eventLog records the events of pods.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Event(pod *v1.Pod, eventType, reason, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, pod.Name+" "+eventType+" "+reason+": "+message)
}

func (l *eventLog) find(reason string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		if strings.Contains(e, " "+reason+": ") {
			out = append(out, e)
		}
	}
	return out
}

func newPanickingEnv(t *testing.T, ctx context.Context) (*testEnv, *panickingRuntime, *eventLog) {
	var p *panickingRuntime
	e := newTestEnv(t, ctx, func(f *critesting.FakeRuntimeService) cri.Runtime {
		p = &panickingRuntime{FakeRuntimeService: f, panics: map[string]int{}}
		return cri.Runtime{RuntimeService: p}
	})
	events := &eventLog{}
	e.m.cfg.Events = events
	return e, p, events
}

// TestSyncPanicBecomesPodError: a panic in a pod's sync pass, in the sync
// goroutine itself (RunPodSandbox) or in one of the goroutines it starts
// containers in (StartContainer), is recovered: the pass returns it as
// its error (so run backs off), a Warning event says so, and the next pass
// brings the pod up. Before, the panic ended the daemon.
func TestSyncPanicBecomesPodError(t *testing.T) {
	for _, method := range []string{"RunPodSandbox", "StartContainer"} {
		t.Run(method, func(t *testing.T) {
			e, p, events := newPanickingEnv(t, context.Background())
			pod := e.pod("web", "busybox", "busybox")
			w := newWorker(e.m, pod)
			p.inject(method, 1)
			var err error
			for range 5 {
				if _, _, err = w.safeSync(context.Background()); err != nil {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), "injected panic in "+method) {
				t.Fatalf("sync error %v, want the recovered panic", err)
			}
			if got := events.find("FailedSync"); len(got) != 1 || !strings.Contains(got[0], "Warning") || !strings.Contains(got[0], "injected panic") {
				t.Errorf("FailedSync events %q, want one Warning naming the panic", got)
			}
			e.syncUntil(w, "running", runnertest.Running)
		})
	}
}

// TestWorkerSurvivesPanics: the manager's worker goroutine keeps driving a
// pod whose passes panic, with the sync backoff between attempts, and the
// pod runs once the panics stop. An unrecovered panic here would end the
// test binary, as it ended the daemon.
func TestWorkerSurvivesPanics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e, p, events := newPanickingEnv(t, ctx)
	pod := e.pod("web", "busybox")
	p.inject("RunPodSandbox", 2)
	e.m.Sync(pod)
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, _ := e.sink.Status(pod.UID)
		if runnertest.Running(st) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod never ran after the panics stopped: %+v; events %q", st, events.find("FailedSync"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := events.find("FailedSync"); len(got) != 2 {
		t.Errorf("FailedSync events %q, want one per panic (2)", got)
	}
	cancel()
	e.m.Wait()
}

// TestBadUIDFailsWithoutPanic: a pod record with a UID the API refuses
// today (written by an older version) fails its sync with an error: no
// panic (newCgroupName panicked on '_'), no sandbox, and no directory
// outside the pods directory.
func TestBadUIDFailsWithoutPanic(t *testing.T) {
	for _, uid := range []types.UID{"a_b", "a/b", ".", "..", "../../x"} {
		t.Run(string(uid), func(t *testing.T) {
			e, _, events := newPanickingEnv(t, context.Background())
			pod := e.pod("web", "busybox")
			pod.UID = uid
			w := newWorker(e.m, pod)
			for range 3 {
				_, _, _ = w.safeSync(context.Background())
			}
			if got := events.find("FailedSync"); len(got) > 0 {
				t.Errorf("a bad UID panicked: %q", got)
			}
			e.rt.Lock()
			n := len(e.rt.Sandboxes)
			e.rt.Unlock()
			if n != 0 {
				t.Errorf("%d sandboxes created for UID %q", n, uid)
			}
		})
	}
}
