package runner

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	testingclock "k8s.io/utils/clock/testing"
)

func TestGCDecision(t *testing.T) {
	running, exited, created := kubecontainer.ContainerStateRunning, kubecontainer.ContainerStateExited, kubecontainer.ContainerStateCreated
	tests := []struct {
		name                    string
		sandboxes               []*runtimeapi.PodSandboxStatus
		containers              []ctr // newest first
		wantCtrs, wantSandboxes []string
	}{
		{name: "nothing dead", sandboxes: []*runtimeapi.PodSandboxStatus{sandbox("s1", 0, true)},
			containers: []ctr{{id: "a1", name: "a", sandbox: "s1", state: running}}},
		{name: "one dead run kept per name",
			sandboxes:  []*runtimeapi.PodSandboxStatus{sandbox("s1", 0, true)},
			containers: []ctr{{id: "a3", name: "a", sandbox: "s1", state: running}, {id: "a2", name: "a", sandbox: "s1", state: exited}, {id: "a1", name: "a", sandbox: "s1", state: exited}},
			wantCtrs:   []string{"a1"}},
		{name: "names counted apart",
			sandboxes:  []*runtimeapi.PodSandboxStatus{sandbox("s1", 0, true)},
			containers: []ctr{{id: "a2", name: "a", sandbox: "s1", state: exited}, {id: "b1", name: "b", sandbox: "s1", state: exited}, {id: "a1", name: "a", sandbox: "s1", state: exited}},
			wantCtrs:   []string{"a1"}},
		{name: "created but never started, superseded",
			sandboxes:  []*runtimeapi.PodSandboxStatus{sandbox("s1", 0, true)},
			containers: []ctr{{id: "a2", name: "a", sandbox: "s1", state: running}, {id: "a1", name: "a", sandbox: "s1", state: created}},
			wantCtrs:   []string{"a1"}},
		{name: "created and newest stays",
			sandboxes:  []*runtimeapi.PodSandboxStatus{sandbox("s1", 0, true)},
			containers: []ctr{{id: "a2", name: "a", sandbox: "s1", state: created}, {id: "a1", name: "a", sandbox: "s1", state: exited}}},
		{name: "old dead sandbox without kept containers goes",
			sandboxes:     []*runtimeapi.PodSandboxStatus{sandbox("s2", 1, true), sandbox("s1", 0, false)},
			containers:    []ctr{{id: "a2", name: "a", sandbox: "s2", state: running}},
			wantSandboxes: []string{"s1"}},
		{name: "old dead sandbox holding the last dead run stays",
			sandboxes:  []*runtimeapi.PodSandboxStatus{sandbox("s2", 1, true), sandbox("s1", 0, false)},
			containers: []ctr{{id: "a2", name: "a", sandbox: "s2", state: running}, {id: "a1", name: "a", sandbox: "s1", state: exited}}},
		{name: "newest sandbox stays even when dead",
			sandboxes: []*runtimeapi.PodSandboxStatus{sandbox("s1", 0, false)}},
		{name: "ready old sandbox stays",
			sandboxes: []*runtimeapi.PodSandboxStatus{sandbox("s2", 1, true), sandbox("s1", 0, true)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gotC, gotS := gcDecision(observed(tc.sandboxes, tc.containers...))
			sort.Strings(gotC)
			if fmt.Sprint(gotC) != fmt.Sprint(tc.wantCtrs) || fmt.Sprint(gotS) != fmt.Sprint(tc.wantSandboxes) {
				t.Errorf("gcDecision = containers %v sandboxes %v; want %v %v", gotC, gotS, tc.wantCtrs, tc.wantSandboxes)
			}
		})
	}
}

func TestStartFailure(t *testing.T) {
	tests := []struct {
		stage        startStage
		reason, evnt string
	}{
		{stagePull, "ErrImagePull", "Failed"},
		{stagePullNever, "ErrImageNeverPull", "ErrImageNeverPull"},
		{stageConfig, "CreateContainerConfigError", "Failed"},
		{stageCreate, "CreateContainerError", "Failed"},
		{stageStart, "RunContainerError", "Failed"},
	}
	for _, tc := range tests {
		if r, e := startFailure(tc.stage); r != tc.reason || e != tc.evnt {
			t.Errorf("startFailure(%d) = %s, %s; want %s, %s", tc.stage, r, e, tc.reason, tc.evnt)
		}
	}
}

func TestWaitingStates(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, []string{"init"}, "a", "b")
	waiting := map[string]v1.ContainerStateWaiting{
		"a":    {Reason: "ErrImagePull", Message: "not found"},
		"b":    {Reason: "CreateContainerError", Message: "no such file"},
		"init": {Reason: "ErrImagePull", Message: "denied"},
		"gone": {Reason: "RunContainerError"},
	}
	tests := []struct {
		name     string
		deferred []string
		want     map[string]string
	}{
		{name: "right after the failure", want: map[string]string{"a": "ErrImagePull", "b": "CreateContainerError", "init": "ErrImagePull"}},
		{name: "while backing off", deferred: []string{"a", "b", "init"},
			want: map[string]string{"a": "ImagePullBackOff", "b": "CreateContainerError", "init": "ImagePullBackOff"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := waitingStates(pod, waiting, tc.deferred)
			reasons := map[string]string{}
			for k, v := range got {
				reasons[k] = v.Reason
			}
			if !reflect.DeepEqual(reasons, tc.want) {
				t.Errorf("reasons %v; want %v", reasons, tc.want)
			}
		})
	}
	if got := waitingInBackoff(waiting["a"], "busybox"); got.Message != `Back-off pulling image "busybox": ErrImagePull: not found` {
		t.Errorf("ImagePullBackOff message %q", got.Message)
	}
}

