package runner

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	testingclock "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func testPod(policy v1.RestartPolicy, inits []string, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-node", Namespace: "default", UID: "uid-1"},
		Spec:       v1.PodSpec{RestartPolicy: policy, HostNetwork: true},
	}
	for _, n := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n, Image: "busybox"})
	}
	for _, n := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "busybox"})
	}
	return p
}

func sandbox(id string, attempt uint32, ready bool) *runtimeapi.PodSandboxStatus {
	state := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		state = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return &runtimeapi.PodSandboxStatus{
		Id: id, State: state, Metadata: &runtimeapi.PodSandboxMetadata{Attempt: attempt},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}},
	}
}

type ctr struct {
	id, name, sandbox string
	state             kubecontainer.State
	exit              int
	started, finished time.Time
	hashOf            *v1.Container
	restarts          int
}

func observed(sandboxes []*runtimeapi.PodSandboxStatus, cs ...ctr) Observed {
	o := Observed{PodStatus: &kubecontainer.PodStatus{ID: "uid-1", SandboxStatuses: sandboxes}, SandboxOf: map[string]string{}}
	for _, c := range cs {
		st := &kubecontainer.Status{ID: kubecontainer.ContainerID{Type: "containerd", ID: c.id}, Name: c.name, State: c.state,
			ExitCode: c.exit, StartedAt: c.started, FinishedAt: c.finished, RestartCount: c.restarts}
		if c.hashOf != nil {
			st.Hash = kubecontainer.HashContainer(c.hashOf)
		}
		o.ContainerStatuses = append(o.ContainerStatuses, st)
		o.SandboxOf[c.id] = c.sandbox
	}
	return o
}

