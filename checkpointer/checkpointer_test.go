package checkpointer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/checkpointer"
	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/podapi"
	btypes "github.com/bootlet/bootlet/types"
)

// The checkpointer's I/O against client-go's fake clientset and bootlet's
// real registry and checkpoint store (the runtime is a recorder: what the
// registry hands it is what bootlet's workers would run).

const ckptNode = "node-1"

type recRuntime struct {
	mu                 sync.Mutex
	synced, terminated map[types.UID]bool
}

func newRecRuntime() *recRuntime {
	return &recRuntime{synced: map[types.UID]bool{}, terminated: map[types.UID]bool{}}
}
func (r *recRuntime) Sync(p *v1.Pod) { r.mu.Lock(); r.synced[p.UID] = true; r.mu.Unlock() }
func (r *recRuntime) Terminate(uid types.UID, _ time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.terminated[uid] = true
	return true
}
func (r *recRuntime) Refresh() {}
func (r *recRuntime) Logs(context.Context, *v1.Pod, *v1.PodLogOptions, io.Writer) error {
	return nil
}

type ckptEnv struct {
	t     *testing.T
	store *checkpoint.Store
	reg   *podapi.Registry
	rt    *recRuntime
	cs    *fake.Clientset
	now   time.Time
	ready bool
	cfg   checkpointer.Config
	c     *checkpointer.Checkpointer
}

func newCkptEnv(t *testing.T, cfg checkpointer.Config, objs ...interface{}) *ckptEnv {
	t.Helper()
	store, err := checkpoint.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := podapi.NewRegistry(ckptNode, store)
	if err != nil {
		t.Fatal(err)
	}
	e := &ckptEnv{t: t, store: store, reg: reg, rt: newRecRuntime(), cs: fake.NewClientset(),
		now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), ready: true}
	reg.SetRuntime(e.rt)
	cfg.NodeName, cfg.Client, cfg.Store, cfg.Registry = ckptNode, e.cs, store, reg
	if cfg.Events == nil {
		cfg.Events = reg.Events
	}
	cfg.Now = func() time.Time { return e.now }
	cfg.Readyz = func(context.Context, kubernetes.Interface) error {
		if !e.ready {
			return errors.New("connection refused")
		}
		return nil
	}
	cfg.Timing = checkpointer.Timing{ActivateAfter: 10 * time.Second, WithdrawAfter: 20 * time.Second, FlapWindow: 10 * time.Minute, MaxWithdrawAfter: 5 * time.Minute}
	if cfg.Resync == 0 {
		// These tests change the fake apiserver and tick at once; its
		// watch events arrive when they arrive. TestCheckpointerQuietTicks
		// covers the reads a settled checkpointer skips.
		cfg.Resync = -1
	}
	e.cfg = cfg
	e.c = checkpointer.New(cfg)
	return e
}

// restart is a new checkpointer on the same store and registry, as after
// a restart of bootlet (or a reboot): its memory starts again.
func (e *ckptEnv) restart() {
	e.c = checkpointer.New(e.cfg)
}

func (e *ckptEnv) tick(advance time.Duration) {
	e.now = e.now.Add(advance)
	e.c.Tick(context.Background())
}

func (e *ckptEnv) stored() *checkpointer.Checkpoint {
	rec, ok := e.store.Get(checkpoint.KindPodCheckpoint, "kube-system", "kube-apiserver")
	if !ok {
		return nil
	}
	ck := &checkpointer.Checkpoint{}
	if err := json.Unmarshal(rec.Data, ck); err != nil {
		e.t.Fatalf("stored checkpoint does not decode: %v", err)
	}
	return ck
}

func (e *ckptEnv) create(obj interface{}) {
	e.t.Helper()
	ctx := context.Background()
	var err error
	switch o := obj.(type) {
	case *v1.Pod:
		_, err = e.cs.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *v1.Secret:
		_, err = e.cs.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *appsv1.DaemonSet:
		_, err = e.cs.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

func apiserverDS() *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system", UID: "ds-uid"},
		Spec: appsv1.DaemonSetSpec{Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{btypes.AnnotationCheckpoint: "true"}}}}}
}

// apiserverPod is a self-hosted apiserver pod of the DaemonSet on node,
// Ready since readyAt (never Ready when zero).
func apiserverPod(name, image, node string, created, readyAt time.Time) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", UID: types.UID(name + "-uid"), CreationTimestamp: metav1.NewTime(created),
			Labels:          map[string]string{"k8s-app": "kube-apiserver"},
			Annotations:     map[string]string{btypes.AnnotationCheckpoint: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "kube-apiserver", UID: "ds-uid", Controller: ptr.To(true)}}},
		Spec: v1.PodSpec{NodeName: node, HostNetwork: true, ServiceAccountName: "default",
			Containers: []v1.Container{{Name: "kube-apiserver", Image: image, Command: []string{"kube-apiserver", "--permit-port-sharing=true"},
				VolumeMounts: []v1.VolumeMount{{Name: "kubernetes", MountPath: "/etc/kubernetes", ReadOnly: true},
					{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}}}},
			Volumes: []v1.Volume{{Name: "kubernetes", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "kube-apiserver"}}},
				{Name: "kube-api-access", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)}}}}}}}},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
	if !readyAt.IsZero() {
		setReady(p, readyAt)
	}
	return p
}

func setReady(p *v1.Pod, at time.Time) {
	p.Status.Phase = v1.PodRunning
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
}

