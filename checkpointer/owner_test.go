package checkpointer

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	btypes "github.com/bootlet/bootlet/types"
)

// mapOwners is an ownerReader over fixed objects; a name in failing
// answers a server error (neither found nor missing).
type mapOwners struct {
	ds  map[string]*appsv1.DaemonSet
	rs  map[string]*appsv1.ReplicaSet
	dep map[string]*appsv1.Deployment
	// node is this node's Node; nil reads as NotFound.
	node    *v1.Node
	failing map[string]bool
}

func (m mapOwners) ThisNode() (*v1.Node, error) {
	if m.node != nil && !m.failing["Node/"+m.node.Name] {
		return m.node, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, "this-node")
}

func (m mapOwners) lookup(kind, ns, name string) error {
	if m.failing[kind+"/"+name] {
		return apierrors.NewInternalError(errors.New("etcd timeout"))
	}
	return apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: strings.ToLower(kind) + "s"}, name)
}

func (m mapOwners) DaemonSet(ns, name string) (*appsv1.DaemonSet, error) {
	if o, ok := m.ds[ns+"/"+name]; ok && !m.failing["DaemonSet/"+name] {
		return o, nil
	}
	return nil, m.lookup("DaemonSet", ns, name)
}

func (m mapOwners) ReplicaSet(ns, name string) (*appsv1.ReplicaSet, error) {
	if o, ok := m.rs[ns+"/"+name]; ok && !m.failing["ReplicaSet/"+name] {
		return o, nil
	}
	return nil, m.lookup("ReplicaSet", ns, name)
}

func (m mapOwners) Deployment(ns, name string) (*appsv1.Deployment, error) {
	if o, ok := m.dep[ns+"/"+name]; ok && !m.failing["Deployment/"+name] {
		return o, nil
	}
	return nil, m.lookup("Deployment", ns, name)
}

func annotatedTemplate(annotated bool) v1.PodTemplateSpec {
	t := v1.PodTemplateSpec{}
	if annotated {
		t.Annotations = map[string]string{btypes.AnnotationCheckpoint: "true"}
	}
	return t
}

func appsRef(kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}
}

