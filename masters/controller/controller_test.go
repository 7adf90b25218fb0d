package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/bootlet/bootlet/internal/etcdapi"
	"github.com/bootlet/bootlet/masters"
	btypes "github.com/bootlet/bootlet/types"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// fakeEtcd answers Observe with members, each healthy one at its own
// endpoint, and records the member changes asked of it.
type fakeEtcd struct {
	members []etcdapi.Member
	err     error
	calls   []string
}

func (e *fakeEtcd) Observe(context.Context, []string) ([]etcdapi.Member, uint64, error) {
	if e.err != nil {
		return nil, 0, e.err
	}
	return e.members, e.members[0].ID, nil
}

func (e *fakeEtcd) EndpointOf(id uint64) string {
	for _, m := range e.members {
		if m.ID == id && m.Healthy {
			return fmt.Sprintf("https://ep-%x:2379", id)
		}
	}
	return ""
}

func (e *fakeEtcd) AddLearner(_ context.Context, ep, peer string) (uint64, error) {
	e.calls = append(e.calls, "add "+peer+" at "+ep)
	return 9, nil
}

func (e *fakeEtcd) Promote(_ context.Context, ep string, id uint64) error {
	e.calls = append(e.calls, fmt.Sprintf("promote %x at %s", id, ep))
	return nil
}

func (e *fakeEtcd) Remove(_ context.Context, ep string, id uint64) error {
	e.calls = append(e.calls, fmt.Sprintf("remove %x at %s", id, ep))
	return nil
}

func (e *fakeEtcd) MoveLeader(_ context.Context, ep string, target uint64) error {
	e.calls = append(e.calls, fmt.Sprintf("move leader to %x at %s", target, ep))
	return nil
}

func (e *fakeEtcd) Close() {}

func node(name, ip string, labelled, memberHost bool) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{}, Annotations: map[string]string{}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}}}
	if labelled {
		n.Labels[masters.Label] = ""
	}
	if memberHost {
		n.Annotations[masters.AnnotationMemberHost] = "true"
	}
	return n
}

func apiserver(node string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-" + node, Namespace: metav1.NamespaceSystem},
		Spec:   v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "kube-apiserver"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}}
}

var m1Member = etcdapi.Member{ID: 1, Name: "m1", PeerURLs: []string{"https://10.0.0.11:2380"}, Healthy: true}

func newRounds(etcd *fakeEtcd, objs ...runtime.Object) (*rounds, *fake.Clientset, *record.FakeRecorder) {
	cs := fake.NewClientset(objs...)
	rec := record.NewFakeRecorder(20)
	cfg := Config{
		EtcdAccess: func() (etcdapi.Access, error) { return etcdapi.Access{Endpoint: "https://127.0.0.1:2379"}, nil },
		DialEtcd:   func(etcdapi.Access) (Etcd, error) { return etcd, nil },
		Now:        func() time.Time { return t0 },
	}
	return &rounds{cfg: cfg, cs: cs, recorder: rec}, cs, rec
}