func (e *ckptEnv) checkpointPod() *v1.Pod {
	p, err := e.reg.GetPod("kube-system", "kube-apiserver"+checkpointer.CheckpointPodSuffix)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// TestCheckpointerLifecycle walks one component through every rule: store,
// advance on upgrade (only once Ready), activate after the grace period,
// no withdrawal on a stale Ready status, withdrawal after the self-hosted
// pod is Ready again for WithdrawAfter, objects cleaned up, the checkpoint
// kept across an empty list, removed once the DaemonSet is deleted.
func TestCheckpointerLifecycle(t *testing.T) {
	// The port hand-over runs before the withdrawal, from the checkpoint
	// pod, still running, to the self-hosted pod that takes over.
	var e *ckptEnv
	var handovers []string
	e = newCkptEnv(t, checkpointer.Config{Handover: func(_ context.Context, incoming, outgoing types.UID) {
		p := e.checkpointPod()
		handovers = append(handovers, fmt.Sprintf("%s -> %s (checkpoint pod %v, deleting %v)", outgoing, incoming, p != nil && p.UID == outgoing, p != nil && p.DeletionTimestamp != nil))
	}})
	t0 := e.now
	e.create(apiserverDS())
	e.create(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}, Data: map[string][]byte{"apiserver.crt": []byte("v1")}})
	e.create(apiserverPod("kube-apiserver-aaaaa", "apiserver:1", ckptNode, t0.Add(-time.Hour), t0.Add(-time.Hour)))
	// Ignored: another node's pod, a pod that does not ask.
	e.create(apiserverPod("kube-apiserver-other", "apiserver:other", "node-2", t0, t0))
	plain := apiserverPod("plain", "plain:1", ckptNode, t0, t0)
	plain.Annotations, plain.OwnerReferences = nil, nil
	e.create(plain)

	e.tick(0)
	ck := e.stored()
	if ck == nil || ck.Pod.Spec.Containers[0].Image != "apiserver:1" || len(ck.Secrets) != 1 || string(ck.Secrets[0].Data["apiserver.crt"]) != "v1" {
		t.Fatalf("after the first tick: checkpoint %+v", ck)
	}
	if recs := e.store.List(checkpoint.KindPodCheckpoint); len(recs) != 1 {
		t.Fatalf("%d checkpoints stored, want only the annotated pod of this node", len(recs))
	}
	rev := e.store.Revision()
	e.tick(time.Second)
	if e.store.Revision() != rev {
		t.Errorf("an unchanged checkpoint was written again")
	}

	// Upgrade: the DaemonSet replaces the pod; the new one is not Ready yet.
	ctx := context.Background()
	if err := e.cs.CoreV1().Pods("kube-system").Delete(ctx, "kube-apiserver-aaaaa", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	upgraded := apiserverPod("kube-apiserver-bbbbb", "apiserver:2", ckptNode, e.now, time.Time{})
	e.create(upgraded)
	e.tick(time.Second)
	if ck := e.stored(); ck.Pod.Spec.Containers[0].Image != "apiserver:1" {
		t.Fatalf("a pod that is not Ready moved the checkpoint to %s", ck.Pod.Spec.Containers[0].Image)
	}
	setReady(upgraded, e.now)
	if _, err := e.cs.CoreV1().Pods("kube-system").UpdateStatus(ctx, upgraded, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.tick(time.Second)
	if ck := e.stored(); ck.Pod.Spec.Containers[0].Image != "apiserver:2" || ck.SourceName != "kube-system/kube-apiserver-bbbbb" {
		t.Fatalf("the upgrade did not move the checkpoint: %s from %s", ck.Pod.Spec.Containers[0].Image, ck.SourceName)
	}

	// The apiserver goes away: nothing for ActivateAfter, then the checkpoint runs.
	e.ready = false
	e.tick(time.Second)
	e.tick(9 * time.Second)
	if p := e.checkpointPod(); p != nil {
		t.Fatalf("activated after 9 s, within the 10 s grace period")
	}
	e.tick(time.Second)
	p := e.checkpointPod()
	if p == nil {
		t.Fatalf("not activated after 10 s unreachable; status %+v", e.c.Status())
	}
	activatedAt := e.now
	if p.Spec.Containers[0].Image != "apiserver:2" || p.Annotations[btypes.AnnotationCheckpointOf] != "kube-system/kube-apiserver" || !p.Spec.HostNetwork {
		t.Errorf("checkpoint pod: image %s annotations %v", p.Spec.Containers[0].Image, p.Annotations)
	}
	e.rt.mu.Lock()
	synced := e.rt.synced[p.UID]
	e.rt.mu.Unlock()
	if !synced {
		t.Errorf("the registry did not hand the checkpoint pod to the runtime")
	}
	sec, err := e.reg.GetSecret("kube-system", checkpointer.CheckpointObjectName("kube-apiserver", "kube-apiserver"))
	if err != nil || string(sec.Data["apiserver.crt"]) != "v1" {
		t.Fatalf("the checkpoint's Secret in bootlet's registry: %v %v", sec, err)
	}
	if p.Spec.Volumes[0].Secret.SecretName != sec.Name {
		t.Errorf("the pod uses Secret %s, the registry holds %s", p.Spec.Volumes[0].Secret.SecretName, sec.Name)
	}
	e.tick(time.Second)
	if p2 := e.checkpointPod(); p2 == nil || p2.UID != p.UID {
		t.Fatalf("a second tick replaced the active checkpoint pod")
	}

	// The apiserver is back (served by the checkpoint), and etcd still says
	// the self-hosted pod is Ready, from before: that is not evidence.
	e.ready = true
	for i := 0; i < 10; i++ {
		e.tick(10 * time.Second)
	}
	if p := e.checkpointPod(); p == nil || p.DeletionTimestamp != nil {
		t.Fatalf("withdrawn on a Ready status older than the checkpoint pod")
	}

	// The kubelet reports the self-hosted pod again: Ready after the
	// checkpoint started. Withdrawn once it has been Ready 20 s.
	cur, _ := e.cs.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-bbbbb", metav1.GetOptions{})
	setReady(cur, e.now)
	if _, err := e.cs.CoreV1().Pods("kube-system").UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !cur.Status.Conditions[0].LastTransitionTime.After(activatedAt) {
		t.Fatal("test setup: Ready must turn true after the activation")
	}
	e.tick(time.Second)
	e.tick(10 * time.Second)
	if p := e.checkpointPod(); p == nil || p.DeletionTimestamp != nil {
		t.Fatalf("withdrawn after 10 s Ready, want 20 s")
	}
	if len(handovers) != 0 {
		t.Fatalf("a port hand-over before the withdrawal was decided: %v", handovers)
	}
	e.tick(10 * time.Second)
	p = e.checkpointPod()
	if p == nil || p.DeletionTimestamp == nil {
		t.Fatalf("not withdrawn after 20 s Ready: %+v", e.c.Status())
	}
	if want := fmt.Sprintf("%s -> %s (checkpoint pod true, deleting false)", p.UID, cur.UID); len(handovers) != 1 || handovers[0] != want {
		t.Errorf("port hand-overs %v, want one: %s", handovers, want)
	}
	e.rt.mu.Lock()
	terminated := e.rt.terminated[p.UID]
	e.rt.mu.Unlock()
	if !terminated {
		t.Errorf("withdrawal did not terminate the pod in the runtime")
	}
	// The worker finishes; the objects go with the pod.
	e.tick(time.Second)
	if _, err := e.reg.GetSecret("kube-system", sec.Name); err != nil {
		t.Errorf("Secret removed while its pod is still terminating: %v", err)
	}
	e.reg.PodTerminated(btypes.KeyOf(p), p.UID)
	e.tick(time.Second)
	if _, err := e.reg.GetSecret("kube-system", sec.Name); !apierrors.IsNotFound(err) {
		t.Errorf("checkpoint Secret left in the registry after the withdrawal: %v", err)
	}

	// An empty list (the DaemonSet replacing its pod) keeps the checkpoint.
	if err := e.cs.CoreV1().Pods("kube-system").Delete(ctx, "kube-apiserver-bbbbb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		e.tick(time.Minute)
	}
	if e.stored() == nil {
		t.Fatal("checkpoint dropped because the list came back empty")
	}
	// The DaemonSet no longer asks for a checkpoint: removed.
	ds := apiserverDS()
	ds.Spec.Template.Annotations = nil
	if _, err := e.cs.AppsV1().DaemonSets("kube-system").Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.tick(time.Second)
	if e.stored() != nil {
		t.Fatal("checkpoint kept after its DaemonSet dropped the annotation")
	}
}

// TestCheckpointerDemotedNodeDropsCheckpoint: a master demoted loses its
// placement label, the control plane's DaemonSet no longer selects it and
// its pod leaves; the checkpoint goes then (not while the pod is still
// there), since it would run a control plane the cluster no longer means
// this node to run. A node still selected keeps its checkpoint.
func TestCheckpointerDemotedNodeDropsCheckpoint(t *testing.T) {
	e := newCkptEnv(t, checkpointer.Config{})
	ctx := context.Background()
	ds := apiserverDS()
	ds.Spec.Template.Spec.NodeSelector = map[string]string{btypes.LabelControlPlanePods: ""}
	e.create(ds)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: ckptNode, Labels: map[string]string{btypes.LabelControlPlanePods: ""}}}
	if _, err := e.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.create(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}, Data: map[string][]byte{"k": []byte("v")}})
	e.create(apiserverPod("kube-apiserver-aaaaa", "apiserver:1", ckptNode, e.now, e.now))
	e.tick(0)
	if e.stored() == nil {
		t.Fatal("not stored while the DaemonSet selects the node")
	}
	// The pod gone while the node is still selected (the DaemonSet
	// replacing it): kept.
	if err := e.cs.CoreV1().Pods("kube-system").Delete(ctx, "kube-apiserver-aaaaa", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.tick(time.Minute)
	if e.stored() == nil {
		t.Fatal("dropped while the DaemonSet still selects the node")
	}
	e.create(apiserverPod("kube-apiserver-bbbbb", "apiserver:1", ckptNode, e.now, e.now))
	e.tick(time.Second)
	// Demoted: the label goes; the pod is still there for a while.
	node.Labels = nil
	if _, err := e.cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.tick(time.Second)
	if e.stored() == nil {
		t.Fatal("dropped while the self-hosted pod is still on the node")
	}
	if err := e.cs.CoreV1().Pods("kube-system").Delete(ctx, "kube-apiserver-bbbbb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.tick(time.Second)
	if ck := e.stored(); ck != nil {
		t.Fatalf("the checkpoint of a DaemonSet that no longer selects this node is kept: %+v", ck.Owner())
	}
}

// TestCheckpointerQuietTicks: once every component is settled, a tick
// reads /readyz and nothing else, until a pod event, Resync, or an
// apiserver that stops answering; a component not settled keeps the full
// read on every tick.
func TestCheckpointerQuietTicks(t *testing.T) {
	e := newCkptEnv(t, checkpointer.Config{Resync: 10 * time.Second})
	ctx := context.Background()
	e.create(apiserverDS())
	e.create(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}, Data: map[string][]byte{"k": []byte("v")}})
	e.create(apiserverPod("kube-apiserver-aaaaa", "apiserver:1", ckptNode, e.now, e.now))
	fullReads := func() int { // each full read reads the pod's Secret
		n := 0
		for _, a := range e.cs.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "secrets" {
				n++
			}
		}
		return n
	}
	// waitForWatch ticks on the same instant until a full read happened:
	// the watch's start and events arrive on their own goroutine.
	waitForFullRead := func(what string) {
		t.Helper()
		before := fullReads()
		deadline := time.Now().Add(10 * time.Second)
		for fullReads() == before {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no full read", what)
			}
			time.Sleep(5 * time.Millisecond)
			e.tick(0)
		}
	}
	e.tick(0) // stores: an action, so not settled
	if e.stored() == nil {
		t.Fatal("not stored")
	}
	// Settled once the watch has started (its start asks for a full
	// read, as events may have come before it) and a tick read nothing.
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(e.cs.Actions(), func(a k8stesting.Action) bool { return a.GetVerb() == "watch" }) {
		if time.Now().After(deadline) {
			t.Fatal("the watch never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	for settled := fullReads(); ; settled = fullReads() {
		e.tick(0)
		if fullReads() == settled {
			break
		}
	}
	settledAt := fullReads()
	for range 9 {
		e.tick(time.Second)
	}
	if n := fullReads() - settledAt; n != 0 {
		t.Fatalf("settled, 9 s within Resync: %d full reads, want 0", n)
	}
	e.tick(time.Second)
	if n := fullReads() - settledAt; n != 1 {
		t.Fatalf("at Resync: %d full reads, want 1", n)
	}

	// A pod event: the next tick reads everything, at the same instant.
	p, err := e.cs.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-aaaaa", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels["touched"] = "yes"
	if _, err := e.cs.CoreV1().Pods("kube-system").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForFullRead("a pod event")

	// The apiserver stops answering: the tick is a full one (the
	// unreachable path), and so is every tick until it is settled again.
	e.ready = false
	before := fullReads()
	e.tick(time.Second)
	e.ready = true
	e.tick(time.Second)
	if n := fullReads() - before; n != 1 {
		t.Fatalf("unreachable, then reachable: %d full reads, want 1 (the unreachable tick reads no Secret)", n)
	}

	// A new version, Ready: not settled until it is stored.
	e.create(apiserverPod("kube-apiserver-bbbbb", "apiserver:2", ckptNode, e.now, e.now))
	waitForFullRead("a new pod")
	if ck := e.stored(); ck == nil || ck.Pod.Spec.Containers[0].Image != "apiserver:2" {
		t.Fatal("the new version is not stored")
	}
}

// TestCheckpointerDaemonSetDeletedWhileActive: the checkpoint is the only
// apiserver; deleting the DaemonSet does not remove or withdraw it.
func TestCheckpointerDaemonSetDeletedWhileActive(t *testing.T) {
	e := newCkptEnv(t, checkpointer.Config{})
	e.create(apiserverDS())
	e.create(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}, Data: map[string][]byte{"k": []byte("v")}})
	e.create(apiserverPod("kube-apiserver-aaaaa", "apiserver:1", ckptNode, e.now, e.now))
	e.tick(0)
	e.ready = false
	e.tick(time.Second)
	e.tick(10 * time.Second)
	if e.checkpointPod() == nil {
		t.Fatal("not activated")
	}
	ctx := context.Background()
	_ = e.cs.AppsV1().DaemonSets("kube-system").Delete(ctx, "kube-apiserver", metav1.DeleteOptions{})
	_ = e.cs.CoreV1().Pods("kube-system").Delete(ctx, "kube-apiserver-aaaaa", metav1.DeleteOptions{})
	e.ready = true
	for i := 0; i < 10; i++ {
		e.tick(time.Minute)
	}
	if p := e.checkpointPod(); p == nil || p.DeletionTimestamp != nil {
		t.Fatal("the only apiserver instance was withdrawn")
	}
	if e.stored() == nil {
		t.Fatal("the checkpoint of the only apiserver instance was removed")
	}
}