// TestVerifyPodOwner is the ownership rule book, case by case: only a
// DaemonSet's or a Deployment's pod in a served namespace, every link's
// UID as the apiserver has it, and the controller's own template annotated.
func TestVerifyPodOwner(t *testing.T) {
	world := func() mapOwners {
		return mapOwners{
			ds: map[string]*appsv1.DaemonSet{
				"kube-system/kube-apiserver": {ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system", UID: "ds-uid"},
					Spec: appsv1.DaemonSetSpec{Template: annotatedTemplate(true)}},
				"kube-system/plain-ds": {ObjectMeta: metav1.ObjectMeta{Name: "plain-ds", Namespace: "kube-system", UID: "plain-uid"},
					Spec: appsv1.DaemonSetSpec{Template: annotatedTemplate(false)}},
				"team-a/agent": {ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "team-a", UID: "agent-uid"},
					Spec: appsv1.DaemonSetSpec{Template: annotatedTemplate(true)}},
			},
			rs: map[string]*appsv1.ReplicaSet{
				"kube-system/kube-scheduler-abc": {ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler-abc", Namespace: "kube-system", UID: "rs-uid",
					OwnerReferences: []metav1.OwnerReference{appsRef("Deployment", "kube-scheduler", "dep-uid")}}},
				"kube-system/orphan-rs": {ObjectMeta: metav1.ObjectMeta{Name: "orphan-rs", Namespace: "kube-system", UID: "orphan-uid"}},
				"kube-system/stale-rs": {ObjectMeta: metav1.ObjectMeta{Name: "stale-rs", Namespace: "kube-system", UID: "stale-rs-uid",
					OwnerReferences: []metav1.OwnerReference{appsRef("Deployment", "kube-scheduler", "old-dep-uid")}}},
				"kube-system/plain-rs": {ObjectMeta: metav1.ObjectMeta{Name: "plain-rs", Namespace: "kube-system", UID: "plain-rs-uid",
					OwnerReferences: []metav1.OwnerReference{appsRef("Deployment", "plain-dep", "plain-dep-uid")}}},
			},
			dep: map[string]*appsv1.Deployment{
				"kube-system/kube-scheduler": {ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler", Namespace: "kube-system", UID: "dep-uid"},
					Spec: appsv1.DeploymentSpec{Template: annotatedTemplate(true)}},
				"kube-system/plain-dep": {ObjectMeta: metav1.ObjectMeta{Name: "plain-dep", Namespace: "kube-system", UID: "plain-dep-uid"},
					Spec: appsv1.DeploymentSpec{Template: annotatedTemplate(false)}},
			},
		}
	}
	pod := func(ns string, refs ...metav1.OwnerReference) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns, UID: "pod-uid",
			Annotations: map[string]string{btypes.AnnotationCheckpoint: "true"}, OwnerReferences: refs}}
	}
	kubeSystem := []string{"kube-system"}
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		namespaces []string
		mutate     func(*mapOwners)
		want       ownerVerdict
		wantOwner  CheckpointOwner
		wantWhy    string
	}{
		{name: "DaemonSet pod, UID and template match", pod: pod("kube-system", appsRef("DaemonSet", "kube-apiserver", "ds-uid")),
			want: ownerOK, wantOwner: CheckpointOwner{Kind: "DaemonSet", Namespace: "kube-system", Name: "kube-apiserver", UID: "ds-uid"}},
		{name: "Deployment pod through its ReplicaSet", pod: pod("kube-system", appsRef("ReplicaSet", "kube-scheduler-abc", "rs-uid")),
			want: ownerOK, wantOwner: CheckpointOwner{Kind: "Deployment", Namespace: "kube-system", Name: "kube-scheduler", UID: "dep-uid"}},
		{name: "not annotated", pod: func() *v1.Pod {
			p := pod("kube-system", appsRef("DaemonSet", "kube-apiserver", "ds-uid"))
			p.Annotations = nil
			return p
		}(), want: ownerRefused, wantWhy: "does not ask"},
		{name: "a checkpoint's own mirror pod", pod: func() *v1.Pod {
			p := pod("kube-system", appsRef("DaemonSet", "kube-apiserver", "ds-uid"))
			p.Annotations[btypes.AnnotationCheckpointOf] = "kube-system/kube-apiserver"
			return p
		}(), want: ownerRefused, wantWhy: "does not ask"},
		{name: "namespace not served", pod: pod("default", appsRef("DaemonSet", "kube-apiserver", "ds-uid")), want: ownerRefused, wantWhy: "namespace \"default\""},
		{name: "namespace served once widened", pod: pod("team-a", appsRef("DaemonSet", "agent", "agent-uid")), namespaces: []string{"kube-system", "team-a"},
			want: ownerOK, wantOwner: CheckpointOwner{Kind: "DaemonSet", Namespace: "team-a", Name: "agent", UID: "agent-uid"}},
		{name: "bare pod named like the apiserver", pod: func() *v1.Pod {
			p := pod("kube-system")
			p.Name = "kube-apiserver"
			return p
		}(), want: ownerRefused, wantWhy: "bare pod"},
		{name: "owner reference that is not the controller", pod: pod("kube-system", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "kube-apiserver", UID: "ds-uid"}),
			want: ownerRefused, wantWhy: "bare pod"},
		{name: "owner kind StatefulSet", pod: pod("kube-system", appsRef("StatefulSet", "kube-apiserver", "ds-uid")), want: ownerRefused, wantWhy: "StatefulSet"},
		{name: "owner kind Job", pod: pod("kube-system", metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "j", UID: "j", Controller: ptr.To(true)}),
			want: ownerRefused, wantWhy: "Job"},
		{name: "a DaemonSet of another API group", pod: pod("kube-system", metav1.OwnerReference{APIVersion: "evil.example/v1", Kind: "DaemonSet", Name: "kube-apiserver", UID: "ds-uid", Controller: ptr.To(true)}),
			want: ownerRefused, wantWhy: "evil.example/v1"},
		{name: "DaemonSet UID mismatch (forged reference)", pod: pod("kube-system", appsRef("DaemonSet", "kube-apiserver", "forged-uid")), want: ownerRefused, wantWhy: "another object of the same name"},
		{name: "DaemonSet missing", pod: pod("kube-system", appsRef("DaemonSet", "nope", "x")), want: ownerRefused, wantWhy: "does not exist"},
		{name: "DaemonSet template lacks the annotation", pod: pod("kube-system", appsRef("DaemonSet", "plain-ds", "plain-uid")), want: ownerRefused, wantWhy: "pod template"},
		{name: "DaemonSet read fails: unknown", pod: pod("kube-system", appsRef("DaemonSet", "kube-apiserver", "ds-uid")),
			mutate: func(m *mapOwners) { m.failing = map[string]bool{"DaemonSet/kube-apiserver": true} }, want: ownerUnknown},
		{name: "ReplicaSet UID mismatch", pod: pod("kube-system", appsRef("ReplicaSet", "kube-scheduler-abc", "forged")), want: ownerRefused, wantWhy: "ReplicaSet kube-scheduler-abc with uid forged"},
		{name: "ReplicaSet not owned by a Deployment", pod: pod("kube-system", appsRef("ReplicaSet", "orphan-rs", "orphan-uid")), want: ownerRefused, wantWhy: "not controlled by a Deployment"},
		{name: "ReplicaSet owned by a Deployment of another UID", pod: pod("kube-system", appsRef("ReplicaSet", "stale-rs", "stale-rs-uid")), want: ownerRefused, wantWhy: "another object of the same name"},
		{name: "Deployment template lacks the annotation", pod: pod("kube-system", appsRef("ReplicaSet", "plain-rs", "plain-rs-uid")), want: ownerRefused, wantWhy: "pod template"},
		{name: "ReplicaSet missing", pod: pod("kube-system", appsRef("ReplicaSet", "gone", "x")), want: ownerRefused, wantWhy: "does not exist"},
		{name: "Deployment missing", pod: pod("kube-system", appsRef("ReplicaSet", "kube-scheduler-abc", "rs-uid")),
			mutate: func(m *mapOwners) { delete(m.dep, "kube-system/kube-scheduler") }, want: ownerRefused, wantWhy: "does not exist"},
		{name: "Deployment read fails: unknown", pod: pod("kube-system", appsRef("ReplicaSet", "kube-scheduler-abc", "rs-uid")),
			mutate: func(m *mapOwners) { m.failing = map[string]bool{"Deployment/kube-scheduler": true} }, want: ownerUnknown},
		{name: "ReplicaSet read fails: unknown", pod: pod("kube-system", appsRef("ReplicaSet", "kube-scheduler-abc", "rs-uid")),
			mutate: func(m *mapOwners) { m.failing = map[string]bool{"ReplicaSet/kube-scheduler-abc": true} }, want: ownerUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := world()
			if tc.mutate != nil {
				tc.mutate(&m)
			}
			ns := tc.namespaces
			if ns == nil {
				ns = kubeSystem
			}
			owner, v, why := verifyPodOwner(tc.pod, ns, m)
			if v != tc.want {
				t.Fatalf("verdict %d, want %d (why: %s)", v, tc.want, why)
			}
			if tc.want == ownerOK && owner != tc.wantOwner {
				t.Errorf("owner %v, want %v", owner, tc.wantOwner)
			}
			if !strings.Contains(why, tc.wantWhy) {
				t.Errorf("why %q, want it to say %q", why, tc.wantWhy)
			}
		})
	}
}

