package shim

import (
	"context"
	"errors"
	btypes "github.com/bootlet/bootlet/types"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	critesting "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/bootlet/bootlet/cri"
)

// The shim's unit tests run against the kubelet's own in-memory CRI
// (k8s.io/cri-api/pkg/apis/testing): FakeRuntimeService records every call
// and takes injected errors per method.

const testNode = "node"

// writeCalls are the CRI calls that change the runtime.
var writeCalls = map[string]bool{
	"RunPodSandbox": true, "StopPodSandbox": true, "RemovePodSandbox": true,
	"CreateContainer": true, "StartContainer": true, "StopContainer": true, "RemoveContainer": true,
	"PullImage": true,
}

// recordingSink is a StatusSink that keeps what it was told.
type recordingSink struct {
	mu         sync.Mutex
	statuses   map[types.UID]v1.PodStatus
	published  int
	terminated map[types.UID]bool
}

func newRecordingSink() *recordingSink {
	return &recordingSink{statuses: map[types.UID]v1.PodStatus{}, terminated: map[types.UID]bool{}}
}

func (s *recordingSink) PodStatus(_ btypes.PodKey, uid types.UID, st v1.PodStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses[uid] = st
	s.published++
}

func (s *recordingSink) PodTerminated(_ btypes.PodKey, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.terminated[uid] = true
	delete(s.statuses, uid)
}

func (s *recordingSink) status(uid types.UID) (v1.PodStatus, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statuses[uid], s.published
}

func (s *recordingSink) terminatedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.terminated)
}

type testEnv struct {
	t     *testing.T
	rt    *critesting.FakeRuntimeService
	img   *critesting.FakeImageService
	clock *testingclock.FakeClock
	sink  *recordingSink
	root  string
	m     *Manager
}

// newTestEnv builds a manager on the fake CRI. runtime, if given, wraps the
// fake runtime service (to block or count calls).
func newTestEnv(t *testing.T, ctx context.Context, wrap func(*critesting.FakeRuntimeService) cri.Runtime) *testEnv {
	t.Helper()
	root := t.TempDir()
	resolv := filepath.Join(root, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 10.0.0.10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &testEnv{t: t, rt: critesting.NewFakeRuntimeService(), img: critesting.NewFakeImageService(),
		clock: testingclock.NewFakeClock(time.Now()), sink: newRecordingSink(), root: root}
	e.img.SetFakeImages([]string{"busybox"})
	rt := cri.Runtime{RuntimeService: e.rt, ImageManagerService: e.img}
	if wrap != nil {
		rt = wrap(e.rt)
		rt.ImageManagerService = e.img
	}
	e.m = newManager(ctx, Config{
		NodeName: testNode, RootDir: filepath.Join(root, "root"), PodLogsDir: filepath.Join(root, "logs"),
		CgroupDriver: cri.CgroupDriverCgroupfs, Runtime: &rt, Status: e.sink,
		HostIPs: []string{"10.0.0.1"}, ResolvConf: resolv,
	}, e.clock)
	return e
}

// pod is a defaulted hostNetwork pod with one container per image.
func (e *testEnv) pod(name string, images ...string) *v1.Pod {
	e.t.Helper()
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1.PodSpec{HostNetwork: true}}
	for i, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + string(rune('0'+i)), Image: img,
			ImagePullPolicy: v1.PullIfNotPresent})
	}
	return defaulted(p)
}

// defaulted applies the scheme defaults the API gives every pod (the API's
// DefaultPod lives in podapi, which imports this package) and the fields the
// runner relies on: a UID and the node name.
func defaulted(p *v1.Pod) *v1.Pod {
	d := p.DeepCopy()
	legacyscheme.Scheme.Default(d)
	if d.UID == "" {
		d.UID = types.UID("uid-" + d.Name)
	}
	d.Spec.NodeName = testNode
	return d
}

// unavailable is the error a runtime gives while it restarts.
func unavailable() error {
	return errors.New("rpc error: code = Unavailable desc = injected: runtime unavailable")
}

// keepFailing makes the next call of method fail, unless a failure is
// queued already: called before each sync, the method fails every time it
// is called.
func keepFailing(mu sync.Locker, errs map[string][]error, method string) {
	mu.Lock()
	defer mu.Unlock()
	if len(errs[method]) == 0 {
		errs[method] = append(errs[method], unavailable())
	}
}

// callsSince counts calls by method after the first n recorded.
func callsSince(calls []string, n int) map[string]int {
	out := map[string]int{}
	for _, c := range calls[n:] {
		out[c]++
	}
	return out
}

// syncUntil runs sync passes of w until cond holds (at most 20).
func (e *testEnv) syncUntil(w *worker, what string, cond func(v1.PodStatus) bool) {
	e.t.Helper()
	for range 20 {
		if _, _, err := w.sync(context.Background()); err != nil {
			e.t.Fatalf("sync: %v", err)
		}
		st, _ := e.sink.status(w.desired().pod.UID)
		if cond(st) {
			return
		}
	}
	st, _ := e.sink.status(w.desired().pod.UID)
	e.t.Fatalf("pod never became %s: %+v", what, st)
}

func running(st v1.PodStatus) bool {
	if st.Phase != v1.PodRunning {
		return false
	}
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running == nil {
			return false
		}
	}
	return len(st.ContainerStatuses) > 0
}
