package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	masterscontroller "github.com/bootlet/bootlet/masters/controller"
	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
	"github.com/bootlet/bootlet/upgrade/cvclient"
)

// cluster is a single master at v1.36.3 whose node holds every image of
// both releases: the apiserver DaemonSet, the controller-manager and the
// scheduler Deployments, etcd's static pod.
type cluster struct {
	t   *testing.T
	cs  *fake.Clientset
	dyn *dynamicfake.FakeDynamicClient
	now time.Time
	r   rounds
}

func newCluster(t *testing.T) *cluster {
	var images []v1.ContainerImage
	for _, rel := range upgrade.Releases {
		for _, ref := range upgrade.NodeImages(rel, true) {
			images = append(images, v1.ContainerImage{Names: []string{ref}})
		}
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m1", Labels: map[string]string{btypes.LabelControlPlane: ""}},
		Status: v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}},
			NodeInfo: v1.NodeSystemInfo{KubeletVersion: "v1.36.3"}, Images: images}}
	objs := []runtime.Object{node, pod("etcd-m1", "etcd", upgrade.ImageOf(upgrade.Etcd, "3.6.8"), true)}
	for _, comp := range []upgrade.Component{upgrade.APIServer, upgrade.ControllerManager, upgrade.Scheduler} {
		objs = append(objs, pod(string(comp)+"-x", string(comp), upgrade.ImageOf(comp, "v1.36.3"), true))
	}
	tmpl := func(comp upgrade.Component) v1.PodTemplateSpec {
		return v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{{Name: string(comp), Image: upgrade.ImageOf(comp, "v1.36.3")}}}}
	}
	objs = append(objs,
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}, Spec: appsv1.DaemonSetSpec{Template: tmpl(upgrade.APIServer)}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "kube-controller-manager", Namespace: "kube-system"}, Spec: appsv1.DeploymentSpec{Template: tmpl(upgrade.ControllerManager)}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler", Namespace: "kube-system"}, Spec: appsv1.DeploymentSpec{Template: tmpl(upgrade.Scheduler)}},
	)
	c := &cluster{t: t, cs: fake.NewClientset(objs...), now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	c.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{cvclient.Resource: btypes.ClusterVersionKind + "List"})
	c.r = rounds{cs: c.cs, dyn: c.dyn, now: func() time.Time { return c.now }}
	return c
}

func pod(name, container, image string, ready bool) *v1.Pod {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec:   v1.PodSpec{NodeName: "m1", Containers: []v1.Container{{Name: container, Image: image}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: st}}}}
}