// TestStoredOwnerVerdict: a stored checkpoint is refused by its record
// alone when it could never be stored today; its owner is gone only on
// the apiserver's positive answer, and unknown without one.
func TestStoredOwnerVerdict(t *testing.T) {
	m := mapOwners{ds: map[string]*appsv1.DaemonSet{
		"kube-system/kube-apiserver": {ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system", UID: "ds-uid"},
			Spec: appsv1.DaemonSetSpec{Template: annotatedTemplate(true)}}}}
	ck := func(kind, name string, uid types.UID) *Checkpoint {
		return &Checkpoint{Namespace: "kube-system", Name: "kube-apiserver", OwnerKind: kind, OwnerName: name, OwnerUID: uid}
	}
	ns := []string{"kube-system"}
	// The control plane's DaemonSets select the masters' placement label
	// (a nodeSelector), or in a site's own set a required node affinity.
	const placement = btypes.LabelControlPlanePods
	master := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m1", Labels: map[string]string{placement: "", "kubernetes.io/os": "linux"}}}
	demoted := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m1", Labels: map[string]string{"kubernetes.io/os": "linux"}}}
	withDS := func(base mapOwners, node *v1.Node, spec v1.PodSpec) mapOwners {
		ds := base.ds["kube-system/kube-apiserver"].DeepCopy()
		ds.Spec.Template.Spec = spec
		return mapOwners{ds: map[string]*appsv1.DaemonSet{"kube-system/kube-apiserver": ds}, node: node}
	}
	placed := func(base mapOwners, node *v1.Node) mapOwners {
		return withDS(base, node, v1.PodSpec{NodeSelector: map[string]string{placement: ""}})
	}
	affine := func(base mapOwners, node *v1.Node) mapOwners {
		return withDS(base, node, v1.PodSpec{Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{Key: placement, Operator: v1.NodeSelectorOpExists}}}}}}}})
	}
	for _, tc := range []struct {
		name   string
		ck     *Checkpoint
		reader ownerReader
		want   ownerVerdict
		why    string
	}{
		{name: "owner stands", ck: ck("DaemonSet", "kube-apiserver", "ds-uid"), reader: m, want: ownerOK},
		{name: "record of an older bootlet without a UID: adopted", ck: ck("DaemonSet", "kube-apiserver", ""), reader: m, want: ownerOK},
		{name: "owner recreated with another UID: gone", ck: ck("DaemonSet", "kube-apiserver", "old-uid"), reader: m, want: ownerRefused},
		{name: "owner deleted: gone", ck: ck("Deployment", "kube-apiserver", "d"), reader: m, want: ownerRefused},
		{name: "apiserver unreachable: unknown, kept", ck: ck("DaemonSet", "kube-apiserver", "old-uid"), reader: nil, want: ownerUnknown},
		{name: "read fails: unknown, kept", ck: ck("DaemonSet", "kube-apiserver", "ds-uid"),
			reader: mapOwners{ds: m.ds, failing: map[string]bool{"DaemonSet/kube-apiserver": true}}, want: ownerUnknown},
		{name: "bare pod record: refused even unreachable", ck: ck("", "", ""), reader: nil, want: ownerRefused},
		{name: "unknown kind record: refused even unreachable", ck: ck("StatefulSet", "kube-apiserver", "s"), reader: nil, want: ownerRefused},
		{name: "namespace no longer served: refused", ck: &Checkpoint{Namespace: "team-a", Name: "agent", OwnerKind: "DaemonSet", OwnerName: "agent"}, reader: nil, want: ownerRefused},
		{name: "a DaemonSet that selects this node stands", ck: ck("DaemonSet", "kube-apiserver", "ds-uid"), reader: placed(m, master), want: ownerOK},
		{name: "a DaemonSet that no longer selects this node (a demoted master): gone", ck: ck("DaemonSet", "kube-apiserver", "ds-uid"), reader: placed(m, demoted), want: ownerRefused, why: "no longer selects node m1"},
		{name: "a DaemonSet whose required node affinity no longer matches: gone", ck: ck("DaemonSet", "kube-apiserver", "ds-uid"), reader: affine(m, demoted), want: ownerRefused, why: "no longer selects node m1"},
		{name: "a DaemonSet whose required node affinity matches stands", ck: ck("DaemonSet", "kube-apiserver", "ds-uid"), reader: affine(m, master), want: ownerOK},
		{name: "this node's Node not found: no evidence, kept", ck: ck("DaemonSet", "kube-apiserver", "ds-uid"), reader: placed(m, nil), want: ownerOK},
		{name: "this node's Node unreadable: no evidence, kept", ck: ck("DaemonSet", "kube-apiserver", "ds-uid"),
			reader: func() mapOwners { r := placed(m, demoted); r.failing = map[string]bool{"Node/m1": true}; return r }(), want: ownerOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, v, why := storedOwnerVerdict(tc.ck, ns, tc.reader)
			if v != tc.want {
				t.Fatalf("verdict %d, want %d (why: %s)", v, tc.want, why)
			}
			if !strings.Contains(why, tc.why) {
				t.Errorf("why %q, want it to say %q", why, tc.why)
			}
		})
	}
}