func condition(t *testing.T, cs *fake.Clientset, name string) *v1.NodeCondition {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range n.Status.Conditions {
		if c.Type == masters.ConditionType {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func storedRecord(t *testing.T, cs *fake.Clientset) masters.Record {
	t.Helper()
	k, err := readRecord(context.Background(), cs)
	if err != nil {
		t.Fatal(err)
	}
	return k.record
}

func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A labelled node whose daemon can start a member: the record names the
// promotion before the learner's add, which goes to a voter that
// answered; the node says it is promoting; the first-boot master is a
// master; the worker gets no condition.
func TestRoundPromotes(t *testing.T) {
	etcd := &fakeEtcd{members: []etcdapi.Member{m1Member}}
	r, cs, rec := newRounds(etcd, node("m1", "10.0.0.11", true, false), node("w1", "10.0.0.21", true, true), node("w2", "10.0.0.22", false, true), apiserver("m1"))
	r.round(context.Background())
	if want := []string{"add https://10.0.0.21:2380 at https://ep-1:2379"}; strings.Join(etcd.calls, ",") != strings.Join(want, ",") {
		t.Errorf("calls %q, want %q", etcd.calls, want)
	}
	got := storedRecord(t, cs)
	if got.Op == nil || got.Op.Kind != masters.Promote || got.Op.Node != "w1" || strings.Join(got.Masters, ",") != "m1,w1" {
		t.Errorf("record %+v", got)
	}
	if c := condition(t, cs, "w1"); c == nil || c.Reason != masters.ReasonPromoting || c.Status != v1.ConditionFalse {
		t.Errorf("w1 condition %+v", c)
	}
	if c := condition(t, cs, "m1"); c == nil || c.Reason != masters.ReasonMaster || c.Status != v1.ConditionTrue {
		t.Errorf("m1 condition %+v", c)
	}
	if c := condition(t, cs, "w2"); c != nil {
		t.Errorf("a worker got a condition: %+v", c)
	}
	if evs := events(rec); len(evs) != 2 {
		t.Errorf("events %q, want one for m1 and one for w1", evs)
	}
	// The next round waits for the learner to start: no second add, and
	// no second event for an unchanged condition.
	etcd.members = append(etcd.members, etcdapi.Member{ID: 9, PeerURLs: []string{"https://10.0.0.21:2380"}, Learner: true})
	r.round(context.Background())
	if len(etcd.calls) != 1 {
		t.Errorf("calls after the wait %q", etcd.calls)
	}
	if evs := events(rec); len(evs) != 1 || !strings.Contains(evs[0], "learner 9") {
		t.Errorf("events %q, want one saying it waits for learner 9", evs)
	}
}

// A node whose daemon cannot start a member is refused, said on the Node
// and in a Warning, and etcd is not touched.
func TestRoundRefusesWithoutAMemberHost(t *testing.T) {
	etcd := &fakeEtcd{members: []etcdapi.Member{m1Member}}
	r, cs, rec := newRounds(etcd, node("m1", "10.0.0.11", true, false), node("w1", "10.0.0.21", true, false), apiserver("m1"))
	r.round(context.Background())
	if len(etcd.calls) != 0 {
		t.Errorf("calls %q", etcd.calls)
	}
	c := condition(t, cs, "w1")
	if c == nil || c.Reason != masters.ReasonRefused || !strings.Contains(c.Message, masters.AnnotationMemberHost) {
		t.Errorf("w1 condition %+v", c)
	}
	var warned bool
	for _, e := range events(rec) {
		warned = warned || strings.HasPrefix(e, "Warning MasterRefused") && strings.Contains(e, "etcd member")
	}
	if !warned {
		t.Error("no Warning event for the refusal")
	}
	if got := storedRecord(t, cs); got.Op != nil || strings.Join(got.Masters, ",") != "m1,w1" {
		t.Errorf("record %+v", got)
	}
}

// What the controller cannot trust stops the round before any act: a
// record that does not decode, a record write that another leader beat,
// etcd that does not answer.
func TestRoundActsOnlyAfterItsRecord(t *testing.T) {
	objs := func() []runtime.Object {
		return []runtime.Object{node("m1", "10.0.0.11", true, false), node("w1", "10.0.0.21", true, true), apiserver("m1")}
	}
	t.Run("undecodable record", func(t *testing.T) {
		etcd := &fakeEtcd{members: []etcdapi.Member{m1Member}}
		bad := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: RecordName, Namespace: metav1.NamespaceSystem}, Data: map[string]string{RecordKey: "{"}}
		r, cs, _ := newRounds(etcd, append(objs(), bad)...)
		r.round(context.Background())
		if len(etcd.calls) != 0 {
			t.Errorf("acted: %q", etcd.calls)
		}
		if cm, _ := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(context.Background(), RecordName, metav1.GetOptions{}); cm.Data[RecordKey] != "{" {
			t.Errorf("the bad record was overwritten: %q", cm.Data[RecordKey])
		}
	})
	t.Run("another leader wrote first", func(t *testing.T) {
		etcd := &fakeEtcd{members: []etcdapi.Member{m1Member}}
		r, cs, _ := newRounds(etcd, objs()...)
		cs.PrependReactor("create", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewAlreadyExists(v1.Resource("configmaps"), RecordName)
		})
		r.round(context.Background())
		if len(etcd.calls) != 0 {
			t.Errorf("acted: %q", etcd.calls)
		}
	})
	t.Run("etcd does not answer", func(t *testing.T) {
		etcd := &fakeEtcd{err: errors.New("no etcd member answers")}
		r, cs, _ := newRounds(etcd, objs()...)
		r.round(context.Background())
		if len(etcd.calls) != 0 {
			t.Errorf("acted: %q", etcd.calls)
		}
		if _, err := cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(context.Background(), RecordName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a record was written while etcd did not answer: %v", err)
		}
	})
}

