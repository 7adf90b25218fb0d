package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
	"github.com/bootlet/bootlet/upgrade/cvclient"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func mt(t time.Time) metav1.Time   { return metav1.NewTime(t) }
func mtp(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }
func cond(typ, status, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg, LastTransitionTime: mt(t0)}
}

var (
	apiserverStep = &btypes.UpgradeStep{Component: "kube-apiserver", Node: "m1", From: "v1.36.3", To: "v1.37.2", Began: mtp(t0)}
	upgrading     = []metav1.Condition{
		cond(upgrade.Progressing, "True", "Upgrading", "kube-apiserver on m1: v1.36.3 -> v1.37.2 (3 steps to go)"),
		cond(upgrade.Available, "True", "AsExpected", ""),
		cond(upgrade.Failing, "False", "AsExpected", ""),
	}
	done = []metav1.Condition{
		cond(upgrade.Progressing, "False", "Done", "the cluster runs v1.37.2"),
		cond(upgrade.Available, "True", "AsExpected", ""),
		cond(upgrade.Failing, "False", "AsExpected", ""),
	}
	rolledBack = []metav1.Condition{
		cond(upgrade.Progressing, "False", "Stopped", "stopped with 3 steps to go"),
		cond(upgrade.Available, "True", "AsExpected", ""),
		cond(upgrade.Failing, "True", "RolledBack", "kube-apiserver on m1 was not Ready in 5m0s: put back"),
	}
)

func withStatus(st btypes.ClusterVersionStatus) *btypes.ClusterVersion {
	return &btypes.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: btypes.ClusterVersionName, Generation: 2},
		Spec: btypes.ClusterVersionSpec{DesiredVersion: "v1.37.2"}, Status: st}
}