// TestMadeFor: an object in bootlet's registry is the checkpointer's for a
// checkpoint only with its component and, when recorded, its owner.
func TestMadeFor(t *testing.T) {
	ck := &Checkpoint{Namespace: "kube-system", Name: "kube-apiserver", OwnerKind: "DaemonSet", OwnerName: "kube-apiserver", OwnerUID: "ds-uid"}
	ours, _ := CheckpointObjects(&Checkpoint{Namespace: ck.Namespace, Name: ck.Name, OwnerKind: ck.OwnerKind, OwnerName: ck.OwnerName, OwnerUID: ck.OwnerUID,
		Secrets: []v1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "s"}}}})
	other := ours[0].ObjectMeta.DeepCopy()
	other.Annotations[btypes.AnnotationCheckpointOwner] = "Deployment kube-system/kube-apiserver (uid dep)"
	legacy := ours[0].ObjectMeta.DeepCopy()
	delete(legacy.Annotations, btypes.AnnotationCheckpointOwner)
	otherComponent := ours[0].ObjectMeta.DeepCopy()
	otherComponent.Labels[btypes.LabelCheckpointOf] = "kube"
	otherComponent.Annotations[btypes.AnnotationCheckpointOf] = "kube-system/kube"
	for _, tc := range []struct {
		name string
		meta metav1.ObjectMeta
		want bool
	}{
		{"made for it", ours[0].ObjectMeta, true},
		{"another owner of the same component name", *other, false},
		{"made before owners were recorded", *legacy, true},
		{"another component's (a name collision)", *otherComponent, false},
		{"a user's own object", metav1.ObjectMeta{Name: ours[0].Name, Namespace: "kube-system"}, false},
	} {
		if got := madeFor(tc.meta, ck); got != tc.want {
			t.Errorf("%s: madeFor = %v, want %v", tc.name, got, tc.want)
		}
	}
}
