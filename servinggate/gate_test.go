package servinggate

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/bootlet/bootlet/manifests"
	btypes "github.com/bootlet/bootlet/types"
)

const node = "node1"

// apiserverPod is a self-hosted apiserver pod of this node as the DaemonSet
// makes it: host network, the gate, a readiness probe on 6443, a running
// container and the kubelet's own conditions.
func apiserverPod(name string, uid types.UID) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: uid},
		Spec: v1.PodSpec{NodeName: node, HostNetwork: true,
			ReadinessGates: []v1.PodReadinessGate{{ConditionType: btypes.PodConditionServing}},
			Containers: []v1.Container{{Name: "kube-apiserver", ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
				Host: "10.0.0.1", Path: "/readyz", Port: intstr.FromInt32(6443), Scheme: v1.URISchemeHTTPS}}}}}},
		Status: v1.PodStatus{PodIP: "10.0.0.1",
			Conditions: []v1.PodCondition{
				{Type: v1.ContainersReady, Status: v1.ConditionTrue},
				{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: "ReadinessGatesNotReady"}},
			ContainerStatuses: []v1.ContainerStatus{{Name: "kube-apiserver", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}},
	}
}

type env struct {
	t      *testing.T
	cs     *fake.Clientset
	gate   *Gate
	serves map[types.UID]bool
	asked  map[types.UID]int
	events []string
}

func (e *env) NodeEvent(_, _, reason, msg string) { e.events = append(e.events, reason+": "+msg) }

func newEnv(t *testing.T, verdicts *fixedVerdicts, pods ...*v1.Pod) *env {
	e := &env{t: t, serves: map[types.UID]bool{}, asked: map[types.UID]int{}}
	objs := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		objs = append(objs, p)
	}
	e.cs = fake.NewClientset(objs...)
	cfg := Config{NodeName: node, Client: e.cs, Events: e,
		Serves: func(_ context.Context, p *v1.Pod) (bool, string) {
			e.asked[p.UID]++
			if e.serves[p.UID] {
				return true, ""
			}
			return false, "its own listener on port 6443 did not answer the router's probe of it with 200"
		}}
	if verdicts != nil {
		cfg.Verdicts = verdicts
	}
	e.gate = New(cfg)
	return e
}

// condition is the gate's condition in the stored pod ("" none).
func (e *env) condition(name string) v1.ConditionStatus {
	p, err := e.cs.CoreV1().Pods("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == btypes.PodConditionServing {
			return c.Status
		}
	}
	return ""
}

// patches are the status patches made so far, by pod name.
func (e *env) patches() map[string]int {
	out := map[string]int{}
	for _, a := range e.cs.Actions() {
		if pa, ok := a.(k8stesting.PatchAction); ok {
			if a.GetSubresource() != "status" || pa.GetPatchType() != types.StrategicMergePatchType {
				e.t.Errorf("patch of %s/%s (%s), want a strategic-merge patch of pods/status", a.GetResource().Resource, a.GetSubresource(), pa.GetPatchType())
			}
			if !strings.Contains(string(pa.GetPatch()), `"uid"`) {
				e.t.Errorf("patch %s has no UID precondition", pa.GetPatch())
			}
			out[pa.GetName()]++
		}
	}
	return out
}