// The member of a master whose Node is deleted goes once it has not
// answered for DeadAfter, and not before; the record carries the clock
// across rounds (and leaders).
func TestRoundRemovesADeadMaster(t *testing.T) {
	m3 := etcdapi.Member{ID: 3, Name: "m3", PeerURLs: []string{"https://10.0.0.13:2380"}}
	m2 := etcdapi.Member{ID: 2, Name: "m2", PeerURLs: []string{"https://10.0.0.12:2380"}, Healthy: true}
	etcd := &fakeEtcd{members: []etcdapi.Member{m1Member, m2, m3}}
	r, cs, _ := newRounds(etcd, node("m1", "10.0.0.11", true, false), node("m2", "10.0.0.12", true, false), apiserver("m1"), apiserver("m2"))
	// m3 was seen labelled, and its Node is gone.
	if err := writeRecord(context.Background(), cs, keptRecord{}, masters.Record{Masters: []string{"m1", "m2", "m3"}}); err != nil {
		t.Fatal(err)
	}
	r.round(context.Background())
	if len(etcd.calls) != 0 {
		t.Fatalf("removed at once: %q", etcd.calls)
	}
	now := t0.Add(masters.DeadAfter)
	r.cfg.Now = func() time.Time { return now }
	r.round(context.Background())
	if want := "remove 3 at https://ep-1:2379"; strings.Join(etcd.calls, ",") != want {
		t.Errorf("calls %q, want %q", etcd.calls, want)
	}
}

// A labelled master whose member votes gets the label its pods select,
// and a worker that carries it by hand loses it.
func TestRoundPlacesTheControlPlane(t *testing.T) {
	etcd := &fakeEtcd{members: []etcdapi.Member{m1Member}}
	w1 := node("w1", "10.0.0.21", false, true)
	w1.Labels[btypes.LabelControlPlanePods] = ""
	r, cs, _ := newRounds(etcd, node("m1", "10.0.0.11", true, false), w1, apiserver("m1"))
	r.round(context.Background())
	get := func(name string) map[string]string {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.Labels
	}
	if _, ok := get("m1")[btypes.LabelControlPlanePods]; !ok {
		t.Errorf("m1's labels %v: no %s", get("m1"), btypes.LabelControlPlanePods)
	}
	if _, ok := get("w1")[btypes.LabelControlPlanePods]; ok {
		t.Errorf("w1's labels %v: still %s", get("w1"), btypes.LabelControlPlanePods)
	}
}