// TestCheckpointerLocalViewFromRuntime: while the apiserver is
// unreachable, the container runtime (not the kubelet's API) is the local
// view. A verified self-hosted pod that runs and answers its readiness
// endpoint holds the activation back; a runtime pod with another UID (the
// same labels, made by anyone) does not; once the verified one stops
// answering, the checkpoint runs.
func TestCheckpointerLocalViewFromRuntime(t *testing.T) {
	var mu sync.Mutex
	running := map[types.UID]bool{}
	serves := true
	var asked []string
	e := newCkptEnv(t, checkpointer.Config{
		PodRunning: func(_ context.Context, uid types.UID) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return running[uid], nil
		},
		ServesReadiness: func(_ context.Context, p *v1.Pod) (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, string(p.UID)+" "+p.Status.PodIP)
			return serves, "connection refused"
		}})
	pod := apiserverPod("kube-apiserver-aaaaa", "apiserver:1", ckptNode, e.now, e.now)
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
		Path: "/readyz", Port: intstr.FromInt32(6443), Scheme: v1.URISchemeHTTPS}}}
	e.create(apiserverDS())
	e.create(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}})
	e.create(pod)
	e.tick(0)
	if e.stored() == nil {
		t.Fatal("not stored")
	}
	mu.Lock()
	running["kube-apiserver-aaaaa-uid"] = true
	running["some-other-pod-uid"] = true
	mu.Unlock()
	e.ready = false
	e.tick(time.Second)
	e.tick(time.Minute)
	if e.checkpointPod() != nil {
		t.Fatal("activated while the runtime runs the verified self-hosted apiserver and it answers its readiness endpoint")
	}
	mu.Lock()
	if len(asked) == 0 || asked[0] != "kube-apiserver-aaaaa-uid 127.0.0.1" {
		t.Errorf("readiness asked of %v, want the verified pod's UID on 127.0.0.1 (host network)", asked)
	}
	serves = false
	mu.Unlock()
	e.tick(time.Second)
	if e.checkpointPod() == nil {
		t.Fatalf("not activated once the self-hosted pod does not answer: %+v", e.c.Status())
	}
	mu.Lock()
	for _, a := range asked {
		if a[:len("some-other")] == "some-other" {
			t.Errorf("the local view asked about a pod the rule book never verified: %s", a)
		}
	}
	mu.Unlock()
}