// TestGateFollowsOwnProcess: a new pod's gate is False (with why) while its
// own process does not serve, True once it does, and a True is set False
// only after FailureThreshold failed checks in a row. Each change is one
// patch, and nothing is patched while nothing changes. Pods without the
// gate, outside the host network, on another node or being deleted are
// never patched or asked.
func TestGateFollowsOwnProcess(t *testing.T) {
	ctx := context.Background()
	noGate := apiserverPod("kube-scheduler-x", "u-sched")
	noGate.Spec.ReadinessGates = nil
	podNet := apiserverPod("pod-network", "u-podnet")
	podNet.Spec.HostNetwork = false
	other := apiserverPod("kube-apiserver-other", "u-other")
	other.Spec.NodeName = "node2"
	deleting := apiserverPod("kube-apiserver-old", "u-old")
	deleting.DeletionTimestamp, deleting.Finalizers = &metav1.Time{}, []string{"x"}
	deleting.Status.Conditions = append(deleting.Status.Conditions, v1.PodCondition{Type: btypes.PodConditionServing, Status: v1.ConditionTrue})
	e := newEnv(t, nil, apiserverPod("kube-apiserver-new", "u-new"), noGate, podNet, other, deleting)

	if !e.gate.Round(ctx) {
		t.Error("a pod that does not serve yet is not pending")
	}
	if got := e.condition("kube-apiserver-new"); got != v1.ConditionFalse {
		t.Fatalf("not serving yet: condition %q, want False", got)
	}
	e.gate.Round(ctx)
	if got := e.patches()["kube-apiserver-new"]; got != 1 {
		t.Errorf("%d patches while nothing changed, want 1", got)
	}
	e.serves["u-new"] = true
	if e.gate.Round(ctx) {
		t.Error("a pod whose gate is True is still pending")
	}
	if got := e.condition("kube-apiserver-new"); got != v1.ConditionTrue {
		t.Fatalf("serving: condition %q, want True", got)
	}
	e.gate.Round(ctx)
	e.serves["u-new"] = false
	for i := 1; i < FailureThreshold; i++ {
		e.gate.Round(ctx)
		if got := e.condition("kube-apiserver-new"); got != v1.ConditionTrue {
			t.Fatalf("after %d failed checks: condition %q, want True still", i, got)
		}
	}
	e.gate.Round(ctx)
	if got := e.condition("kube-apiserver-new"); got != v1.ConditionFalse {
		t.Fatalf("after %d failed checks: condition %q, want False", FailureThreshold, got)
	}
	if got := e.patches(); len(got) != 1 || got["kube-apiserver-new"] != 3 {
		t.Errorf("patches %v, want 3 of kube-apiserver-new alone (False, True, False)", got)
	}
	for _, uid := range []types.UID{"u-sched", "u-podnet", "u-other", "u-old"} {
		if e.asked[uid] > 0 {
			t.Errorf("pod %s was asked whether it serves", uid)
		}
	}
	// The kubelet's conditions are left as they are.
	p, _ := e.cs.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-new", metav1.GetOptions{})
	if len(p.Status.Conditions) != 3 || p.Status.Conditions[0].Type != v1.ContainersReady || p.Status.Conditions[1].Reason != "ReadinessGatesNotReady" {
		t.Errorf("conditions %+v: the kubelet's were changed", p.Status.Conditions)
	}
}

// TestGateStaleTrueAfterReboot: a True kept from before a reboot becomes
// False once the own process fails FailureThreshold checks, and a pod whose
// status names no running container is not asked (nothing to ask) but
// counts as not serving.
func TestGateStaleTrueAfterReboot(t *testing.T) {
	p := apiserverPod("kube-apiserver-a", "u-a")
	p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: btypes.PodConditionServing, Status: v1.ConditionTrue})
	p.Status.ContainerStatuses[0].State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	e := newEnv(t, nil, p)
	for i := 0; i < FailureThreshold; i++ {
		e.gate.Round(context.Background())
	}
	if got := e.condition("kube-apiserver-a"); got != v1.ConditionFalse {
		t.Errorf("stale True after %d rounds without a running container: %q, want False", FailureThreshold, got)
	}
	if e.asked["u-a"] != 0 {
		t.Errorf("asked %d times with no running container", e.asked["u-a"])
	}
}

// fixedVerdicts is a router whose verdict of every listener on 6443 is
// the same (the pod's processes cannot be found in a test's /proc).
type fixedVerdicts struct {
	mu             sync.Mutex
	known, serving bool
}

func (f *fixedVerdicts) ServedBy(port int, _ func(string) bool) (bool, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return port == 6443 && f.known, port == 6443 && f.serving
}

func (f *fixedVerdicts) set(known, serving bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.known, f.serving = known, serving
}

