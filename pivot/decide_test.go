package pivot

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	btypes "github.com/bootlet/bootlet/types"
)

func TestDecidePivot(t *testing.T) {
	api, cm := DefaultComponents[0], DefaultComponents[1]
	adopted := &BootstrapFacts{UID: "u1", Owner: btypes.OwnerKubeletStatic}
	ready := SelfHostedFacts{Name: "x-1", Running: true, Ready: true}
	serving := ready
	serving.ServesReadyz = true
	notReady := SelfHostedFacts{Name: "x-0", Running: true}
	deleting := serving
	deleting.Deleting = true
	// A restored snapshot's self-hosted pods: Running and Ready in etcd,
	// nothing of them on this node.
	restored := serving
	restored.Name, restored.NoProcess = "x-old", true

	cases := []struct {
		name      string
		c         ComponentFacts
		endpoints bool
		withdraw  bool
		done      bool
		pod       string
		reason    string
	}{
		{"withdrawn already", ComponentFacts{Component: cm}, false, false, true, "", "no bootstrap pod"},
		{"being withdrawn", ComponentFacts{Component: cm, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerReleased, Terminating: true}, SelfHosted: []SelfHostedFacts{ready}}, true, false, false, "", "stopping"},
		{"not adopted", ComponentFacts{Component: cm, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerBootlet}, SelfHosted: []SelfHostedFacts{ready}}, true, false, false, "", "not adopted"},
		{"no self-hosted pod", ComponentFacts{Component: cm, Bootstrap: adopted}, true, false, false, "", "no self-hosted pod on this node"},
		{"self-hosted pod not ready", ComponentFacts{Component: cm, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{notReady}}, true, false, false, "", "x-0(running=true ready=false"},
		{"controller-manager ready", ComponentFacts{Component: cm, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{notReady, ready}}, false, true, false, "x-1", "Running and Ready"},
		{"deleting pod does not count", ComponentFacts{Component: cm, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{deleting}}, true, false, false, "", "deleting=true"},
		{"apiserver Ready by the kubelet only", ComponentFacts{Component: api, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{ready}}, true, false, false, "", "own process"},
		{"apiserver serving, endpoints not yet", ComponentFacts{Component: api, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{serving}}, false, false, false, "", "endpoints"},
		{"apiserver serving, endpoints listed", ComponentFacts{Component: api, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{serving}}, true, true, false, "x-1", "answers /readyz"},
		{"apiserver deleting", ComponentFacts{Component: api, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{deleting}}, true, false, false, "", "no self-hosted pod Running and Ready"},
		{"restored controller-manager: Ready in etcd, no process", ComponentFacts{Component: cm, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{restored}}, true, false, false, "", "x-old(running=true ready=true in the apiserver, but no process of it runs on this node"},
		{"restored apiserver: Ready in etcd, no process", ComponentFacts{Component: api, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{restored}}, true, false, false, "", "no process of it runs on this node"},
		{"restored pod and the kubelet's new one", ComponentFacts{Component: cm, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{restored, ready}}, true, true, false, "x-1", "Running and Ready"},
	}
	for _, tc := range cases {
		steps := Decide(Facts{Components: []ComponentFacts{tc.c}, EndpointsListNode: tc.endpoints})
		if len(steps) != 1 {
			t.Fatalf("%s: %d steps", tc.name, len(steps))
		}
		s := steps[0]
		if s.Withdraw != tc.withdraw || s.Done != tc.done || s.Pod != tc.pod || !strings.Contains(s.Reason, tc.reason) {
			t.Errorf("%s: got %+v, want withdraw=%v done=%v pod=%q reason containing %q", tc.name, s, tc.withdraw, tc.done, tc.pod, tc.reason)
		}
		if s.Component != tc.c.Component.Name {
			t.Errorf("%s: component %q", tc.name, s.Component)
		}
	}
}

func TestPivotComponentsIndependentAndDone(t *testing.T) {
	adopted := &BootstrapFacts{Owner: btypes.OwnerKubeletStatic}
	ready := SelfHostedFacts{Name: "p", Running: true, Ready: true}
	f := Facts{Components: []ComponentFacts{
		{Component: DefaultComponents[0], Bootstrap: adopted, SelfHosted: []SelfHostedFacts{ready}}, // apiserver: not verified
		{Component: DefaultComponents[1], Bootstrap: adopted, SelfHosted: []SelfHostedFacts{ready}},
		{Component: DefaultComponents[2]},
	}}
	steps := Decide(f)
	if steps[0].Withdraw || !steps[1].Withdraw || !steps[2].Done || Done(steps) {
		t.Errorf("steps %+v", steps)
	}
	if !Done(Decide(Facts{Components: []ComponentFacts{{Component: DefaultComponents[0]}}})) {
		t.Error("no bootstrap pod left: want done")
	}
	for _, c := range DefaultComponents {
		if c.Name == "etcd" || c.Bootstrap.Name == "etcd" {
			t.Error("etcd stays pinned: it must not be a pivot component")
		}
	}
}