// TestCheckpointerRunRebootNoApiserver runs the loop for real (wall clock,
// -race) with a checkpoint already stored and a kubeconfig whose apiserver
// does not answer, as after a reboot: the checkpoint runs once the grace
// period passes, while Status is read concurrently.
func TestCheckpointerRunRebootNoApiserver(t *testing.T) {
	dir := t.TempDir()
	store, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck := checkpointer.NewCheckpoint(apiserverPod("kube-apiserver-aaaaa", "apiserver:1", ckptNode, time.Now(), time.Now()),
		[]v1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}, Data: map[string][]byte{"k": []byte("v")}}}, nil, time.Now())
	data, _ := json.Marshal(ck)
	if _, err := store.Put(checkpoint.KindPodCheckpoint, "kube-system", "kube-apiserver", data); err != nil {
		t.Fatal(err)
	}
	reg, err := podapi.NewRegistry(ckptNode, store)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetRuntime(newRecRuntime())
	kc := filepath.Join(dir, "admin.conf")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:%d", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, closedPort(t))), 0o600); err != nil {
		t.Fatal(err)
	}
	c := checkpointer.New(checkpointer.Config{NodeName: ckptNode, Kubeconfig: kc, Store: store, Registry: reg, Events: reg.Events,
		// The apiserver never answered since the start: the short delay
		// applies, not the hour.
		Period: 20 * time.Millisecond, Timing: checkpointer.Timing{ActivateAfter: time.Hour, ActivateAfterStart: 200 * time.Millisecond,
			WithdrawAfter: time.Second, FlapWindow: time.Minute, MaxWithdrawAfter: time.Minute}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st := c.Status()
		if p, err := reg.GetPod("kube-system", "kube-apiserver-checkpoint"); err == nil {
			if st.Reachable {
				t.Errorf("status says reachable")
			}
			if s, err := reg.GetSecret("kube-system", checkpointer.CheckpointObjectName("kube-apiserver", "kube-apiserver")); err != nil || string(s.Data["k"]) != "v" {
				t.Errorf("checkpoint Secret: %v %v", s, err)
			}
			_ = p
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint never activated; status %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func closedPort(t *testing.T) int {
	srv := httptest.NewServer(http.NotFoundHandler())
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	srv.Close()
	return port
}

// TestCheckpointerRejectsWhatCannotRun: a Ready pod that bootlet could not
// run without an apiserver (a PersistentVolumeClaim) does not replace the
// checkpoint that runs.
func TestCheckpointerRejectsWhatCannotRun(t *testing.T) {
	rec := &eventRecorder{}
	e := newCkptEnv(t, checkpointer.Config{Events: rec})
	e.create(apiserverDS())
	e.create(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}})
	e.create(apiserverPod("kube-apiserver-aaaaa", "apiserver:1", ckptNode, e.now, e.now))
	e.tick(0)
	if ck := e.stored(); ck == nil {
		t.Fatal("not stored")
	}
	ctx := context.Background()
	_ = e.cs.CoreV1().Pods("kube-system").Delete(ctx, "kube-apiserver-aaaaa", metav1.DeleteOptions{})
	bad := apiserverPod("kube-apiserver-bbbbb", "apiserver:2", ckptNode, e.now, e.now)
	bad.Spec.Volumes = append(bad.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
	e.create(bad)
	e.tick(time.Second)
	e.tick(time.Second)
	if ck := e.stored(); ck.Pod.Spec.Containers[0].Image != "apiserver:1" {
		t.Fatalf("a checkpoint bootlet cannot run replaced the one it can: %s", ck.Pod.Spec.Containers[0].Image)
	}
	if n := rec.count("CheckpointRejected"); n != 1 {
		t.Errorf("%d CheckpointRejected events, want 1 (reported once per spec)", n)
	}
}

type eventRecorder struct {
	mu      sync.Mutex
	reasons []string
}

func (r *eventRecorder) NodeEvent(_, _, reason, _ string) {
	r.mu.Lock()
	r.reasons = append(r.reasons, reason)
	r.mu.Unlock()
}

func (r *eventRecorder) count(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, x := range r.reasons {
		if x == reason {
			n++
		}
	}
	return n
}

// TestCheckpointerWatchWakesTheLoop: with a tick period of an hour, only
// the watch on this node's pods can make the loop see a new Ready pod.
func TestCheckpointerWatchWakesTheLoop(t *testing.T) {
	store, err := checkpoint.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg, err := podapi.NewRegistry(ckptNode, store)
	if err != nil {
		t.Fatal(err)
	}
	reg.SetRuntime(newRecRuntime())
	cs := fake.NewClientset()
	c := checkpointer.New(checkpointer.Config{NodeName: ckptNode, Client: cs, Store: store, Registry: reg, Period: time.Hour,
		Readyz: func(context.Context, kubernetes.Interface) error { return nil }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// The first tick has run once the component list is published.
	deadline := time.Now().Add(10 * time.Second)
	for c.Status().Components == nil {
		if time.Now().After(deadline) {
			t.Fatal("first tick never ran")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // let the watch start
	if _, err := cs.AppsV1().DaemonSets("kube-system").Create(ctx, apiserverDS(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets("kube-system").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Pods("kube-system").Create(ctx, apiserverPod("kube-apiserver-aaaaa", "apiserver:1", ckptNode, time.Now(), time.Now()), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, ok := store.Get(checkpoint.KindPodCheckpoint, "kube-system", "kube-apiserver"); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watch did not wake the loop: %+v", c.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCheckpointerRuntimeCorroborates: with no kubelet view, the runtime
// running the self-hosted pod's UID is what lets a Ready status that
// predates the checkpoint count; a UID it does not run never does.
func TestCheckpointerRuntimeCorroborates(t *testing.T) {
	var mu sync.Mutex
	running := map[types.UID]bool{}
	asked := 0
	e := newCkptEnv(t, checkpointer.Config{PodRunning: func(_ context.Context, uid types.UID) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		asked++
		return running[uid], nil
	}})
	e.create(apiserverDS())
	e.create(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}})
	e.create(apiserverPod("kube-apiserver-aaaaa", "apiserver:1", ckptNode, e.now.Add(-time.Hour), e.now.Add(-time.Hour)))
	e.tick(0)
	e.ready = false
	e.tick(time.Second)
	e.tick(10 * time.Second)
	if e.checkpointPod() == nil {
		t.Fatal("not activated")
	}
	e.ready = true
	for i := 0; i < 5; i++ {
		e.tick(10 * time.Second)
	}
	if p := e.checkpointPod(); p == nil || p.DeletionTimestamp != nil {
		t.Fatal("withdrawn although the runtime does not run the self-hosted pod")
	}
	mu.Lock()
	if asked == 0 {
		t.Error("the runtime was never asked")
	}
	running["kube-apiserver-aaaaa-uid"] = true
	mu.Unlock()
	e.tick(time.Second)
	e.tick(21 * time.Second)
	if p := e.checkpointPod(); p == nil || p.DeletionTimestamp == nil {
		t.Fatalf("not withdrawn with the runtime running the self-hosted pod: %+v", e.c.Status())
	}
}

// TestCheckpointerSharedPortNeedsOwnAnswer: the self-hosted apiserver and
// the checkpoint share host port 6443 (SO_REUSEPORT), so the kubelet's
// probe of the self-hosted pod may be answered by the checkpoint. Ready in
// the API and running in the runtime do not withdraw the checkpoint until
// the self-hosted pod's own process answers its readiness endpoint.
func TestCheckpointerSharedPortNeedsOwnAnswer(t *testing.T) {
	var mu sync.Mutex
	serves, asked := false, 0
	e := newCkptEnv(t, checkpointer.Config{
		PodRunning: func(context.Context, types.UID) (bool, error) { return true, nil },
		ServesReadiness: func(_ context.Context, p *v1.Pod) (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			asked++
			// While unreachable, the local view asks the verified pod on
			// 127.0.0.1 (host network); when reachable, the Ready one.
			if p.Name != "kube-apiserver-bbbbb" && p.Status.PodIP != "127.0.0.1" {
				t.Errorf("asked about %s, want the Ready self-hosted pod", p.Name)
			}
			return serves, "answered by the other apiserver"
		}})
	withProbe := func(p *v1.Pod) *v1.Pod {
		p.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
			Host: "192.0.2.2", Path: "/readyz", Port: intstr.FromInt32(6443), Scheme: v1.URISchemeHTTPS}}}
		return p
	}
	e.create(apiserverDS())
	e.create(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}})
	e.create(withProbe(apiserverPod("kube-apiserver-aaaaa", "apiserver:1", ckptNode, e.now.Add(-time.Hour), e.now.Add(-time.Hour))))
	e.tick(0)
	e.ready = false
	e.tick(time.Second)
	e.tick(10 * time.Second)
	if p := e.checkpointPod(); p == nil || p.Annotations[btypes.AnnotationCheckpointActivatedBy] != "outage" {
		t.Fatalf("not activated, or not for an outage: %v", p)
	}
	// The self-hosted pod comes back and turns Ready after the checkpoint
	// started: without a shared port that alone would count.
	e.ready = true
	if err := e.cs.CoreV1().Pods("kube-system").Delete(context.Background(), "kube-apiserver-aaaaa", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.create(withProbe(apiserverPod("kube-apiserver-bbbbb", "apiserver:1", ckptNode, e.now, e.now.Add(time.Second))))
	for i := 0; i < 5; i++ {
		e.tick(10 * time.Second)
	}
	if p := e.checkpointPod(); p == nil || p.DeletionTimestamp != nil {
		t.Fatal("withdrawn although the self-hosted pod's own process never answered its readiness endpoint")
	}
	mu.Lock()
	if asked == 0 {
		t.Fatal("the self-hosted pod's own answer was never asked for")
	}
	serves = true
	mu.Unlock()
	e.tick(time.Second)
	e.tick(21 * time.Second)
	if p := e.checkpointPod(); p == nil || p.DeletionTimestamp == nil {
		t.Fatalf("not withdrawn once the self-hosted pod answers itself: %+v", e.c.Status())
	}
}

// TestCheckpointerStartActivationWithdrawsOnOwnAnswer: a checkpoint
// activated before the apiserver answered once since bootlet started (a
// reboot) is annotated so, which a restarted bootlet reads back, and is
// withdrawn, through the port hand-over, at the first tick the self-hosted
// pod's own process answers its readiness endpoint, not WithdrawAfter later;
// never before.
func TestCheckpointerStartActivationWithdrawsOnOwnAnswer(t *testing.T) {
	var mu sync.Mutex
	serves := false
	var handovers []string
	e := newCkptEnv(t, checkpointer.Config{
		PodRunning: func(context.Context, types.UID) (bool, error) { return false, nil },
		ServesReadiness: func(_ context.Context, p *v1.Pod) (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return serves, "answered by the other apiserver"
		},
		Handover: func(_ context.Context, incoming, outgoing types.UID) {
			mu.Lock()
			defer mu.Unlock()
			handovers = append(handovers, string(incoming)+" <- "+string(outgoing))
		}})
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{
		Host: "192.0.2.2", Path: "/readyz", Port: intstr.FromInt32(6443), Scheme: v1.URISchemeHTTPS}}}
	e.create(apiserverDS())
	e.create(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}})
	pod := apiserverPod("kube-apiserver-aaaaa", "apiserver:1", ckptNode, e.now.Add(-time.Hour), e.now.Add(-time.Hour))
	pod.Spec.Containers[0].ReadinessProbe = probe
	e.create(pod)
	e.tick(0)
	if e.stored() == nil {
		t.Fatal("not stored")
	}
	// The power comes back: no apiserver answers the new bootlet.
	e.ready = false
	e.restart()
	e.tick(time.Second)
	e.tick(10 * time.Second)
	p := e.checkpointPod()
	if p == nil || p.Annotations[btypes.AnnotationCheckpointActivatedBy] != "start" {
		t.Fatalf("not activated, or not for a start: %v", p)
	}
	// The checkpoint answers; the etcd-kept Ready status of the self-hosted
	// pod (its own process does not answer) withdraws nothing, whatever
	// the time.
	e.ready = true
	for i := 0; i < 6; i++ {
		e.tick(10 * time.Second)
	}
	if p := e.checkpointPod(); p == nil || p.DeletionTimestamp != nil {
		t.Fatal("withdrawn although the self-hosted pod's own process never answered")
	}
	// bootlet restarts meanwhile: the cause is read back from the pod.
	e.restart()
	e.tick(time.Second)
	mu.Lock()
	serves = true
	mu.Unlock()
	e.tick(time.Second)
	if p := e.checkpointPod(); p == nil || p.DeletionTimestamp == nil {
		t.Fatalf("not withdrawn at the first tick the self-hosted pod answers itself: %+v", e.c.Status())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(handovers) != 1 || !strings.HasPrefix(handovers[0], "kube-apiserver-aaaaa-uid <- ") {
		t.Errorf("port hand-overs before the withdrawal: %v", handovers)
	}
}