func TestChanges(t *testing.T) {
	running := btypes.ClusterVersionStatus{ObservedGeneration: 2, Step: "kube-apiserver on m1: v1.36.3 -> v1.37.2", InFlight: apiserverStep, Conditions: upgrading}
	later := running
	later.InFlight = &btypes.UpgradeStep{Component: "kube-apiserver", Node: "m1", From: "v1.36.3", To: "v1.37.2", Began: mtp(t0.Add(time.Minute))}
	later.Conditions = append([]metav1.Condition(nil), upgrading...)
	later.Conditions[1].LastTransitionTime = mt(t0.Add(time.Hour))
	back := btypes.ClusterVersionStatus{ObservedGeneration: 2, Step: running.Step, RollingBack: apiserverStep, Conditions: rolledBack}
	tests := []struct {
		name      string
		prev, cur *btypes.ClusterVersion
		want      []string
	}{
		{"first read: every set field", nil, withStatus(running), []string{
			"the controller observes generation 2",
			"step: kube-apiserver on m1: v1.36.3 -> v1.37.2",
			"in flight: kube-apiserver on m1: v1.36.3 -> v1.37.2",
			"Progressing=True Upgrading: kube-apiserver on m1: v1.36.3 -> v1.37.2 (3 steps to go)",
			"Available=True AsExpected",
			"Failing=False AsExpected",
		}},
		{"first read of an empty status", nil, withStatus(btypes.ClusterVersionStatus{}), nil},
		{"nothing moved", withStatus(running), withStatus(running), nil},
		{"a new began time or transition time alone is no news", withStatus(running), withStatus(later), nil},
		{"rolled back", withStatus(running), withStatus(back), []string{
			"in flight: none (was kube-apiserver on m1: v1.36.3 -> v1.37.2)",
			"rolling back: kube-apiserver on m1: v1.36.3 -> v1.37.2",
			"Progressing=False Stopped: stopped with 3 steps to go",
			"Failing=True RolledBack: kube-apiserver on m1 was not Ready in 5m0s: put back",
		}},
		{"done", withStatus(running), withStatus(btypes.ClusterVersionStatus{ObservedGeneration: 2, Conditions: done}), []string{
			"step: <none>",
			"in flight: none (was kube-apiserver on m1: v1.36.3 -> v1.37.2)",
			"Progressing=False Done: the cluster runs v1.37.2",
		}},
		{"a new generation, a condition gone", withStatus(running), withStatus(btypes.ClusterVersionStatus{ObservedGeneration: 3, Step: running.Step, InFlight: apiserverStep, Conditions: upgrading[:2]}), []string{
			"the controller observes generation 3",
			"Failing: no longer reported",
		}},
		{"another step in flight", withStatus(running), withStatus(btypes.ClusterVersionStatus{ObservedGeneration: 2, Step: "kube-apiserver on m2: v1.36.3 -> v1.37.2", Conditions: upgrading,
			InFlight: &btypes.UpgradeStep{Component: "kube-apiserver", Node: "m2", From: "v1.36.3", To: "v1.37.2"}}), []string{
			"step: kube-apiserver on m2: v1.36.3 -> v1.37.2",
			"in flight: kube-apiserver on m2: v1.36.3 -> v1.37.2",
		}},
	}
	for _, tt := range tests {
		got := changes(tt.prev, tt.cur)
		if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

func TestOutcome(t *testing.T) {
	refused := []metav1.Condition{
		cond(upgrade.Progressing, "False", "Stopped", "stopped with 7 steps to go"),
		cond(upgrade.Failing, "True", upgrade.ReasonImagesMissing, "refused: node w1 lacks registry.k8s.io/kube-proxy:v1.37.2"),
	}
	failingButProgressing := []metav1.Condition{upgrading[0], cond(upgrade.Failing, "True", "RolledBack", "old news")}
	tests := []struct {
		name     string
		st       btypes.ClusterVersionStatus
		gen      int64
		wantDone bool
		wantErr  string
	}{
		{"no status yet", btypes.ClusterVersionStatus{}, 2, false, ""},
		{"an older generation's done is not this one's", btypes.ClusterVersionStatus{ObservedGeneration: 1, Conditions: done}, 2, false, ""},
		{"an older generation's failure is not this one's", btypes.ClusterVersionStatus{ObservedGeneration: 1, Conditions: rolledBack}, 2, false, ""},
		{"upgrading", btypes.ClusterVersionStatus{ObservedGeneration: 2, Conditions: upgrading}, 2, false, ""},
		{"done", btypes.ClusterVersionStatus{ObservedGeneration: 2, Conditions: done}, 2, true, ""},
		{"done, a later generation observed", btypes.ClusterVersionStatus{ObservedGeneration: 3, Conditions: done}, 2, true, ""},
		{"rolled back", btypes.ClusterVersionStatus{ObservedGeneration: 2, Conditions: rolledBack}, 2, true, "stopped, RolledBack: kube-apiserver on m1 was not Ready in 5m0s: put back; once the cause is fixed, `bootlet upgrade apply --to v1.37.2` tries again"},
		{"refused", btypes.ClusterVersionStatus{ObservedGeneration: 2, Conditions: refused}, 2, true, "stopped, ImagesMissing: refused: node w1 lacks"},
		{"failing while still progressing: wait", btypes.ClusterVersionStatus{ObservedGeneration: 2, Conditions: failingButProgressing}, 2, false, ""},
		{"done without a Failing condition is not trusted", btypes.ClusterVersionStatus{ObservedGeneration: 2, Conditions: done[:1]}, 2, false, ""},
	}
	for _, tt := range tests {
		d, err := outcome(withStatus(tt.st), tt.gen)
		if d != tt.wantDone || (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%s: done %v, err %v; want %v, %q", tt.name, d, err, tt.wantDone, tt.wantErr)
		}
	}
}

func TestWriteStatus(t *testing.T) {
	cv := withStatus(btypes.ClusterVersionStatus{
		ObservedGeneration: 2,
		Current:            btypes.Versions{Kubernetes: "v1.36.3", Etcd: "3.6.8", CoreDNS: "v1.14.2"},
		Step:               "kube-apiserver on m1: v1.36.3 -> v1.37.2",
		InFlight:           apiserverStep,
		Conditions:         upgrading,
		Components: []btypes.ComponentVersion{
			{Component: "coredns", Version: "v1.14.2"},
			{Component: "kube-apiserver", Node: "m1", Version: "v1.36.3"},
		},
		History: []btypes.UpgradeHistory{
			{Version: "v1.37.2", State: "Partial", StartedTime: mt(t0)},
			{Version: "v1.36.3", State: "Completed", StartedTime: mt(t0.Add(-48 * time.Hour)), CompletionTime: mtp(t0.Add(-47 * time.Hour)), Message: "the cluster runs v1.36.3"},
		},
	})
	cv.Spec.Retry = 1
	var b bytes.Buffer
	if err := WriteStatus(&b, cv, t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	want := `Desired:      v1.37.2 (retry 1)
Generation:   2 (observed by the controller: 2)
Current:      Kubernetes v1.36.3, etcd 3.6.8, CoreDNS v1.14.2
Step:         kube-apiserver on m1: v1.36.3 -> v1.37.2
In flight:    kube-apiserver on m1: v1.36.3 -> v1.37.2, began 2026-11-29T12:00:00Z (3m ago)
Rolling back: <none>

Conditions:
  TYPE          STATUS   REASON       AGE   MESSAGE
  Progressing   True     Upgrading    3m    kube-apiserver on m1: v1.36.3 -> v1.37.2 (3 steps to go)
  Available     True     AsExpected   3m    
  Failing       False    AsExpected   3m    

Components:
  COMPONENT        NODE   VERSION
  coredns          -      v1.14.2
  kube-apiserver   m1     v1.36.3

History:
  VERSION   STATE       STARTED                COMPLETED              MESSAGE
  v1.37.2   Partial     2026-11-29T12:00:00Z   -                      
  v1.36.3   Completed   2026-11-27T12:00:00Z   2026-11-27T13:00:00Z   the cluster runs v1.36.3
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}

	b.Reset()
	if err := WriteStatus(&b, &btypes.ClusterVersion{Spec: btypes.ClusterVersionSpec{DesiredVersion: "v1.37.2"}}, t0); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"observed by the controller: not yet", "Kubernetes <unknown>", "Step:         <none>", "Conditions:\n  <none>", "Components:\n  <none>", "History:\n  <none>"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("a status the controller never wrote lacks %q:\n%s", s, b.String())
		}
	}
}

func TestTransient(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://10.0.0.1:6443", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	gr := schema.GroupResource{Group: "bootlet.dev", Resource: "clusterversions"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"connection reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"a request timed out", &url.Error{Op: "Get", URL: "https://x", Err: context.DeadlineExceeded}, true},
		{"the server timed out", apierrors.NewServerTimeout(gr, "get", 1), true},
		{"service unavailable", apierrors.NewServiceUnavailable("the apiserver is starting"), true},
		{"too many requests", apierrors.NewTooManyRequests("later", 1), true},
		{"unexpected EOF", fmt.Errorf("get: %w", io.ErrUnexpectedEOF), true},
		{"forbidden", apierrors.NewForbidden(gr, "cluster", errors.New("no")), false},
		{"not found", apierrors.NewNotFound(gr, "cluster"), false},
		{"interrupted", context.Canceled, false},
		{"a certificate refused", errors.New("x509: certificate signed by unknown authority"), false},
	}
	for _, tt := range tests {
		if got := transient(tt.err); got != tt.want {
			t.Errorf("%s (%v): %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// reply is one read of the object as the test's controller answers it:
// a status, or an error.
type reply struct {
	status btypes.ClusterVersionStatus
	err    error
}

func fakeDynamic() *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{cvclient.Resource: btypes.ClusterVersionKind + "List"})
}

// controller makes dyn act as the apiserver and the upgrade controller:
// each write of the spec bumps the generation, and each read after the
// first write answers the next of replies (the last one again once they
// run out). It returns how many reads were answered.
func controller(t *testing.T, dyn *dynamicfake.FakeDynamicClient, replies []reply) *int {
	t.Helper()
	armed, reads := false, 0
	bump := func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "" {
			u := a.(interface{ GetObject() runtime.Object }).GetObject().(*unstructured.Unstructured)
			u.SetGeneration(u.GetGeneration() + 1)
			armed = true
		}
		return false, nil, nil
	}
	dyn.PrependReactor("create", cvclient.Resource.Resource, bump)
	dyn.PrependReactor("update", cvclient.Resource.Resource, bump)
	dyn.PrependReactor("get", cvclient.Resource.Resource, func(a clienttesting.Action) (bool, runtime.Object, error) {
		if !armed {
			return false, nil, nil
		}
		r := replies[min(reads, len(replies)-1)]
		reads++
		if r.err != nil {
			return true, nil, r.err
		}
		obj, err := dyn.Tracker().Get(cvclient.Resource, "", btypes.ClusterVersionName)
		if err != nil {
			return true, nil, err
		}
		var cv btypes.ClusterVersion
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, &cv); err != nil {
			return true, nil, err
		}
		cv.Status = r.status
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cv)
		if err != nil {
			return true, nil, err
		}
		return true, &unstructured.Unstructured{Object: u}, nil
	})
	return &reads
}

func testFollower(dyn *dynamicfake.FakeDynamicClient, w *bytes.Buffer) follower {
	return follower{dyn: dyn, w: w, interval: time.Millisecond, outage: time.Hour, now: func() time.Time { return t0 }}
}

func TestWait(t *testing.T) {
	ctx := context.Background()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	stale := btypes.ClusterVersionStatus{ObservedGeneration: 1, Conditions: done}
	running := btypes.ClusterVersionStatus{ObservedGeneration: 2, Step: "kube-apiserver on m1: v1.36.3 -> v1.37.2", InFlight: apiserverStep, Conditions: upgrading}
	finished := btypes.ClusterVersionStatus{ObservedGeneration: 2, Conditions: done}
	back := btypes.ClusterVersionStatus{ObservedGeneration: 2, Step: running.Step, Conditions: rolledBack}
	tests := []struct {
		name    string
		replies []reply
		outage  time.Duration
		timeout time.Duration
		wantErr string
		want    []string // lines, in order, each a prefix
	}{
		{"done, through an apiserver hand-over", []reply{{status: stale}, {status: running}, {status: running}, {err: refused}, {err: refused}, {status: running}, {status: finished}}, time.Hour, 0, "", []string{
			"12:00:00 the controller observes generation 1",
			"12:00:00 Progressing=False Done",
			"12:00:00 Available=True AsExpected",
			"12:00:00 Failing=False AsExpected",
			"12:00:00 the controller observes generation 2",
			"12:00:00 step: kube-apiserver on m1",
			"12:00:00 in flight: kube-apiserver on m1",
			"12:00:00 Progressing=True Upgrading",
			"12:00:00 the API answers again after 0s (",
			"12:00:00 step: <none>",
			"12:00:00 in flight: none",
			"12:00:00 Progressing=False Done",
		}},
		{"rolled back", []reply{{status: running}, {status: back}}, time.Hour, 0, "the upgrade to v1.37.2 stopped, RolledBack", []string{
			"12:00:00 the controller observes generation 2",
			"12:00:00 step: kube-apiserver on m1",
			"12:00:00 in flight: kube-apiserver on m1",
			"12:00:00 Progressing=True Upgrading",
			"12:00:00 Available=True AsExpected",
			"12:00:00 Failing=False AsExpected",
			"12:00:00 in flight: none",
			"12:00:00 Progressing=False Stopped",
			"12:00:00 Failing=True RolledBack",
		}},
		{"the API away too long", []reply{{status: running}, {err: refused}}, 0, 0, "the API has not answered for 0s", nil},
		{"a refusal that is not transient", []reply{{err: apierrors.NewForbidden(cvclient.Resource.GroupResource(), "cluster", errors.New("no"))}}, time.Hour, 0, "reading the ClusterVersion: ", nil},
		{"timed out", []reply{{status: running}}, time.Hour, 30 * time.Millisecond, "timed out after 30ms waiting for the upgrade to v1.37.2, at step kube-apiserver on m1: v1.36.3 -> v1.37.2", nil},
		{"timed out before the controller took it", []reply{{status: stale}}, time.Hour, 30 * time.Millisecond, "which the controller has not taken yet (it observes generation 1, not 2)", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dyn := fakeDynamic()
			controller(t, dyn, tt.replies)
			// Generation 2, as after a changed desired version: the
			// second write goes through the tracker, since SetDesired's
			// own read would take the controller's first reply.
			if _, err := cvclient.SetDesired(ctx, dyn, "v1.36.3", true); err != nil {
				t.Fatal(err)
			}
			if err := setDesired(dyn, "v1.37.2"); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			f := testFollower(dyn, &out)
			f.outage = tt.outage
			err := f.wait(ctx, "v1.37.2", 2, tt.timeout)
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err %v, want %q", err, tt.wantErr)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if tt.want == nil {
				return
			}
			if len(lines) != len(tt.want) {
				t.Fatalf("printed %d lines, want %d:\n%s", len(lines), len(tt.want), out.String())
			}
			for i, l := range lines {
				if !strings.HasPrefix(l, tt.want[i]) {
					t.Errorf("line %d: %q, want %q...", i+1, l, tt.want[i])
				}
			}
		})
	}
}

// setDesired writes the desired version straight into the tracker, with
// the next generation, as the apiserver would store an update.
func setDesired(dyn *dynamicfake.FakeDynamicClient, version string) error {
	obj, err := dyn.Tracker().Get(cvclient.Resource, "", btypes.ClusterVersionName)
	if err != nil {
		return err
	}
	u := obj.(*unstructured.Unstructured).DeepCopy()
	if err := unstructured.SetNestedField(u.Object, version, "spec", "desiredVersion"); err != nil {
		return err
	}
	u.SetGeneration(u.GetGeneration() + 1)
	return dyn.Tracker().Update(cvclient.Resource, u, "")
}

// cluster is one master running v1.36.3, with v1.37.2's images when
// imported: a plan that may start, else one refused for the images.
func cluster(imported bool) *fake.Clientset {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m1", Labels: map[string]string{btypes.LabelControlPlane: ""}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}, NodeInfo: v1.NodeSystemInfo{KubeletVersion: "v1.36.3"}}}
	if imported {
		for _, ref := range upgrade.NodeImages(upgrade.Releases["v1.37.2"], true) {
			node.Status.Images = append(node.Status.Images, v1.ContainerImage{Names: []string{ref}})
		}
	}
	pod := func(name, container, image string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem},
			Spec:       v1.PodSpec{NodeName: "m1", Containers: []v1.Container{{Name: container, Image: image}}},
			Status:     v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}},
		}
	}
	return fake.NewClientset(node,
		pod("etcd-m1", "etcd", "registry.k8s.io/etcd:3.6.8-0"),
		pod("kube-apiserver-m1", "kube-apiserver", "registry.k8s.io/kube-apiserver:v1.36.3"))
}

func TestApplyRefusedSetsNothing(t *testing.T) {
	ctx := context.Background()
	dyn := fakeDynamic()
	var out bytes.Buffer
	err := Apply(ctx, dyn, cluster(false), "v1.37.2", true, &out, true, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "the upgrade to v1.37.2 is refused ("+upgrade.ReasonImagesMissing+")") {
		t.Fatalf("err %v, want the refusal naming its reason", err)
	}
	if !strings.Contains(out.String(), "refused (1 reason)") || !strings.Contains(out.String(), upgrade.ReasonImagesMissing+": ") {
		t.Errorf("the plan's report is not printed:\n%s", out.String())
	}
	if _, err := cvclient.Get(ctx, dyn); !apierrors.IsNotFound(err) {
		t.Errorf("a refused upgrade set the desired version: %v", err)
	}
	if err := Apply(ctx, dyn, cluster(true), "v1.99.0", true, &out, false, 0); err == nil || !strings.Contains(err.Error(), `no release "v1.99.0"`) {
		t.Errorf("an unknown version: %v", err)
	}
}

func TestApplySetsAndWaits(t *testing.T) {
	ctx := context.Background()
	dyn := fakeDynamic()
	reads := controller(t, dyn, []reply{{status: btypes.ClusterVersionStatus{ObservedGeneration: 1, Conditions: done}}})
	var out bytes.Buffer
	if err := Apply(ctx, dyn, cluster(true), "v1.37.2", false, &out, false, 0); err != nil {
		t.Fatal(err)
	}
	if out.String() != "desired version set to v1.37.2 (generation 1)\n" || *reads != 0 {
		t.Errorf("without --wait: %q, %d reads", out.String(), *reads)
	}
	out.Reset()
	// The same version again retries: a new generation, which the
	// controller (answering generation 1 still) has not taken.
	*reads = 0
	err := Apply(ctx, dyn, cluster(true), "v1.37.2", false, &out, true, 1500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "not taken yet (it observes generation 1, not 2)") {
		t.Fatalf("a controller that never takes the retry: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if lines[0] != "desired version set to v1.37.2 (generation 2)" {
		t.Errorf("first line %q", lines[0])
	}
	stamped := regexp.MustCompile(`^\d\d:\d\d:\d\d `)
	for _, l := range lines[1:] {
		if !stamped.MatchString(l) {
			t.Errorf("a line without its time: %q", l)
		}
	}
	cv, err := cvclient.Get(ctx, dyn)
	if err != nil || cv.Spec.Retry != 1 {
		t.Errorf("the retry is not set: %+v, %v", cv, err)
	}
}

func TestStatus(t *testing.T) {
	ctx := context.Background()
	dyn := fakeDynamic()
	var out bytes.Buffer
	if err := Status(ctx, dyn, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "no upgrade was ever asked: `bootlet upgrade apply --to VERSION` sets one\n" {
		t.Errorf("no object: %q", out.String())
	}
	cv, err := cvclient.SetDesired(ctx, dyn, "v1.37.2", true)
	if err != nil {
		t.Fatal(err)
	}
	cv.Status = btypes.ClusterVersionStatus{ObservedGeneration: 1, Current: btypes.Versions{Kubernetes: "v1.36.3"}, Conditions: upgrading}
	if _, err := cvclient.UpdateStatus(ctx, dyn, cv); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := Status(ctx, dyn, &out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Desired:      v1.37.2\n", "Kubernetes v1.36.3", "Progressing   True     Upgrading"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("status lacks %q:\n%s", s, out.String())
		}
	}
	dyn.PrependReactor("get", cvclient.Resource.Resource, func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(cvclient.Resource.GroupResource(), "cluster", errors.New("no"))
	})
	if err := Status(ctx, dyn, &out); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("a forbidden read: %v", err)
	}
}
