package runner

import (
	"context"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootlet/bootlet/runner/runnertest"
	btypes "github.com/bootlet/bootlet/types"
)

func TestStartAfterNames(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        []string
	}{
		{"none", "", nil},
		{"one", "kube-apiserver", []string{"kube-apiserver"}},
		{"list with blanks and repeats", " a, ,b,a ,", []string{"a", "b"}},
		{"itself is dropped", "self,a", []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "self"}}
			if tc.value != "" {
				pod.Annotations = map[string]string{btypes.AnnotationStartAfter: tc.value}
			}
			if got := StartAfter(pod); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("StartAfter(%q) = %q, want %q", tc.value, got, tc.want)
			}
		})
	}
}

func TestServeChecks(t *testing.T) {
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/readyz"}}}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", ReadinessProbe: probe}, {Name: "b"}}}}
	running := func(name, id string) v1.ContainerStatus {
		return v1.ContainerStatus{Name: name, ContainerID: "containerd://" + id, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	}
	waiting := v1.ContainerStatus{Name: "b", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	for _, tc := range []struct {
		name           string
		status         *v1.PodStatus
		wantNotRunning string
		wantIDs        []string
	}{
		{"no status yet", nil, "a", nil},
		{"one container waiting", &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{running("a", "1"), waiting}}, "b", nil},
		{"all running: the probed one is checked", &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{running("a", "1"), running("b", "2")}}, "", []string{"1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checks, notRunning := serveChecks(pod, tc.status)
			var ids []string
			for _, c := range checks {
				ids = append(ids, c.containerID)
			}
			if notRunning != tc.wantNotRunning || !reflect.DeepEqual(ids, tc.wantIDs) {
				t.Errorf("serveChecks = %q, %q; want %q, %q", ids, notRunning, tc.wantIDs, tc.wantNotRunning)
			}
		})
	}
}

// TestStartAfterGate: a pod that starts after another is not given a
// sandbox until the other runs and its readiness handler succeeds; a name
// bootlet does not run is not waited for; once released it starts.
func TestStartAfterGate(t *testing.T) {
	e := newTestEnv(t, context.Background(), nil)
	api := e.pod("api", "busybox")
	api.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
		InitialDelaySeconds: 10, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3}
	cm := e.pod("cm", "busybox")
	cm.Annotations = map[string]string{btypes.AnnotationStartAfter: "api,not-run-here"}
	wa, wc := newWorker(e.m, api), newWorker(e.m, cm)
	e.m.workers[api.UID], e.m.workers[cm.UID] = wa, wc

	sandboxesOf := func(p *v1.Pod) int {
		e.rt.Lock()
		defer e.rt.Unlock()
		n := 0
		for _, sb := range e.rt.Sandboxes {
			if sb.Metadata.Uid == string(p.UID) {
				n++
			}
		}
		return n
	}
	heldPass := func(why string) {
		t.Helper()
		wc.kickNow() // end the pass's wait after its first look
		if _, _, err := wc.sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := sandboxesOf(cm); n != 0 {
			t.Fatalf("%s: cm has %d sandboxes, want none", why, n)
		}
		if st, _ := e.sink.Status(cm.UID); st.Phase != v1.PodPending {
			t.Fatalf("%s: cm's published phase %q, want Pending", why, st.Phase)
		}
	}
	heldPass("api not running")
	e.syncUntil(wa, "running", runnertest.Running)
	e.rt.InjectError("ExecSync", runnertest.Unavailable())
	heldPass("api's readiness handler failing")
	e.syncUntil(wc, "running", runnertest.Running) // the handler succeeds now; the initial delay is not waited for
	if n := sandboxesOf(cm); n != 1 {
		t.Fatalf("cm has %d sandboxes after its release, want 1", n)
	}
	wc.mu.Lock()
	released := wc.startReleased
	wc.mu.Unlock()
	if !released {
		t.Error("cm started but is not marked released")
	}
}

// TestStartAfterCycleOfTwo: two pods that name each other both start.
func TestStartAfterCycleOfTwo(t *testing.T) {
	e := newTestEnv(t, context.Background(), nil)
	a, b := e.pod("a", "busybox"), e.pod("b", "busybox")
	a.Annotations = map[string]string{btypes.AnnotationStartAfter: "b"}
	b.Annotations = map[string]string{btypes.AnnotationStartAfter: "a"}
	wa, wb := newWorker(e.m, a), newWorker(e.m, b)
	e.m.workers[a.UID], e.m.workers[b.UID] = wa, wb
	e.syncUntil(wa, "running", runnertest.Running)
	e.syncUntil(wb, "running", runnertest.Running)
}