func TestSyncRetryDelay(t *testing.T) {
	for failures, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 50: 10 * time.Second} {
		if got := syncRetryDelay(failures); got != want {
			t.Errorf("syncRetryDelay(%d) = %s; want %s", failures, got, want)
		}
	}
}

func TestStopTimeoutSeconds(t *testing.T) {
	tests := []struct {
		grace, elapsed time.Duration
		want           int64
	}{
		{30 * time.Second, 0, 30},
		{30 * time.Second, 10 * time.Second, 20},
		{30 * time.Second, 29 * time.Second, 2},
		{0, 0, 2},
	}
	for _, tc := range tests {
		if got := stopTimeoutSeconds(tc.grace, tc.elapsed); got != tc.want {
			t.Errorf("stopTimeoutSeconds(%s, %s) = %d; want %d", tc.grace, tc.elapsed, got, tc.want)
		}
	}
}

func TestProbesToChange(t *testing.T) {
	obs := observed(nil,
		ctr{id: "r1", name: "a", state: kubecontainer.ContainerStateRunning},
		ctr{id: "r2", name: "b", state: kubecontainer.ContainerStateRunning},
		ctr{id: "x1", name: "c", state: kubecontainer.ContainerStateExited})
	noop := func() {}
	stop, start := probesToChange(obs, map[string]context.CancelFunc{"r1": noop, "x1": noop, "old": noop})
	sort.Strings(stop)
	if fmt.Sprint(stop) != "[old x1]" || len(start) != 1 || start[0].ID.ID != "r2" {
		t.Errorf("stop %v start %v; want [old x1] and r2", stop, start)
	}
}

// TestPodBackoff: the kubelet's numbers (10 s doubling to 5 min, forgotten
// after 10 min without failure) and forgetting a pod's entries.
func TestPodBackoff(t *testing.T) {
	clk := testingclock.NewFakeClock(t0)
	b := newPodBackoff(clk)
	for i, want := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute} {
		b.next("u1", "k", clk.Now())
		if got := b.Get("k"); got != want {
			t.Errorf("failure %d: backoff %s; want %s", i+1, got, want)
		}
		if !b.IsInBackOffSinceUpdate("k", clk.Now().Add(want-time.Second)) || b.IsInBackOffSinceUpdate("k", clk.Now().Add(want)) {
			t.Errorf("failure %d: held back for other than %s", i+1, want)
		}
	}
	clk.Step(11 * time.Minute)
	b.next("u1", "k", clk.Now())
	if got := b.Get("k"); got != 10*time.Second {
		t.Errorf("after 11 min without failure the backoff is %s; want it reset to 10s", got)
	}
	b.next("u2", "k2", clk.Now())
	b.forget("u1")
	if b.Get("k") != 0 || b.Get("k2") == 0 || b.pods() != 1 {
		t.Errorf("forget(u1) must drop u1's entries only: k=%s k2=%s pods=%d", b.Get("k"), b.Get("k2"), b.pods())
	}
}

type fakeStartBackoff map[string]bool

func (f fakeStartBackoff) IsInBackOffSinceUpdate(key string, _ time.Time) bool { return f[key] }

// TestPlanStartBackoff: failed start attempts hold back their retry, for the
// sandbox and per container (init containers too).
func TestPlanStartBackoff(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "a", "b")
	withInit := testPod(v1.RestartPolicyAlways, []string{"i"}, "a")
	ready := []*runtimeapi.PodSandboxStatus{sandbox("s1", 0, true)}
	tests := []struct {
		name    string
		pod     *v1.Pod
		obs     Observed
		held    fakeStartBackoff
		check   func(Actions) bool
		explain string
	}{
		{name: "sandbox held back", pod: pod, obs: observed(nil), held: fakeStartBackoff{SandboxBackoffKey(pod): true},
			check:   func(a Actions) bool { return !a.CreateSandbox && a.SandboxDeferred && len(a.Start) == 0 },
			explain: "no sandbox, no start"},
		{name: "sandbox free", pod: pod, obs: observed(nil), held: fakeStartBackoff{},
			check: func(a Actions) bool { return a.CreateSandbox && !a.SandboxDeferred && len(a.Start) == 2 }, explain: "sandbox and both containers"},
		{name: "one container held back", pod: pod, obs: observed(ready), held: fakeStartBackoff{BackoffKey(pod, &pod.Spec.Containers[0]): true},
			check: func(a Actions) bool {
				return fmt.Sprint(a.Start) == "[1]" && fmt.Sprint(a.Deferred) == "[a]" && !a.KillPod
			}, explain: "start b only, a deferred, pod not killed"},
		{name: "init container held back", pod: withInit, obs: observed(ready), held: fakeStartBackoff{BackoffKey(withInit, &withInit.Spec.InitContainers[0]): true},
			check:   func(a Actions) bool { return a.NextInit == -1 && fmt.Sprint(a.Deferred) == "[i]" },
			explain: "init deferred"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := Plan(PlanInput{Pod: tc.pod, Observed: tc.obs, StartBackoff: tc.held, Now: t0})
			if !tc.check(a) {
				t.Errorf("want %s; got %+v", tc.explain, a)
			}
		})
	}
}