func TestServingCandidate(t *testing.T) {
	api := DefaultComponents[0]
	ready := SelfHostedFacts{Name: "a", UID: "ua", Running: true, Ready: true}
	cases := []struct {
		name string
		c    ComponentFacts
		want string
	}{
		{"ready pod, adopted bootstrap", ComponentFacts{Component: api, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerKubeletStatic}, SelfHosted: []SelfHostedFacts{{Name: "n", Running: true}, ready}}, "a"},
		{"not an apiserver", ComponentFacts{Component: DefaultComponents[1], Bootstrap: &BootstrapFacts{Owner: btypes.OwnerKubeletStatic}, SelfHosted: []SelfHostedFacts{ready}}, ""},
		{"bootstrap gone", ComponentFacts{Component: api, SelfHosted: []SelfHostedFacts{ready}}, ""},
		{"bootstrap terminating", ComponentFacts{Component: api, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerReleased, Terminating: true}, SelfHosted: []SelfHostedFacts{ready}}, ""},
		{"bootstrap not adopted", ComponentFacts{Component: api, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerBootlet}, SelfHosted: []SelfHostedFacts{ready}}, ""},
		{"nothing ready", ComponentFacts{Component: api, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerKubeletStatic}, SelfHosted: []SelfHostedFacts{{Name: "n", Running: true}}}, ""},
		{"a restored pod with no process is skipped", ComponentFacts{Component: api, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerKubeletStatic}, SelfHosted: []SelfHostedFacts{{Name: "old", Running: true, Ready: true, NoProcess: true}, ready}}, "a"},
		{"only a restored pod", ComponentFacts{Component: api, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerKubeletStatic}, SelfHosted: []SelfHostedFacts{{Name: "old", Running: true, Ready: true, NoProcess: true}}}, ""},
	}
	for _, tc := range cases {
		got := ""
		if p := servingCandidate(tc.c); p != nil {
			got = p.Name
		}
		if got != tc.want {
			t.Errorf("%s: candidate %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestNeedsProcessCheck(t *testing.T) {
	adopted := &BootstrapFacts{Owner: btypes.OwnerKubeletStatic}
	ready := SelfHostedFacts{Name: "a", Running: true, Ready: true}
	cases := []struct {
		name string
		b    *BootstrapFacts
		p    SelfHostedFacts
		want bool
	}{
		{"Ready pod, adopted bootstrap pod: it could take over", adopted, ready, true},
		{"not Ready", adopted, SelfHostedFacts{Running: true}, false},
		{"not Running", adopted, SelfHostedFacts{Ready: true}, false},
		{"deleting", adopted, SelfHostedFacts{Running: true, Ready: true, Deleting: true}, false},
		{"no bootstrap pod: nothing to hand over", nil, ready, false},
		{"bootstrap pod not adopted", &BootstrapFacts{Owner: btypes.OwnerBootlet}, ready, false},
		{"bootstrap pod being withdrawn", &BootstrapFacts{Owner: btypes.OwnerKubeletStatic, Terminating: true}, ready, false},
	}
	for _, tc := range cases {
		if got := NeedsProcessCheck(ComponentFacts{Component: DefaultComponents[1], Bootstrap: tc.b}, tc.p); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRunsOnThisNode(t *testing.T) {
	// A status etcd kept: running containers whose IDs no process on this
	// node has (and no pod cgroup of that UID exists).
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "0b7c3a1e-1111-2222-3333-444455556666"}, Status: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{
		{ContainerID: "containerd://4f1d9c2b7e6a5d4c3b2a19f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
		{ContainerID: "", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
	}}}
	if runsOnThisNode(p) {
		t.Error("a restored status with gone containers: want no process on this node")
	}
	if runsOnThisNode(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u"}}) {
		t.Error("no container status: want no process")
	}
}

func TestSelfHostedFacts(t *testing.T) {
	now := metav1.Now()
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "u"}, Status: v1.PodStatus{Phase: v1.PodRunning,
		Conditions: []v1.PodCondition{{Type: v1.ContainersReady, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionTrue}}}}
	if f := selfHostedFacts(p); !f.Running || !f.Ready || f.Deleting || f.Name != "a" || f.UID != "u" {
		t.Errorf("%+v", f)
	}
	p.DeletionTimestamp = &now
	p.Status.Conditions[1].Status = v1.ConditionFalse
	p.Status.Phase = v1.PodPending
	if f := selfHostedFacts(p); f.Running || f.Ready || !f.Deleting {
		t.Errorf("%+v", f)
	}
	if bootstrapFacts(nil) != nil {
		t.Error("nil pod: want nil facts")
	}
	b := bootstrapFacts(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "b", DeletionTimestamp: &now, Annotations: map[string]string{btypes.AnnotationOwner: "kubelet-static"}}})
	if b.UID != "b" || !b.Terminating || b.Owner != btypes.OwnerKubeletStatic {
		t.Errorf("%+v", b)
	}
}