// roll is what the workload's controller and the kubelet do after the
// image changed: the component's pod runs image, ready or not.
func (c *cluster) roll(comp upgrade.Component, image string, ready bool) {
	c.t.Helper()
	p := pod(string(comp)+"-x", string(comp), image, ready)
	if _, err := c.cs.CoreV1().Pods("kube-system").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) workloadImage(comp upgrade.Component) string {
	c.t.Helper()
	ctx := context.Background()
	if ds, err := c.cs.AppsV1().DaemonSets("kube-system").Get(ctx, string(comp), metav1.GetOptions{}); err == nil {
		return ds.Spec.Template.Spec.Containers[0].Image
	}
	d, err := c.cs.AppsV1().Deployments("kube-system").Get(ctx, string(comp), metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

func (c *cluster) status() btypes.ClusterVersionStatus {
	c.t.Helper()
	cv, err := cvclient.Get(context.Background(), c.dyn)
	if err != nil {
		c.t.Fatal(err)
	}
	return cv.Status
}

func (c *cluster) ask(version string) {
	c.t.Helper()
	// etcd stays (kubeadm's --etcd-upgrade=false): etcd's step is a node's.
	if _, err := cvclient.SetDesired(context.Background(), c.dyn, version, false); err != nil {
		c.t.Fatal(err)
	}
	obj, _ := c.dyn.Resource(cvclient.Resource).Get(context.Background(), btypes.ClusterVersionName, metav1.GetOptions{})
	// The apiserver bumps a custom resource's generation on a change of
	// its spec; the fake does not.
	obj.SetGeneration(obj.GetGeneration() + 1)
	if _, err := c.dyn.Resource(cvclient.Resource).Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func condition(st btypes.ClusterVersionStatus, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(st.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func TestNoClusterVersionNoAct(t *testing.T) {
	c := newCluster(t)
	c.r.round(context.Background())
	if got := c.workloadImage(upgrade.APIServer); got != upgrade.ImageOf(upgrade.APIServer, "v1.36.3") {
		t.Errorf("with nothing asked the apiserver's image became %s", got)
	}
}

func TestUpgradeStepsInOrderThenComplete(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	c.ask("v1.37.2")
	c.r.round(ctx)
	st := c.status()
	if st.InFlight == nil || st.InFlight.Component != string(upgrade.APIServer) {
		t.Fatalf("first round: in flight %+v, want the apiserver", st.InFlight)
	}
	if got := c.workloadImage(upgrade.APIServer); got != upgrade.ImageOf(upgrade.APIServer, "v1.37.2") {
		t.Fatalf("the apiserver DaemonSet's image is %s after its step began", got)
	}
	if got := c.workloadImage(upgrade.ControllerManager); got != upgrade.ImageOf(upgrade.ControllerManager, "v1.36.3") {
		t.Errorf("the controller-manager moved before every apiserver: %s", got)
	}
	if h := st.History; len(h) != 1 || h[0].State != upgrade.HistoryPartial || h[0].Version != "v1.37.2" {
		t.Errorf("history %+v, want one Partial entry", h)
	}
	// Not Ready yet: the step waits.
	c.roll(upgrade.APIServer, upgrade.ImageOf(upgrade.APIServer, "v1.37.2"), false)
	c.now = c.now.Add(10 * time.Second)
	c.r.round(ctx)
	if st := c.status(); st.InFlight == nil || condition(st, upgrade.Progressing).Status != metav1.ConditionTrue {
		t.Fatalf("a step whose pod is not Ready: in flight %+v, Progressing %+v", st.InFlight, condition(st, upgrade.Progressing))
	}
	c.roll(upgrade.APIServer, upgrade.ImageOf(upgrade.APIServer, "v1.37.2"), true)
	for _, comp := range []upgrade.Component{upgrade.ControllerManager, upgrade.Scheduler} {
		c.r.round(ctx) // completes the step in flight
		c.r.round(ctx) // begins the next
		if got := c.workloadImage(comp); got != upgrade.ImageOf(comp, "v1.37.2") {
			t.Fatalf("%s's image is %s, want the target's", comp, got)
		}
		c.roll(comp, upgrade.ImageOf(comp, "v1.37.2"), true)
	}
	c.r.round(ctx) // the scheduler's step completes
	c.r.round(ctx) // the kubelet's is a node's: recorded in flight
	st = c.status()
	if st.InFlight == nil || st.InFlight.Component != string(upgrade.Kubelet) || st.InFlight.Node != "m1" {
		t.Fatalf("after the control plane: in flight %+v, want the kubelet on m1", st.InFlight)
	}
	// One node: nowhere to drain to, so the agent may act at once, and the
	// node is not cordoned.
	if st.InFlight.Drained == nil {
		t.Errorf("the kubelet's step on a single node is not marked for its agent")
	}
	if n, _ := c.cs.CoreV1().Nodes().Get(ctx, "m1", metav1.GetOptions{}); n.Spec.Unschedulable {
		t.Errorf("the single node was cordoned")
	}
	// The new kubelet reports its version before the node is Ready again:
	// the step is still in flight, and the upgrade not Done (the plan no
	// longer lists it).
	n, _ := c.cs.CoreV1().Nodes().Get(ctx, "m1", metav1.GetOptions{})
	n.Status.NodeInfo.KubeletVersion = "v1.37.2"
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionFalse}}
	if _, err := c.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.r.round(ctx)
	st = c.status()
	if p := condition(st, upgrade.Progressing); st.InFlight == nil || p.Status != metav1.ConditionTrue || !strings.HasPrefix(p.Message, "kubelet on m1: v1.36.3 -> v1.37.2 (1 steps to go)") {
		t.Fatalf("the last step reported but not through its gate: in flight %+v, Progressing %+v", st.InFlight, p)
	}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	if _, err := c.cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The round that completes the last step says Done, and the history
	// Completed in the same write; the next round changes neither.
	for _, round := range []string{"the last step's completion", "the round after"} {
		c.r.round(ctx)
		st = c.status()
		if st.InFlight != nil || st.Current.Kubernetes != "v1.37.2" || condition(st, upgrade.Progressing).Reason != "Done" || condition(st, upgrade.Failing).Status != metav1.ConditionFalse {
			t.Fatalf("%s: in flight %+v, current %+v, conditions %+v", round, st.InFlight, st.Current, st.Conditions)
		}
		if h := st.History; len(h) != 1 || h[0].State != upgrade.HistoryCompleted || h[0].CompletionTime == nil {
			t.Errorf("%s: history %+v, want the upgrade Completed", round, h)
		}
	}
}

func TestGateFailsRollsBackAndStops(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	c.ask("v1.37.2")
	c.r.round(ctx)
	c.roll(upgrade.APIServer, upgrade.ImageOf(upgrade.APIServer, "v1.37.2"), false)
	c.now = c.now.Add(upgrade.GateTimeout + time.Second)
	c.r.round(ctx)
	if got := c.workloadImage(upgrade.APIServer); got != upgrade.ImageOf(upgrade.APIServer, "v1.36.3") {
		t.Fatalf("after the gate failed for %s the apiserver's image is %s, want it put back", upgrade.GateTimeout, got)
	}
	st := c.status()
	if st.RollingBack == nil || condition(st, upgrade.Progressing).Reason != "RollingBack" || condition(st, upgrade.Failing).Status != metav1.ConditionTrue {
		t.Fatalf("rolling back: %+v, conditions %+v", st.RollingBack, st.Conditions)
	}
	c.roll(upgrade.APIServer, upgrade.ImageOf(upgrade.APIServer, "v1.36.3"), true)
	c.r.round(ctx)
	st = c.status()
	f := condition(st, upgrade.Failing)
	if st.RollingBack != nil || f.Status != metav1.ConditionTrue || f.Reason != "RolledBack" {
		t.Fatalf("after the rollback: rolling back %+v, Failing %+v", st.RollingBack, f)
	}
	if h := st.History; len(h) != 1 || h[0].State != upgrade.HistoryRolledBack {
		t.Errorf("history %+v, want RolledBack", h)
	}
	// Stopped: nothing moves until a person asks again.
	c.r.round(ctx)
	if got := c.workloadImage(upgrade.APIServer); got != upgrade.ImageOf(upgrade.APIServer, "v1.36.3") {
		t.Errorf("a stopped upgrade moved the apiserver again: %s", got)
	}
	c.ask("v1.37.2") // the same version again: a retry
	c.r.round(ctx)
	if got := c.workloadImage(upgrade.APIServer); got != upgrade.ImageOf(upgrade.APIServer, "v1.37.2") {
		t.Errorf("a retry did not begin the step again: %s", got)
	}
	if h := c.status().History; len(h) != 2 || h[0].State != upgrade.HistoryPartial {
		t.Errorf("history after the retry %+v, want a new Partial entry first", h)
	}
}

func TestUnknownVersionRefused(t *testing.T) {
	c := newCluster(t)
	c.ask("v1.99.0")
	c.r.round(context.Background())
	f := condition(c.status(), upgrade.Failing)
	if f.Status != metav1.ConditionTrue || f.Reason != upgrade.ReasonInvalidVersion {
		t.Errorf("an unknown version: Failing %+v", f)
	}
}

// With two members neither can restart without losing the quorum: the
// step begins with nothing widened; once its one helper (beside the
// step's member) is Ready the apiservers name it too; once the member is
// Ready at the target they name their own member alone again; and only
// once the helper is gone does the second member's step begin.
func TestEtcdTwoMembersStep(t *testing.T) {
	c := newCluster(t)
	c.addMaster("m2")
	ctx := context.Background()
	const local = "--etcd-servers=https://127.0.0.1:2379"
	c.setAPIServerCommand("kube-apiserver", local)
	apiservers := func() (flag, kept string) {
		t.Helper()
		ds, err := c.cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ds.Spec.Template.Spec.Containers[0].Command[1], ds.Annotations[annotationEtcdServers]
	}
	ips := map[string]string{"m1": "10.0.0.1", "m2": "10.0.0.2"}
	setMember := func(node, version string) {
		t.Helper()
		p := pod("etcd-"+node, "etcd", upgrade.ImageOf(upgrade.Etcd, version), true)
		p.Spec.NodeName = node
		p.Spec.Containers[0].Command = []string{"etcd", "--advertise-client-urls=https://" + ips[node] + ":2379"}
		if _, err := c.cs.CoreV1().Pods("kube-system").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setMember("m1", "3.6.8")
	setMember("m2", "3.6.8")
	members := "https://10.0.0.1:2379,https://10.0.0.2:2379"
	if _, err := cvclient.SetDesired(ctx, c.dyn, "v1.37.2", true); err != nil {
		t.Fatal(err)
	}
	for _, node := range []string{"m1", "m2"} {
		c.r.round(ctx)
		if s := c.status().InFlight; s == nil || s.Component != "etcd" || s.Node != node {
			t.Fatalf("two members: in flight %+v, want etcd's step on %s; Failing %+v", s, node, condition(c.status(), upgrade.Failing))
		}
		if got, kept := apiservers(); got != local || kept != "" {
			t.Errorf("%s's step before its helper: the apiservers' flag %s (kept %q), want %s", node, got, kept, local)
		}
		helper := pod("etcd-upgrade-helper-1-"+node, "etcd", upgrade.ImageOf(upgrade.Etcd, "3.6.8"), true)
		helper.Spec.NodeName = node
		helper.Labels = map[string]string{btypes.LabelEtcdUpgradeHelper: node + "-upgrade-helper-1"}
		helper.Spec.Containers[0].Command = []string{"etcd", "--advertise-client-urls=https://127.0.0.1:2389"}
		if _, err := c.cs.CoreV1().Pods("kube-system").Create(ctx, helper, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.r.round(ctx)
		if got, kept := apiservers(); got != local+","+members+",https://127.0.0.1:2389" || kept != "https://127.0.0.1:2379" {
			t.Errorf("%s's helper Ready: the apiservers' flag %s (kept %q), want every member and the helper after their own", node, got, kept)
		}
		setMember(node, "3.7.0")
		c.now = c.now.Add(time.Minute)
		c.r.round(ctx)
		if got, kept := apiservers(); got != local || kept != "" {
			t.Errorf("%s at the target: the apiservers' flag %s (kept %q), want %s back", node, got, kept, local)
		}
		if s := c.status().InFlight; s == nil || s.Node != node {
			t.Fatalf("%s's step passed its gate with its helper still there: in flight %+v", node, s)
		}
		if err := c.cs.CoreV1().Pods("kube-system").Delete(ctx, helper.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		c.r.round(ctx)
	}
	c.r.round(ctx)
	if s := c.status().InFlight; s == nil || s.Component != string(upgrade.APIServer) {
		t.Errorf("both members at the target, their helpers gone: in flight %+v, want the apiserver's step", s)
	}
	if f := condition(c.status(), upgrade.Failing); f.Status == metav1.ConditionTrue {
		t.Errorf("Failing: %+v", f)
	}
}

// A helper of an earlier step that was put back and stopped (a person
// then asked again): no etcd step begins while it remains, since the new
// step would count it as a member; the apiservers name their own member
// alone, so its agent removes it.
func TestEtcdStepWaitsForLeftHelpers(t *testing.T) {
	c := newCluster(t)
	c.addMaster("m2")
	ctx := context.Background()
	helper := pod("etcd-upgrade-helper-1-m1", "etcd", upgrade.ImageOf(upgrade.Etcd, "3.6.8"), true)
	helper.Labels = map[string]string{btypes.LabelEtcdUpgradeHelper: "m1-upgrade-helper-1"}
	if _, err := c.cs.CoreV1().Pods("kube-system").Create(ctx, helper, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cvclient.SetDesired(ctx, c.dyn, "v1.37.2", true); err != nil {
		t.Fatal(err)
	}
	c.r.round(ctx)
	st := c.status()
	if st.InFlight != nil || !strings.Contains(condition(st, upgrade.Progressing).Message, "helper members of an earlier etcd step remain") {
		t.Errorf("with a helper left: in flight %+v, Progressing %+v", st.InFlight, condition(st, upgrade.Progressing))
	}
	if err := c.cs.CoreV1().Pods("kube-system").Delete(ctx, helper.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.r.round(ctx)
	if s := c.status().InFlight; s == nil || s.Component != "etcd" || s.Node != "m1" {
		t.Errorf("the helper gone: in flight %+v, want etcd's step on m1", s)
	}
}

// One member's step: it begins; once the helpers (pods of their own,
// labelled) are Ready the apiservers name them too; once the member is
// Ready at the target they name it alone again; the gate passes only once
// the helpers are gone.
func TestEtcdOneMemberStep(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	const local = "--etcd-servers=https://127.0.0.1:2379"
	c.setAPIServerCommand("kube-apiserver", local)
	command := func() string {
		t.Helper()
		ds, err := c.cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ds.Spec.Template.Spec.Containers[0].Command[1]
	}
	setMember := func(version string) {
		t.Helper()
		p := pod("etcd-m1", "etcd", upgrade.ImageOf(upgrade.Etcd, version), true)
		p.Spec.Containers[0].Command = []string{"etcd", "--advertise-client-urls=https://10.0.0.1:2379"}
		if _, err := c.cs.CoreV1().Pods("kube-system").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setMember("3.6.8")
	if _, err := cvclient.SetDesired(ctx, c.dyn, "v1.37.2", true); err != nil {
		t.Fatal(err)
	}
	c.r.round(ctx)
	if s := c.status().InFlight; s == nil || s.Component != "etcd" || s.Node != "m1" {
		t.Fatalf("one member: in flight %+v, Failing %+v", s, condition(c.status(), upgrade.Failing))
	}
	if got := command(); got != local {
		t.Errorf("before any helper the apiservers' flag changed: %s", got)
	}
	var helperNames []string
	for i := 1; i <= upgrade.EtcdHelpersFor(1, false); i++ {
		name := fmt.Sprintf("etcd-upgrade-helper-%d-m1", i)
		helperNames = append(helperNames, name)
		p := pod(name, "etcd", upgrade.ImageOf(upgrade.Etcd, "3.6.8"), true)
		p.Labels = map[string]string{btypes.LabelEtcdUpgradeHelper: fmt.Sprintf("m1-upgrade-helper-%d", i)}
		p.Spec.Containers[0].Command = []string{"etcd", fmt.Sprintf("--advertise-client-urls=https://127.0.0.1:%d", 2379+10*i)}
		if _, err := c.cs.CoreV1().Pods("kube-system").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.r.round(ctx)
	const wide = "--etcd-servers=https://127.0.0.1:2379,https://10.0.0.1:2379,https://127.0.0.1:2389,https://127.0.0.1:2399"
	if got := command(); got != wide {
		t.Errorf("with the helpers Ready the apiservers' flag is %s, want %s", got, wide)
	}
	if s := c.status().InFlight; s == nil || s.Component != "etcd" {
		t.Fatalf("the helpers are no member of the node: in flight %+v", s)
	}
	setMember("3.7.0")
	c.now = c.now.Add(time.Minute)
	c.r.round(ctx)
	if got := command(); got != local {
		t.Errorf("with the member at the target the apiservers' flag is %s, want %s back", got, local)
	}
	if s := c.status().InFlight; s == nil || s.Component != "etcd" {
		t.Fatalf("the step passed its gate with its helpers still there: in flight %+v", s)
	}
	for _, name := range helperNames {
		if err := c.cs.CoreV1().Pods("kube-system").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.r.round(ctx)
	c.r.round(ctx)
	if s := c.status().InFlight; s == nil || s.Component != string(upgrade.APIServer) {
		t.Errorf("with the helpers gone: in flight %+v, want the apiserver's step", s)
	}
}

// setAPIServerCommand sets the apiserver DaemonSet's container command.
func (c *cluster) setAPIServerCommand(command ...string) {
	c.t.Helper()
	ctx := context.Background()
	ds, err := c.cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	ds.Spec.Template.Spec.Containers[0].Command = command
	if _, err := c.cs.AppsV1().DaemonSets("kube-system").Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// addMaster adds a master like m1, Ready with every image, running the
// control plane at v1.36.3 and an etcd member at 3.6.8.
func (c *cluster) addMaster(name string) {
	c.t.Helper()
	ctx := context.Background()
	n, err := c.cs.CoreV1().Nodes().Get(ctx, "m1", metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	n = n.DeepCopy()
	n.ObjectMeta = metav1.ObjectMeta{Name: name, Labels: n.Labels}
	if _, err := c.cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	add := func(podName, container, image string) {
		p := pod(podName, container, image, true)
		p.Spec.NodeName = name
		if _, err := c.cs.CoreV1().Pods("kube-system").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			c.t.Fatal(err)
		}
	}
	add("etcd-"+name, "etcd", upgrade.ImageOf(upgrade.Etcd, "3.6.8"))
	for _, comp := range []upgrade.Component{upgrade.APIServer, upgrade.ControllerManager, upgrade.Scheduler} {
		add(string(comp)+"-"+name, string(comp), upgrade.ImageOf(comp, "v1.36.3"))
	}
}

// With three members one member's replacement keeps a quorum: the
// controller begins etcd's step, recorded in flight for the first master,
// and sets nothing itself (the node's agent acts), and the apiserver waits.
func TestEtcdStepBegunWithThreeMembers(t *testing.T) {
	c := newCluster(t)
	c.addMaster("m2")
	c.addMaster("m3")
	ctx := context.Background()
	if _, err := cvclient.SetDesired(ctx, c.dyn, "v1.37.2", true); err != nil {
		t.Fatal(err)
	}
	c.r.round(ctx)
	st := c.status()
	if s := st.InFlight; s == nil || s.Component != "etcd" || s.Node != "m1" || s.From != "3.6.8" || s.To != "3.7.0" {
		t.Fatalf("etcd's step with three members: in flight %+v, Failing %+v", s, condition(st, upgrade.Failing))
	}
	if f := condition(st, upgrade.Failing); f.Status == metav1.ConditionTrue {
		t.Errorf("Failing %+v while etcd's step is in flight", f)
	}
	if got := c.workloadImage(upgrade.APIServer); got != upgrade.ImageOf(upgrade.APIServer, "v1.36.3") {
		t.Errorf("the apiserver moved while etcd's step is in flight: %s", got)
	}
	// The member runs the target (its agent set it; the kubelet replaced
	// it): the next round completes the step and begins m2's.
	p := pod("etcd-m1", "etcd", upgrade.ImageOf(upgrade.Etcd, "3.7.0"), true)
	if _, err := c.cs.CoreV1().Pods("kube-system").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(10 * time.Second)
	c.r.round(ctx)
	c.r.round(ctx)
	if s := c.status().InFlight; s == nil || s.Component != "etcd" || s.Node != "m2" {
		t.Errorf("after m1's member passed its gate: in flight %+v, want etcd on m2", s)
	}
}

// Where the members share their client address, etcd's steps roll no
// apiserver: with three members too, each step waits for its one helper
// (the node's agent adds it) and its gate passes once the helper is gone.
func TestEtcdStepsSharedAddressRollNoApiserver(t *testing.T) {
	c := newCluster(t)
	c.addMaster("m2")
	c.addMaster("m3")
	ctx := context.Background()
	const local = "--etcd-servers=https://127.0.0.1:2379"
	c.setAPIServerCommand("kube-apiserver", local)
	generation := func() int64 {
		t.Helper()
		ds, err := c.cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ds.Spec.Template.Spec.Containers[0].Command[1]; got != local {
			t.Errorf("the apiservers' flag changed: %s", got)
		}
		return ds.Generation
	}
	setEtcd := func(node, version string) {
		t.Helper()
		p := pod("etcd-"+node, "etcd", upgrade.ImageOf(upgrade.Etcd, version), true)
		p.Spec.NodeName = node
		p.Spec.Containers[0].Command = []string{"etcd", "--advertise-client-urls=https://10.0.0." + node[1:] + ":2379", "--socket-reuse-port=true"}
		if _, err := c.cs.CoreV1().Pods("kube-system").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"m1", "m2", "m3"} {
		setEtcd(n, "3.6.8")
	}
	before := generation()
	if _, err := cvclient.SetDesired(ctx, c.dyn, "v1.37.2", true); err != nil {
		t.Fatal(err)
	}
	c.r.round(ctx)
	if s := c.status().InFlight; s == nil || s.Component != "etcd" || s.Node != "m1" {
		t.Fatalf("three members sharing their address: in flight %+v, Failing %+v", s, condition(c.status(), upgrade.Failing))
	}
	helper := pod("etcd-upgrade-helper-1-m1", "etcd", upgrade.ImageOf(upgrade.Etcd, "3.6.8"), true)
	helper.Labels = map[string]string{btypes.LabelEtcdUpgradeHelper: "m1-upgrade-helper-1"}
	helper.Spec.Containers[0].Command = []string{"etcd", "--advertise-client-urls=https://127.0.0.1:2389", "--socket-reuse-port=true"}
	if _, err := c.cs.CoreV1().Pods("kube-system").Create(ctx, helper, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.r.round(ctx)
	setEtcd("m1", "3.7.0")
	c.now = c.now.Add(time.Minute)
	c.r.round(ctx)
	if s := c.status().InFlight; s == nil || s.Component != "etcd" || s.Node != "m1" {
		t.Fatalf("the step passed its gate with its helper still there: in flight %+v", s)
	}
	if err := c.cs.CoreV1().Pods("kube-system").Delete(ctx, helper.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.r.round(ctx)
	c.r.round(ctx)
	if s := c.status().InFlight; s == nil || s.Component != "etcd" || s.Node != "m2" {
		t.Errorf("with m1's helper gone: in flight %+v, want etcd on m2", s)
	}
	if after := generation(); after != before {
		t.Errorf("the apiserver DaemonSet went from generation %d to %d in etcd's steps", before, after)
	}
}

// Before etcd's steps the apiservers name every member, and only once
// their DaemonSet has rolled out does the first member's step begin; the
// apiserver's own step puts the single endpoint back with its image.
func TestEtcdStepsWidenTheApiserversEtcdServers(t *testing.T) {
	c := newCluster(t)
	c.addMaster("m2")
	c.addMaster("m3")
	ctx := context.Background()
	const local = "--etcd-servers=https://127.0.0.1:2379"
	ds, err := c.cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds.Spec.Template.Spec.Containers[0].Command = []string{"kube-apiserver", "--advertise-address=$(HOST_IP)", local}
	if _, err := c.cs.AppsV1().DaemonSets("kube-system").Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	setEtcd := func(node, version string) {
		t.Helper()
		p := pod("etcd-"+node, "etcd", upgrade.ImageOf(upgrade.Etcd, version), true)
		p.Spec.NodeName = node
		p.Spec.Containers[0].Command = []string{"etcd", "--advertise-client-urls=https://10.0.0." + node[1:] + ":2379"}
		if _, err := c.cs.CoreV1().Pods("kube-system").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"m1", "m2", "m3"} {
		setEtcd(n, "3.6.8")
	}
	command := func() []string {
		t.Helper()
		ds, err := c.cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ds.Spec.Template.Spec.Containers[0].Command
	}
	rolled := func() {
		t.Helper()
		ds, err := c.cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 3, CurrentNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberReady: 3, NumberAvailable: 3}
		if _, err := c.cs.AppsV1().DaemonSets("kube-system").UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cvclient.SetDesired(ctx, c.dyn, "v1.37.2", true); err != nil {
		t.Fatal(err)
	}
	c.r.round(ctx)
	st := c.status()
	const wide = "--etcd-servers=https://127.0.0.1:2379,https://10.0.0.1:2379,https://10.0.0.2:2379,https://10.0.0.3:2379"
	if got := command()[2]; got != wide {
		t.Errorf("before etcd's steps the apiservers' flag is %q, want %q", got, wide)
	}
	if st.InFlight != nil || condition(st, upgrade.Failing).Status == metav1.ConditionTrue || !strings.Contains(condition(st, upgrade.Progressing).Message, "name every etcd member") {
		t.Fatalf("while the apiservers roll: in flight %+v, conditions %+v", st.InFlight, st.Conditions)
	}
	c.r.round(ctx) // still rolling: nothing begins
	if st := c.status(); st.InFlight != nil {
		t.Fatalf("etcd's step began before the apiservers rolled out: %+v", st.InFlight)
	}
	rolled()
	c.r.round(ctx)
	if s := c.status().InFlight; s == nil || s.Component != "etcd" || s.Node != "m1" {
		t.Fatalf("after the roll: in flight %+v, want etcd on m1", s)
	}
	for _, n := range []string{"m1", "m2", "m3"} {
		setEtcd(n, "3.7.0")
		c.r.round(ctx) // completes
		c.r.round(ctx) // begins the next
	}
	if s := c.status().InFlight; s == nil || s.Component != string(upgrade.APIServer) {
		t.Fatalf("after etcd's steps: in flight %+v, want the apiserver's", s)
	}
	if got := command()[2]; got != local {
		t.Errorf("the apiserver's step left %q, want %q back", got, local)
	}
	if got := c.workloadImage(upgrade.APIServer); got != upgrade.ImageOf(upgrade.APIServer, "v1.37.2") {
		t.Errorf("the apiserver's step set the image %s", got)
	}
}

func TestEvictable(t *testing.T) {
	ds := metav1.OwnerReference{Kind: "DaemonSet", Name: "x", Controller: ptr.To(true)}
	rs := metav1.OwnerReference{Kind: "ReplicaSet", Name: "x", Controller: ptr.To(true)}
	tests := []struct {
		name string
		p    v1.Pod
		want bool
	}{
		{"a ReplicaSet's", v1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{rs}}}, true},
		{"a bare pod", v1.Pod{}, true},
		{"a DaemonSet's", v1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{ds}}}, false},
		{"a mirror pod", v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1.MirrorPodAnnotationKey: "x"}}}, false},
		{"finished", v1.Pod{Status: v1.PodStatus{Phase: v1.PodSucceeded}}, false},
	}
	for _, tt := range tests {
		if got := evictable(tt.p); got != tt.want {
			t.Errorf("%s: evictable %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Helpers left behind by a step that is no longer recorded (a person
// asked for another version in the middle): the apiservers name the
// healthy member alone again, so its agent releases them.
func TestEtcdHelpersLeftAreUnnamed(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	const local = "https://127.0.0.1:2379"
	ds, err := c.cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds.Annotations = map[string]string{annotationEtcdServers: local}
	ds.Spec.Template.Spec.Containers[0].Command = []string{"kube-apiserver", "--etcd-servers=" + local + ",https://127.0.0.1:2389,https://127.0.0.1:2399"}
	if _, err := c.cs.AppsV1().DaemonSets("kube-system").Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= upgrade.EtcdHelpersFor(1, false); i++ {
		p := pod(fmt.Sprintf("etcd-upgrade-helper-%d-m1", i), "etcd", upgrade.ImageOf(upgrade.Etcd, "3.6.8"), true)
		p.Labels = map[string]string{btypes.LabelEtcdUpgradeHelper: fmt.Sprintf("m1-upgrade-helper-%d", i)}
		if _, err := c.cs.CoreV1().Pods("kube-system").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.ask("v1.37.2") // etcd left as it runs: no etcd step
	c.r.round(ctx)
	ds, err = c.cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := upgrade.EtcdServersOf(ds.Spec.Template.Spec.Containers[0].Command); got != local || ds.Annotations[annotationEtcdServers] != "" {
		t.Errorf("with helpers left and no etcd step: --etcd-servers=%s, annotation %q; want %s alone", got, ds.Annotations[annotationEtcdServers], local)
	}
}

// No step begins while the masters' controller has an operation recorded:
// a member added or removed during an etcd step would change the quorum
// under it. The step begins once the operation is done.
func TestNoStepDuringAMastersOperation(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	rec := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: masterscontroller.RecordName, Namespace: metav1.NamespaceSystem},
		Data: map[string]string{masterscontroller.RecordKey: `{"masters":["m1"],"op":{"kind":"Promote","node":"w1","phase":"Learner"}}`}}
	if _, err := c.cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Create(ctx, rec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.ask("v1.37.2")
	c.r.round(ctx)
	if st := c.status(); st.InFlight != nil || !strings.Contains(condition(st, upgrade.Progressing).Message, "promote of w1 is under way") {
		t.Fatalf("with a promotion under way: in flight %+v, Progressing %+v", st.InFlight, condition(st, upgrade.Progressing))
	}
	rec.Data[masterscontroller.RecordKey] = `{"masters":["m1","w1"]}`
	if _, err := c.cs.CoreV1().ConfigMaps(metav1.NamespaceSystem).Update(ctx, rec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.r.round(ctx)
	if st := c.status(); st.InFlight == nil {
		t.Errorf("the promotion done, no step began: %+v", condition(st, upgrade.Progressing))
	}
}