func TestPlan(t *testing.T) {
	always := testPod(v1.RestartPolicyAlways, nil, "a", "b")
	never := testPod(v1.RestartPolicyNever, nil, "a")
	onFailure := testPod(v1.RestartPolicyOnFailure, nil, "a")
	withInits := testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a")
	initsNever := testPod(v1.RestartPolicyNever, []string{"i1", "i2"}, "a")
	changed := always.DeepCopy()
	changed.Spec.Containers[0].Image = "busybox:2"
	ready := []*runtimeapi.PodSandboxStatus{sandbox("s1", 0, true)}
	dead := []*runtimeapi.PodSandboxStatus{sandbox("s1", 0, false)}
	running := kubecontainer.ContainerStateRunning
	exited := kubecontainer.ContainerStateExited

	tests := []struct {
		name      string
		pod       *v1.Pod
		obs       Observed
		term      bool
		probes    map[string]ProbeState
		inBackoff bool
		want      Actions
	}{
		{name: "new pod creates a sandbox and starts every container", pod: always, obs: observed(nil),
			want: Actions{KillPod: true, CreateSandbox: true, NextInit: -1, Start: []int{0, 1}}},
		{name: "steady state does nothing", pod: always,
			obs:  observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: running, hashOf: &always.Spec.Containers[0]}, ctr{id: "c2", name: "b", sandbox: "s1", state: running, hashOf: &always.Spec.Containers[1]}),
			want: Actions{SandboxID: "s1", NextInit: -1}},
		{name: "dead sandbox is recreated with attempt+1", pod: always, obs: observed(dead),
			want: Actions{KillPod: true, CreateSandbox: true, Attempt: 1, SandboxID: "s1", NextInit: -1, Start: []int{0, 1}}},
		{name: "exited container restarts under Always", pod: always,
			obs:  observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: exited, exit: 1, finished: t0}, ctr{id: "c2", name: "b", sandbox: "s1", state: running, hashOf: &always.Spec.Containers[1]}),
			want: Actions{SandboxID: "s1", NextInit: -1, Start: []int{0}}},
		{name: "crash loop waits out the backoff", pod: always, inBackoff: true,
			obs:  observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: exited, exit: 1, finished: t0}, ctr{id: "c2", name: "b", sandbox: "s1", state: running, hashOf: &always.Spec.Containers[1]}),
			want: Actions{SandboxID: "s1", NextInit: -1, BackingOff: []string{"a"}}},
		{name: "hash change kills and restarts the container", pod: changed,
			obs:  observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: running, hashOf: &always.Spec.Containers[0]}, ctr{id: "c2", name: "b", sandbox: "s1", state: running, hashOf: &always.Spec.Containers[1]}),
			want: Actions{SandboxID: "s1", NextInit: -1, Start: []int{0}, Kill: []KillAction{{ID: kubecontainer.ContainerID{Type: "containerd", ID: "c1"}, Name: "a", Message: "Container a definition changed, will be restarted"}}}},
		{name: "liveness failure kills and restarts", pod: always, probes: map[string]ProbeState{"c2": {LivenessFailed: true}},
			obs:  observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: running, hashOf: &always.Spec.Containers[0]}, ctr{id: "c2", name: "b", sandbox: "s1", state: running, hashOf: &always.Spec.Containers[1]}),
			want: Actions{SandboxID: "s1", NextInit: -1, Start: []int{1}, Kill: []KillAction{{ID: kubecontainer.ContainerID{Type: "containerd", ID: "c2"}, Name: "b", Message: "Container b failed liveness probe, will be restarted"}}}},
		{name: "Never: an exited pod is finished and its sandbox stopped", pod: never,
			obs:  observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: exited, exit: 1, finished: t0}),
			want: Actions{KillPod: true, Finished: true, SandboxID: "s1", NextInit: -1}},
		{name: "Never: a stopped sandbox is not recreated", pod: never,
			obs:  observed(dead, ctr{id: "c1", name: "a", sandbox: "s1", state: exited, exit: 0, finished: t0}),
			want: Actions{KillPod: true, Finished: true, Attempt: 1, SandboxID: "s1", NextInit: -1}},
		{name: "OnFailure: success is final", pod: onFailure,
			obs:  observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: exited, exit: 0, finished: t0}),
			want: Actions{KillPod: true, Finished: true, SandboxID: "s1", NextInit: -1}},
		{name: "OnFailure: failure restarts", pod: onFailure,
			obs:  observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: exited, exit: 2, finished: t0}),
			want: Actions{SandboxID: "s1", NextInit: -1, Start: []int{0}}},
		{name: "new sandbox starts the first init container", pod: withInits, obs: observed(nil),
			want: Actions{KillPod: true, CreateSandbox: true, NextInit: 0}},
		{name: "running init container is waited for", pod: withInits,
			obs:  observed(ready, ctr{id: "i1", name: "i1", sandbox: "s1", state: running}),
			want: Actions{SandboxID: "s1", NextInit: -1}},
		{name: "succeeded init container starts the next", pod: withInits,
			obs:  observed(ready, ctr{id: "i1", name: "i1", sandbox: "s1", state: exited}),
			want: Actions{SandboxID: "s1", NextInit: 1}},
		{name: "all init containers done start the app", pod: withInits,
			obs:  observed(ready, ctr{id: "i2", name: "i2", sandbox: "s1", state: exited}, ctr{id: "i1", name: "i1", sandbox: "s1", state: exited}),
			want: Actions{SandboxID: "s1", NextInit: -1, Start: []int{0}}},
		{name: "init statuses from an old sandbox do not count", pod: withInits,
			obs:  observed([]*runtimeapi.PodSandboxStatus{sandbox("s2", 1, true), sandbox("s1", 0, false)}, ctr{id: "i2", name: "i2", sandbox: "s1", state: exited}, ctr{id: "i1", name: "i1", sandbox: "s1", state: exited}),
			want: Actions{SandboxID: "s2", Attempt: 1, NextInit: 0}},
		{name: "failed init container is retried under Always", pod: withInits,
			obs:  observed(ready, ctr{id: "i1", name: "i1", sandbox: "s1", state: exited, exit: 1, finished: t0}),
			want: Actions{SandboxID: "s1", NextInit: 0}},
		{name: "failed init container fails the pod under Never", pod: initsNever,
			obs:  observed(ready, ctr{id: "i1", name: "i1", sandbox: "s1", state: exited, exit: 1, finished: t0}),
			want: Actions{SandboxID: "s1", NextInit: -1, KillPod: true, Finished: true}},
		{name: "termination kills the pod", pod: always, term: true,
			obs:  observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: running}),
			want: Actions{KillPod: true, NextInit: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := testingclock.NewFakeClock(t0.Add(time.Second))
			backoff := flowcontrol.NewFakeBackOff(backoffInitial, backoffMax, clock)
			if tc.inBackoff {
				for i := range tc.pod.Spec.Containers {
					backoff.Next(BackoffKey(tc.pod, &tc.pod.Spec.Containers[i]), t0)
				}
			}
			got := Plan(PlanInput{Pod: tc.pod, Observed: tc.obs, Terminating: tc.term, Probes: tc.probes, Backoff: backoff, Now: clock.Now()})
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Plan:\n got  %+v\n want %+v", got, tc.want)
			}
		})
	}
}

// TestBackoffSchedule checks the kubelet's crash-loop schedule: the first
// restart is immediate, then 10 s doubling to 5 min, reset after 10 min of
// running.
func TestBackoffSchedule(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	key := BackoffKey(pod, &pod.Spec.Containers[0])
	clock := testingclock.NewFakeClock(t0)
	b := flowcontrol.NewFakeBackOff(backoffInitial, backoffMax, clock)
	if b.IsInBackOffSince(key, clock.Now()) {
		t.Fatal("first restart must be immediate")
	}
	var got []time.Duration
	finished := clock.Now()
	for i := 0; i < 7; i++ {
		b.Next(key, finished)
		got = append(got, b.Get(key))
		clock.Step(b.Get(key))
		finished = clock.Now()
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("schedule %v, want %v", got, want)
	}
	clock.Step(11 * time.Minute)
	b.Next(key, clock.Now())
	if d := b.Get(key); d != backoffInitial {
		t.Fatalf("after 10 min of running the backoff must reset, got %v", d)
	}
}