// A demoted master whose member leads etcd hands the leadership over at
// the leader's own endpoint, then is removed.
func TestRoundMovesTheLeaderFirst(t *testing.T) {
	m2 := etcdapi.Member{ID: 2, Name: "m2", PeerURLs: []string{"https://10.0.0.12:2380"}, Healthy: true}
	etcd := &fakeEtcd{members: []etcdapi.Member{m2, m1Member}} // m2 first: the fake's leader
	n2 := node("m2", "10.0.0.12", false, false)
	n2.Annotations[masters.AnnotationWithdrawn] = "true"
	r, cs, _ := newRounds(etcd, node("m1", "10.0.0.11", true, false), n2, apiserver("m1"))
	op := &masters.Op{Kind: masters.Demote, Node: "m2", Phase: masters.PhaseRemoveMember, Started: t0, PhaseSince: t0, MemberID: 2}
	if err := writeRecord(context.Background(), cs, keptRecord{}, masters.Record{Masters: []string{"m1", "m2"}, Op: op}); err != nil {
		t.Fatal(err)
	}
	r.round(context.Background())
	if want := "move leader to 1 at https://ep-2:2379"; strings.Join(etcd.calls, ",") != want {
		t.Errorf("calls %q, want %q", etcd.calls, want)
	}
}

// The control plane's disruption budgets follow the number of masters:
// render's for three, then two once one is gone; a budget a person gave
// another form is left alone.
func TestRoundKeepsTheBudgets(t *testing.T) {
	m2 := etcdapi.Member{ID: 2, Name: "m2", PeerURLs: []string{"https://10.0.0.12:2380"}, Healthy: true}
	etcd := &fakeEtcd{members: []etcdapi.Member{m1Member, m2}}
	two := intstr.FromInt32(2)
	half := intstr.FromString("50%")
	budget := func(name string, ma *intstr.IntOrString) *policyv1.PodDisruptionBudget {
		return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem}, Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ma}}
	}
	r, cs, _ := newRounds(etcd, node("m1", "10.0.0.11", true, false), node("m2", "10.0.0.12", true, false), apiserver("m1"), apiserver("m2"),
		budget("kube-controller-manager", &two), budget("kube-scheduler", &half))
	r.round(context.Background())
	get := func(name string) string {
		p, err := cs.PolicyV1().PodDisruptionBudgets(metav1.NamespaceSystem).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Spec.MinAvailable.String()
	}
	if got := get("kube-controller-manager"); got != "1" {
		t.Errorf("kube-controller-manager minAvailable %s, want 1 with two masters", got)
	}
	if got := get("kube-scheduler"); got != "50%" {
		t.Errorf("kube-scheduler minAvailable %s, want the person's 50%% kept", got)
	}
	// The number of masters unchanged, the next round reads no budget.
	cs.ClearActions()
	r.round(context.Background())
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "poddisruptionbudgets" {
			t.Errorf("a round with the same masters %s a budget", a.GetVerb())
		}
	}
}

// A cluster rendered with one master has the controller-manager and the
// scheduler as Deployments; with two masters each becomes a DaemonSet,
// and its Deployment goes only once the DaemonSet's pods are Ready on
// every master. Then the rounds read neither any more.
func TestRoundElectedWorkloadsFollowTheMasters(t *testing.T) {
	m2 := etcdapi.Member{ID: 2, Name: "m2", PeerURLs: []string{"https://10.0.0.12:2380"}, Healthy: true}
	etcd := &fakeEtcd{members: []etcdapi.Member{m1Member, m2}}
	deployment := func(name string) *appsv1.Deployment {
		labels := map[string]string{"k8s-app": name}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem, UID: types.UID("uid-" + name)},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}}}}
	}
	r, cs, _ := newRounds(etcd, node("m1", "10.0.0.11", true, false), node("m2", "10.0.0.12", true, false), apiserver("m1"), apiserver("m2"),
		deployment("kube-controller-manager"), deployment("kube-scheduler"))
	ctx := context.Background()
	// One component at a time: each one's DaemonSet, Ready, then its
	// Deployment gone, before the next one's DaemonSet is made.
	for i, name := range masters.ElectedComponents {
		r.round(ctx)
		ds, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("no DaemonSet %s after a round with two masters: %v", name, err)
		}
		if ds.Spec.Selector.MatchLabels["k8s-app"] != name {
			t.Errorf("DaemonSet %s selects %v", name, ds.Spec.Selector)
		}
		if _, err := cs.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("Deployment %s gone before its DaemonSet ran: %v", name, err)
		}
		for _, next := range masters.ElectedComponents[i+1:] {
			if _, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, next, metav1.GetOptions{}); err == nil {
				t.Errorf("DaemonSet %s made while %s's change is under way", next, name)
			}
		}
		// Not Ready yet: the Deployment stays, and the next waits.
		r.round(ctx)
		if _, err := cs.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("Deployment %s gone while its DaemonSet is not Ready: %v", name, err)
		}
		for _, next := range masters.ElectedComponents[i+1:] {
			if _, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, next, metav1.GetOptions{}); err == nil {
				t.Errorf("DaemonSet %s made while %s's DaemonSet is not Ready", next, name)
			}
		}
		ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberReady: 2}
		if _, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		r.round(ctx)
		if _, err := cs.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{}); err == nil {
			t.Errorf("Deployment %s left with its DaemonSet Ready on both masters", name)
		}
	}
	if l, _ := cs.AppsV1().Deployments(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("%d Deployments left with the DaemonSets Ready on both masters, want none", len(l.Items))
	}
	r.round(ctx)
	cs.ClearActions()
	r.round(ctx)
	for _, a := range cs.Actions() {
		if res := a.GetResource().Resource; res == "deployments" || res == "daemonsets" {
			t.Errorf("a round after the change %s %s", a.GetVerb(), res)
		}
	}
}