// TestRecheckAsksTheRouterAlone: between full rounds, a waiting pod turns
// True as soon as the router's verdict says its own listener serves,
// without a list or a probe of fresh connections; with no verdict, nothing
// changes.
func TestRecheckAsksTheRouterAlone(t *testing.T) {
	ctx := context.Background()
	v := &fixedVerdicts{}
	e := newEnv(t, v, apiserverPod("kube-apiserver-new", "u-new"))
	if !e.gate.Round(ctx) {
		t.Fatal("not pending")
	}
	lists := func() int {
		n := 0
		for _, a := range e.cs.Actions() {
			if a.GetVerb() == "list" {
				n++
			}
		}
		return n
	}
	before, asked := lists(), e.asked["u-new"]
	for _, known := range []bool{false, true} {
		v.set(known, false)
		if !e.gate.Recheck(ctx) {
			t.Errorf("verdict known=%v serving=false: not pending any more", known)
		}
		if got := e.condition("kube-apiserver-new"); got != v1.ConditionFalse {
			t.Errorf("verdict known=%v serving=false: condition %q, want False still", known, got)
		}
	}
	v.set(true, true)
	if e.gate.Recheck(ctx) {
		t.Error("still pending after its own listener serves")
	}
	if got := e.condition("kube-apiserver-new"); got != v1.ConditionTrue {
		t.Errorf("the router's verdict says it serves: condition %q, want True", got)
	}
	if lists() != before || e.asked["u-new"] != asked {
		t.Errorf("the recheck listed (%d→%d) or probed (%d→%d)", before, lists(), asked, e.asked["u-new"])
	}
}

// TestGateForbidden: a Role without the status patch (a cluster rendered
// before the gate) is reported once, with what to do.
func TestGateForbidden(t *testing.T) {
	e := newEnv(t, nil, apiserverPod("kube-apiserver-new", "u-new"))
	e.cs.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods/status"}, "kube-apiserver-new", nil)
	})
	e.serves["u-new"] = true
	for i := 0; i < 3; i++ {
		if !e.gate.Round(context.Background()) {
			t.Error("a failed patch leaves the pod not pending")
		}
	}
	if len(e.events) != 1 || !strings.Contains(e.events[0], "bootlet-checkpointer-rbac.yaml") {
		t.Errorf("events %q, want one naming the Role's file", e.events)
	}
}

// TestGateCallsWithinRBAC: every call the gate makes is one the
// checkpointer's Role grants in kube-system (the gate uses its identity),
// and the file its Forbidden event names is that Role's.
func TestGateCallsWithinRBAC(t *testing.T) {
	if rbacFile != manifests.CheckpointerRBACFile {
		t.Errorf("rbacFile %q, want %q", rbacFile, manifests.CheckpointerRBACFile)
	}
	e := newEnv(t, nil, apiserverPod("kube-apiserver-new", "u-new"))
	e.gate.Round(context.Background())
	e.serves["u-new"] = true
	e.gate.Round(context.Background())
	seen := map[string]bool{}
	for _, a := range e.cs.Actions() {
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		call := a.GetVerb() + " " + a.GetResource().Group + "/" + res
		seen[call] = true
		ok := false
		for _, r := range manifests.CheckpointerRules() {
			ok = ok || slices.Contains(r.APIGroups, a.GetResource().Group) && slices.Contains(r.Resources, res) && slices.Contains(r.Verbs, a.GetVerb())
		}
		if !ok || a.GetNamespace() != "kube-system" {
			t.Errorf("the gate called %s in %q, which the Role does not grant", call, a.GetNamespace())
		}
	}
	for _, want := range []string{"list /pods", "patch /pods/status"} {
		if !seen[want] {
			t.Errorf("never called %s (calls %v)", want, seen)
		}
	}
}

// TestRunRechecksWhilePending: Run lists once a Period, and while a pod
// waits to serve asks the router every Recheck: the gate turns True soon
// after the router's verdict does, without waiting for the next full round.
func TestRunRechecksWhilePending(t *testing.T) {
	v := &fixedVerdicts{}
	e := newEnv(t, v, apiserverPod("kube-apiserver-new", "u-new"))
	e.gate.cfg.Period, e.gate.cfg.Recheck = time.Hour, 10*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.gate.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor := func(want v1.ConditionStatus) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for e.condition("kube-apiserver-new") != want {
			if time.Now().After(deadline) {
				t.Fatalf("condition %q, want %q", e.condition("kube-apiserver-new"), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(v1.ConditionFalse)
	v.set(true, true)
	waitFor(v1.ConditionTrue)
}
