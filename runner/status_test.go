package runner

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

func cond(s v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func TestComputeStatus(t *testing.T) {
	always := testPod(v1.RestartPolicyAlways, nil, "a")
	never := testPod(v1.RestartPolicyNever, nil, "a")
	onFailure := testPod(v1.RestartPolicyOnFailure, nil, "a")
	withInits := testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a")
	probed := testPod(v1.RestartPolicyAlways, nil, "a")
	probed.Spec.Containers[0].ReadinessProbe = &v1.Probe{}
	ready := []*runtimeapi.PodSandboxStatus{sandbox("s1", 0, true)}
	running := kubecontainer.ContainerStateRunning
	exited := kubecontainer.ContainerStateExited

	tests := []struct {
		name       string
		pod        *v1.Pod
		obs        Observed
		probes     map[string]ProbeState
		backingOff map[string]time.Duration
		phase      v1.PodPhase
		ready      v1.ConditionStatus
		check      func(t *testing.T, s v1.PodStatus)
	}{
		{name: "nothing yet is Pending and ContainerCreating", pod: always, obs: observed(nil), phase: v1.PodPending, ready: v1.ConditionFalse,
			check: func(t *testing.T, s v1.PodStatus) {
				if w := s.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != ReasonContainerCreating {
					t.Errorf("state %+v", s.ContainerStatuses[0].State)
				}
			}},
		{name: "running without probes is Ready", pod: always, obs: observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: running}),
			phase: v1.PodRunning, ready: v1.ConditionTrue},
		{name: "readiness probe not yet passed is not Ready", pod: probed, obs: observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: running}),
			phase: v1.PodRunning, ready: v1.ConditionFalse},
		{name: "readiness probe passed is Ready", pod: probed, obs: observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: running}),
			probes: map[string]ProbeState{"c1": {Ready: true, Started: true}}, phase: v1.PodRunning, ready: v1.ConditionTrue},
		{name: "crash loop shows CrashLoopBackOff with the last termination", pod: always,
			obs:        observed(ready, ctr{id: "c2", name: "a", sandbox: "s1", state: exited, exit: 3, finished: t0, restarts: 2}),
			backingOff: map[string]time.Duration{"a": 20 * time.Second}, phase: v1.PodRunning, ready: v1.ConditionFalse,
			check: func(t *testing.T, s v1.PodStatus) {
				cs := s.ContainerStatuses[0]
				if cs.State.Waiting == nil || cs.State.Waiting.Reason != ReasonCrashLoopBackOff || cs.RestartCount != 2 ||
					cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 3 {
					t.Errorf("status %+v", cs)
				}
			}},
		{name: "Never and a failure is Failed", pod: never, obs: observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: exited, exit: 1, finished: t0}),
			phase: v1.PodFailed, ready: v1.ConditionFalse},
		{name: "OnFailure and success is Succeeded", pod: onFailure, obs: observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: exited, exit: 0, finished: t0}),
			phase: v1.PodSucceeded, ready: v1.ConditionFalse},
		{name: "running init container keeps the pod Pending and initializing", pod: withInits,
			obs: observed(ready, ctr{id: "i1", name: "i1", sandbox: "s1", state: running}), phase: v1.PodPending, ready: v1.ConditionFalse,
			check: func(t *testing.T, s v1.PodStatus) {
				if cond(s, v1.PodInitialized) != v1.ConditionFalse {
					t.Error("Initialized must be False")
				}
				if w := s.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != ReasonPodInitializing {
					t.Errorf("app container %+v", s.ContainerStatuses[0].State)
				}
			}},
		{name: "done init containers and a running app", pod: withInits,
			obs: observed(ready, ctr{id: "c1", name: "a", sandbox: "s1", state: running}, ctr{id: "i2", name: "i2", sandbox: "s1", state: exited},
				ctr{id: "i1", name: "i1", sandbox: "s1", state: exited}),
			phase: v1.PodRunning, ready: v1.ConditionTrue,
			check: func(t *testing.T, s v1.PodStatus) {
				if cond(s, v1.PodInitialized) != v1.ConditionTrue {
					t.Error("Initialized must be True")
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ComputeStatus(StatusInput{Pod: tc.pod, Observed: tc.obs, Probes: tc.probes, BackingOff: tc.backingOff, HostIPs: []string{"192.0.2.1"}, Now: t0})
			if s.Phase != tc.phase {
				t.Errorf("phase %s, want %s", s.Phase, tc.phase)
			}
			if got := cond(s, v1.PodReady); got != tc.ready {
				t.Errorf("Ready %s, want %s", got, tc.ready)
			}
			if s.PodIP != "192.0.2.1" {
				t.Errorf("hostNetwork pod IP %q", s.PodIP)
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}