// One master: its Deployments stay, and are read once, not every round;
// a change begun with two masters (the DaemonSet there and Ready) ends
// with one.
func TestRoundElectedWorkloadsOneMaster(t *testing.T) {
	labels := map[string]string{"k8s-app": "kube-scheduler"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler", Namespace: metav1.NamespaceSystem, UID: "uid-s"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}}}}
	ctx := context.Background()

	r, cs, _ := newRounds(&fakeEtcd{members: []etcdapi.Member{m1Member}}, node("m1", "10.0.0.11", true, false), apiserver("m1"), dep.DeepCopy())
	r.round(ctx)
	cs.ClearActions()
	r.round(ctx)
	for _, a := range cs.Actions() {
		if res := a.GetResource().Resource; res == "deployments" || res == "daemonsets" {
			t.Errorf("a second round with one master %s %s", a.GetVerb(), res)
		}
	}
	if _, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, "kube-scheduler", metav1.GetOptions{}); err == nil {
		t.Error("a DaemonSet made with one master")
	}

	ds := masters.DaemonSetOf(dep)
	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 1, UpdatedNumberScheduled: 1, NumberReady: 1}
	r, cs, _ = newRounds(&fakeEtcd{members: []etcdapi.Member{m1Member}}, node("m1", "10.0.0.11", true, false), apiserver("m1"), dep.DeepCopy(), ds)
	r.round(ctx)
	if _, err := cs.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, "kube-scheduler", metav1.GetOptions{}); err == nil {
		t.Error("the Deployment stays beside its Ready DaemonSet once the masters are back to one")
	}
}

func TestElectedChangeUnderway(t *testing.T) {
	dep := func(name string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem}}
	}
	ds := func(name string) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem}}
	}
	for _, tc := range []struct {
		name string
		objs []runtime.Object
		want string
	}{
		{"one master's render: Deployments alone", []runtime.Object{dep("kube-controller-manager"), dep("kube-scheduler")}, ""},
		{"several masters' render: DaemonSets alone", []runtime.Object{ds("kube-controller-manager"), ds("kube-scheduler")}, ""},
		{"the scheduler between the two", []runtime.Object{ds("kube-controller-manager"), dep("kube-scheduler"), ds("kube-scheduler")}, "kube-scheduler's Deployment is being replaced"},
		{"another namespace's pair is not the control plane's", []runtime.Object{dep("kube-scheduler"),
			&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler", Namespace: "default"}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ElectedChangeUnderway(context.Background(), fake.NewClientset(tc.objs...))
			if err != nil || (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Errorf("ElectedChangeUnderway = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
