package runner

import (
	"context"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	critesting "k8s.io/cri-api/pkg/apis/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/runner/runnertest"
)

// The runner's unit tests run against the fake CRI of runnertest; testEnv
// adds the manager, built with the fake clock, and reaches its workers.

type testEnv struct {
	t     *testing.T
	env   *runnertest.Env
	rt    *critesting.FakeRuntimeService
	img   *critesting.FakeImageService
	clock *testingclock.FakeClock
	sink  *runnertest.RecordingSink
	root  string
	m     *Manager
}

// newTestEnv builds a manager on the fake CRI. wrap, if given, wraps the
// fake runtime service (to block or count calls).
func newTestEnv(t *testing.T, ctx context.Context, wrap func(*critesting.FakeRuntimeService) cri.Runtime) *testEnv {
	t.Helper()
	env := runnertest.New(t, wrap)
	e := &testEnv{t: t, env: env, rt: env.RT, img: env.Img, clock: env.Clock, sink: env.Sink, root: env.Root}
	e.m = newManager(ctx, Config{
		NodeName: runnertest.Node, RootDir: filepath.Join(env.Root, "root"), PodLogsDir: filepath.Join(env.Root, "logs"),
		CgroupDriver: cri.CgroupDriverCgroupfs, Runtime: env.Runtime, Status: env.Sink,
		HostIPs: []string{"10.0.0.1"}, ResolvConf: env.ResolvConf,
	}, env.Clock)
	return e
}

// pod is a defaulted hostNetwork pod with one container per image.
func (e *testEnv) pod(name string, images ...string) *v1.Pod { return e.env.Pod(name, images...) }

// syncUntil runs sync passes of w until cond holds (at most 20).
func (e *testEnv) syncUntil(w *worker, what string, cond func(v1.PodStatus) bool) {
	e.t.Helper()
	for range 20 {
		if _, _, err := w.sync(context.Background()); err != nil {
			e.t.Fatalf("sync: %v", err)
		}
		st, _ := e.sink.Status(w.desired().pod.UID)
		if cond(st) {
			return
		}
	}
	st, _ := e.sink.Status(w.desired().pod.UID)
	e.t.Fatalf("pod never became %s: %+v", what, st)
}