// TestCheckpointerCallsWithinRBAC: every apiserver call the checkpointer
// makes (list and watch, owners, objects, through a store, an activation, a
// withdrawal and an owner check) is one that render's Role grants in
// kube-system (manifests.CheckpointerRules): it needs nothing more than it
// is given. manifests' TestCheckpointerRBAC checks it is given nothing more.
func TestCheckpointerCallsWithinRBAC(t *testing.T) {
	e := newCkptEnv(t, checkpointer.Config{})
	e.create(apiserverDS())
	e.create(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}})
	e.create(apiserverPod("kube-apiserver-aaaaa", "apiserver:1", ckptNode, e.now, e.now))
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler-abc", Namespace: "kube-system", UID: "rs-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "kube-scheduler", UID: "dep-uid", Controller: ptr.To(true)}}}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler", Namespace: "kube-system", UID: "dep-uid"},
		Spec: appsv1.DeploymentSpec{Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{btypes.AnnotationCheckpoint: "true"}}}}}
	ctx := context.Background()
	if _, err := e.cs.AppsV1().ReplicaSets("kube-system").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.AppsV1().Deployments("kube-system").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sched := apiserverPod("kube-scheduler-abc-x", "scheduler:1", ckptNode, e.now, e.now)
	sched.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "kube-scheduler-abc", UID: "rs-uid", Controller: ptr.To(true)}}
	sched.Spec.Volumes[0].ConfigMap, sched.Spec.Volumes[0].Secret = &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}, nil
	e.create(sched)
	e.tick(0)
	e.ready = false
	e.tick(time.Second)
	e.tick(11 * time.Second)
	e.ready = true
	_ = e.cs.AppsV1().DaemonSets("kube-system").Delete(ctx, "kube-apiserver", metav1.DeleteOptions{})
	_ = e.cs.CoreV1().Pods("kube-system").Delete(ctx, "kube-apiserver-aaaaa", metav1.DeleteOptions{})
	e.tick(time.Minute)
	if len(e.cs.Actions()) == 0 {
		t.Fatal("no calls recorded")
	}
	allowed := func(group, resource, verb string) bool {
		for _, r := range manifests.CheckpointerRules() {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	// Its one cluster-scoped read, this node's Node, is the node guard's
	// ClusterRole's, bound to the same user.
	clusterAllowed := func(group, resource, verb string) bool {
		for _, r := range manifests.NodeGuardRules() {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) && len(r.ResourceNames) == 0 {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	for _, a := range e.cs.Actions() {
		gvr := a.GetResource()
		// The test's own writes through the fake clientset are not the checkpointer's.
		if v := a.GetVerb(); v == "create" || v == "delete" || v == "update" {
			continue
		}
		call := fmt.Sprintf("%s %s/%s in %q", a.GetVerb(), gvr.Group, gvr.Resource, a.GetNamespace())
		seen[call] = true
		switch ns := a.GetNamespace(); {
		case ns == "" && clusterAllowed(gvr.Group, gvr.Resource, a.GetVerb()):
		case ns != "kube-system" || !allowed(gvr.Group, gvr.Resource, a.GetVerb()):
			t.Errorf("the checkpointer called %s, which its Role does not grant", call)
		}
	}
	for _, want := range []string{`list /pods in "kube-system"`, `get apps/daemonsets in "kube-system"`, `get apps/replicasets in "kube-system"`,
		`get apps/deployments in "kube-system"`, `get /secrets in "kube-system"`, `get /configmaps in "kube-system"`} {
		if !seen[want] {
			t.Errorf("the checkpointer never called %s (calls: %v)", want, seen)
		}
	}
}

// TestCheckpointerHoldsUngatedVersion: while an upgrade step of the
// apiserver on this node is in flight, a Ready pod of its target version
// does not move the checkpoint; once the step is through, it does. A read
// that fails holds the checkpoint for that tick; a Forbidden one (an older
// cluster's RBAC) does not.
func TestCheckpointerHoldsUngatedVersion(t *testing.T) {
	var steps []checkpointer.UngatedStep
	var readErr error
	reads := 0
	e := newCkptEnv(t, checkpointer.Config{UngatedSteps: func(context.Context, kubernetes.Interface) ([]checkpointer.UngatedStep, error) {
		reads++
		return steps, readErr
	}})
	t0 := e.now
	e.create(apiserverDS())
	e.create(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}, Data: map[string][]byte{"apiserver.crt": []byte("v1")}})
	old := apiserverPod("kube-apiserver-aaaaa", "registry.k8s.io/kube-apiserver:v1.36.3", ckptNode, t0.Add(-time.Hour), t0.Add(-time.Hour))
	e.create(old)
	e.tick(0)
	if ck := e.stored(); ck == nil || ck.Pod.Spec.Containers[0].Image != "registry.k8s.io/kube-apiserver:v1.36.3" {
		t.Fatalf("first checkpoint: %+v", ck)
	}
	if reads != 0 {
		t.Errorf("the ClusterVersion was read %d times with no checkpoint to move", reads)
	}

	// The step is in flight; the surge's new pod is Ready beside the old.
	steps = []checkpointer.UngatedStep{{Component: "kube-apiserver", Node: ckptNode, To: "v1.37.2"}}
	e.create(apiserverPod("kube-apiserver-bbbbb", "registry.k8s.io/kube-apiserver:v1.37.2", ckptNode, e.now, e.now))
	e.tick(time.Second)
	if img := e.stored().Pod.Spec.Containers[0].Image; img != "registry.k8s.io/kube-apiserver:v1.36.3" {
		t.Fatalf("a version whose step is in flight moved the checkpoint to %s", img)
	}
	// A read that fails holds it for the tick.
	steps, readErr = nil, errors.New("timeout")
	e.tick(time.Second)
	if img := e.stored().Pod.Spec.Containers[0].Image; img != "registry.k8s.io/kube-apiserver:v1.36.3" {
		t.Fatalf("a failed read of the upgrade moved the checkpoint to %s", img)
	}
	// The gate passed: the step is no longer in flight.
	readErr = nil
	e.tick(time.Second)
	if img := e.stored().Pod.Spec.Containers[0].Image; img != "registry.k8s.io/kube-apiserver:v1.37.2" {
		t.Fatalf("the step through its gate did not move the checkpoint: %s", img)
	}
	// A cluster rendered before the checkpointer could read the
	// ClusterVersion: checkpoints move as before.
	steps, readErr = nil, apierrors.NewForbidden(schema.GroupResource{Group: "bootlet.dev", Resource: "clusterversions"}, "cluster", errors.New("RBAC"))
	e.create(apiserverPod("kube-apiserver-ccccc", "registry.k8s.io/kube-apiserver:v1.37.3", ckptNode, e.now, e.now))
	e.tick(time.Second)
	if img := e.stored().Pod.Spec.Containers[0].Image; img != "registry.k8s.io/kube-apiserver:v1.37.3" {
		t.Fatalf("a Forbidden read held the checkpoint at %s", img)
	}
}
