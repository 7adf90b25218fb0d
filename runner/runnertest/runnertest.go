// Package runnertest is the pod runner's test environment: the kubelet's
// own in-memory CRI (k8s.io/cri-api/pkg/apis/testing), whose
// FakeRuntimeService records every call and takes injected errors per
// method, a StatusSink that keeps what it is told, and pod builders. The
// runner's tests and the controllers' (handoff, checkpointer) use it.
//
// It does not import package runner, so the runner's own in-package tests
// can use it; a test builds its runner.Manager from Env's fields.
package runnertest

import (
	"errors"
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
	btypes "github.com/bootlet/bootlet/types"
)

// Node is the node name of every test pod.
const Node = "node"

// WriteCalls are the CRI calls that change the runtime.
var WriteCalls = map[string]bool{
	"RunPodSandbox": true, "StopPodSandbox": true, "RemovePodSandbox": true,
	"CreateContainer": true, "StartContainer": true, "StopContainer": true, "RemoveContainer": true,
	"PullImage": true,
}

// RecordingSink is a StatusSink (runner.StatusSink) that keeps what it was
// told.
type RecordingSink struct {
	mu         sync.Mutex
	statuses   map[types.UID]v1.PodStatus
	published  int
	terminated map[types.UID]bool
}

// NewRecordingSink returns an empty sink.
func NewRecordingSink() *RecordingSink {
	return &RecordingSink{statuses: map[types.UID]v1.PodStatus{}, terminated: map[types.UID]bool{}}
}

func (s *RecordingSink) PodStatus(_ btypes.PodKey, uid types.UID, st v1.PodStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses[uid] = st
	s.published++
}

func (s *RecordingSink) PodTerminated(_ btypes.PodKey, uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.terminated[uid] = true
	delete(s.statuses, uid)
}

// Status is the last status published for uid, and how many statuses were
// published in all.
func (s *RecordingSink) Status(uid types.UID) (v1.PodStatus, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statuses[uid], s.published
}

// TerminatedCount is how many pods were reported terminated.
func (s *RecordingSink) TerminatedCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.terminated)
}

// Env is the fake CRI and what a runner.Config needs around it.
type Env struct {
	T       *testing.T
	RT      *critesting.FakeRuntimeService
	Img     *critesting.FakeImageService
	Clock   *testingclock.FakeClock
	Sink    *RecordingSink
	Root    string
	Runtime *cri.Runtime
	// ResolvConf is a resolv.conf for the pods' DNS.
	ResolvConf string
}

// New builds the fake CRI. wrap, if given, wraps the fake runtime service
// (to block or count calls).
func New(t *testing.T, wrap func(*critesting.FakeRuntimeService) cri.Runtime) *Env {
	t.Helper()
	root := t.TempDir()
	resolv := filepath.Join(root, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 10.0.0.10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &Env{T: t, RT: critesting.NewFakeRuntimeService(), Img: critesting.NewFakeImageService(),
		Clock: testingclock.NewFakeClock(time.Now()), Sink: NewRecordingSink(), Root: root, ResolvConf: resolv}
	e.Img.SetFakeImages([]string{"busybox"})
	rt := cri.Runtime{RuntimeService: e.RT, ImageManagerService: e.Img}
	if wrap != nil {
		rt = wrap(e.RT)
		rt.ImageManagerService = e.Img
	}
	e.Runtime = &rt
	return e
}

// Pod is a defaulted hostNetwork pod with one container per image.
func (e *Env) Pod(name string, images ...string) *v1.Pod {
	e.T.Helper()
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1.PodSpec{HostNetwork: true}}
	for i, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + string(rune('0'+i)), Image: img,
			ImagePullPolicy: v1.PullIfNotPresent})
	}
	return Defaulted(p)
}

// Defaulted applies the scheme defaults the API gives every pod (the API's
// DefaultPod lives in podapi, which imports the runner) and the fields the
// runner relies on: a UID and the node name.
func Defaulted(p *v1.Pod) *v1.Pod {
	d := p.DeepCopy()
	legacyscheme.Scheme.Default(d)
	if d.UID == "" {
		d.UID = types.UID("uid-" + d.Name)
	}
	d.Spec.NodeName = Node
	return d
}

// Unavailable is the error a runtime gives while it restarts.
func Unavailable() error {
	return errors.New("rpc error: code = Unavailable desc = injected: runtime unavailable")
}

// KeepFailing makes the next call of method fail, unless a failure is
// queued already: called before each sync, the method fails every time it
// is called.
func KeepFailing(mu sync.Locker, errs map[string][]error, method string) {
	mu.Lock()
	defer mu.Unlock()
	if len(errs[method]) == 0 {
		errs[method] = append(errs[method], Unavailable())
	}
}

// CallsSince counts calls by method after the first n recorded.
func CallsSince(calls []string, n int) map[string]int {
	out := map[string]int{}
	for _, c := range calls[n:] {
		out[c]++
	}
	return out
}

// Running reports whether every container of the status runs.
func Running(st v1.PodStatus) bool {
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

// WaitFor polls cond every 20 ms until it holds, failing the test after
// timeout.
func WaitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