func TestAdvertiseAddressAndEndpoints(t *testing.T) {
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Command: []string{"kube-apiserver", "--advertise-address=10.0.0.7", "--secure-port=6443"}}}}}
	if got := advertiseAddress(p); got != "10.0.0.7" {
		t.Errorf("advertiseAddress %q", got)
	}
	if got := advertiseAddress(&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Args: []string{"--advertise-address=::1"}}}}}); got != "::1" {
		t.Errorf("advertiseAddress from args %q", got)
	}
	if got := advertiseAddress(&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Command: []string{"kube-apiserver"}}}}}); got != "" {
		t.Errorf("no flag: %q", got)
	}
	//lint:ignore SA1019 default/kubernetes is still written as Endpoints by the apiserver
	ep := &v1.Endpoints{Subsets: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{{IP: "10.0.0.8"}, {IP: "10.0.0.7"}}, NotReadyAddresses: []v1.EndpointAddress{{IP: "10.0.0.9"}}}}}
	for ip, want := range map[string]bool{"10.0.0.7": true, "10.0.0.9": false, "10.0.0.1": false} {
		if endpointsList(ep, ip) != want {
			t.Errorf("endpointsList(%s) != %v", ip, want)
		}
	}
	//lint:ignore SA1019 default/kubernetes is still written as Endpoints by the apiserver
	if endpointsList(nil, "10.0.0.7") || endpointsList(&v1.Endpoints{}, "10.0.0.7") {
		t.Error("empty endpoints list nothing")
	}
}

func TestDecideLabel(t *testing.T) {
	const own = "192.0.2.11:6443"
	cases := []struct {
		name  string
		f     LabelFacts
		label bool
		why   string
	}{
		{"labelled already", LabelFacts{Labelled: true, Own: own}, true, "labelled already"},
		{"no bootstrap apiserver here", LabelFacts{}, true, "nothing to wait for"},
		{"its own bootstrap apiserver serves", LabelFacts{Own: own, OwnServes: true}, true, "bootstrap apiserver serves (192.0.2.11:6443/readyz)"},
		// The API answered through another master's VIP; this node's
		// bootstrap apiserver still starts.
		{"its own bootstrap apiserver does not serve yet", LabelFacts{Own: own, OwnWhy: "connection refused", Waited: time.Minute}, false, "waiting for this node's bootstrap apiserver to serve before labelling (192.0.2.11:6443/readyz: connection refused)"},
		{"just under the bound", LabelFacts{Own: own, OwnWhy: "x", Waited: ownAPIServerBound - time.Second}, false, "waiting"},
		{"at the bound: labelled anyway, saying why", LabelFacts{Own: own, OwnWhy: "answered 503", Waited: ownAPIServerBound}, true, "did not serve within 3m0s (192.0.2.11:6443/readyz: answered 503); labelling anyway"},
	}
	for _, tc := range cases {
		d := DecideLabel(tc.f)
		if d.Label != tc.label || !strings.Contains(d.Why, tc.why) {
			t.Errorf("%s: got %+v, want label=%v why containing %q", tc.name, d, tc.label, tc.why)
		}
	}
}

func TestOwnAddress(t *testing.T) {
	pod := func(args ...string) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Command: append([]string{"kube-apiserver"}, args...)}}}}
	}
	for _, tc := range []struct {
		pod  *v1.Pod
		want string
	}{
		{pod("--advertise-address=192.0.2.11", "--secure-port=6444"), "192.0.2.11:6444"},
		{pod("--advertise-address=192.0.2.11"), "192.0.2.11:6443"},
		{pod("--advertise-address=2001:db8::1", "--secure-port=6443"), "[2001:db8::1]:6443"},
		{pod("--secure-port=6443"), ""},
	} {
		if got := ownAddress(tc.pod); got != tc.want {
			t.Errorf("ownAddress(%v) = %q, want %q", tc.pod.Spec.Containers[0].Command, got, tc.want)
		}
	}
}
