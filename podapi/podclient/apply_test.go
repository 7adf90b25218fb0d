package podclient

import (
	"context"
	"errors"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestMergeAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cur, want map[string]string
		out       map[string]string
	}{
		{"both empty", nil, nil, map[string]string{}},
		{"daemon's and kubelet's kept",
			map[string]string{"kubernetes.io/config.source": "api", "bootlet.dev/owner": "bootlet", "user": "old"},
			map[string]string{"user": "new"},
			map[string]string{"kubernetes.io/config.source": "api", "bootlet.dev/owner": "bootlet", "user": "new"}},
		{"a user's annotation the manifest dropped goes",
			map[string]string{"user": "old", "kubernetes.io/other": "x"}, nil, map[string]string{}},
		{"the manifest wins over a kept one",
			map[string]string{"bootlet.dev/start-after": "a"},
			map[string]string{"bootlet.dev/start-after": "b"},
			map[string]string{"bootlet.dev/start-after": "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mergeAnnotations(tc.cur, tc.want); !reflect.DeepEqual(got, tc.out) {
				t.Errorf("got %v, want %v", got, tc.out)
			}
		})
	}
}

func TestSetImages(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dst, src []v1.Container
		want     []string
	}{
		{"same names", []v1.Container{{Name: "a", Image: "a:1"}, {Name: "b", Image: "b:1"}},
			[]v1.Container{{Name: "b", Image: "b:2"}, {Name: "a", Image: "a:2"}}, []string{"a:2", "b:2"}},
		{"only in dst kept", []v1.Container{{Name: "a", Image: "a:1"}}, []v1.Container{{Name: "z", Image: "z:1"}}, []string{"a:1"}},
		{"no src", []v1.Container{{Name: "a", Image: "a:1"}}, nil, []string{"a:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setImages(tc.dst, tc.src)
			var got []string
			for _, c := range tc.dst {
				got = append(got, c.Image)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func pod(ns, name, image string, labels map[string]string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}}}
}

func TestApply(t *testing.T) {
	existing := []runtime.Object{
		pod("default", "same", "img:1", map[string]string{"app": "x"}),
		pod("default", "newimage", "img:1", nil),
		pod("kube-system", "relabel", "img:1", nil),
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm"}, Data: map[string]string{"k": "v"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "s"}, StringData: map[string]string{"k": "v"}},
	}
	for _, tc := range []struct {
		name string
		ns   string
		obj  runtime.Object
		want string
		err  bool
	}{
		{"a new pod is created in default", "", pod("", "fresh", "img:1", nil), "pod/fresh created", false},
		{"the same pod is unchanged", "", pod("", "same", "img:1", map[string]string{"app": "x"}), "pod/same unchanged", false},
		{"a new image is configured", "", pod("", "newimage", "img:2", nil), "pod/newimage configured", false},
		{"new labels are configured in -n's namespace", "kube-system", pod("", "relabel", "img:1", map[string]string{"a": "b"}), "pod/relabel configured", false},
		{"the object's namespace wins over -n", "other", pod("default", "same", "img:1", map[string]string{"app": "x"}), "pod/same unchanged", false},
		{"an equal configmap is unchanged", "", &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}}, "configmap/cm unchanged", false},
		{"a changed configmap is configured", "", &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "w"}}, "configmap/cm configured", false},
		{"an existing secret is always configured", "", &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": "v"}}, "secret/s configured", false},
		{"a new secret is created", "", &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s2"}}, "secret/s2 created", false},
		{"other kinds are refused", "", &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc"}}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewSimpleClientset(existing...)
			got := Apply(context.Background(), cs, []runtime.Object{tc.obj}, tc.ns)
			if len(got) != 1 || (got[0].Err != nil) != tc.err || got[0].Message != tc.want {
				t.Fatalf("got %+v, want %q (error %v)", got, tc.want, tc.err)
			}
		})
	}
}

// TestApplyUpdateKeepsDaemonAnnotations: a pod update sends the stored pod
// with only labels, annotations and images changed, and the daemon's
// annotations survive a manifest that does not carry them.
func TestApplyUpdateKeepsDaemonAnnotations(t *testing.T) {
	cur := pod("default", "p", "img:1", nil)
	cur.Annotations = map[string]string{"bootlet.dev/owner": "bootlet", "note": "old"}
	cur.Spec.NodeName = "node1"
	cs := fake.NewSimpleClientset(cur)
	want := pod("", "p", "img:2", map[string]string{"app": "x"})
	want.Annotations = map[string]string{"note": "new"}
	if got := Apply(context.Background(), cs, []runtime.Object{want}, ""); got[0].Err != nil || got[0].Message != "pod/p configured" {
		t.Fatalf("got %+v", got)
	}
	p, err := cs.CoreV1().Pods("default").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.Containers[0].Image != "img:2" || p.Spec.NodeName != "node1" || p.Labels["app"] != "x" ||
		!reflect.DeepEqual(p.Annotations, map[string]string{"bootlet.dev/owner": "bootlet", "note": "new"}) {
		t.Fatalf("stored pod: %+v %+v", p.ObjectMeta, p.Spec)
	}
}

// TestApplyGoesOnAfterAFailure: each object gets its own outcome, in order.
func TestApplyGoesOnAfterAFailure(t *testing.T) {
	cs := fake.NewSimpleClientset()
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.CreateAction).GetObject().(*v1.Pod).Name == "bad" {
			return true, nil, errors.New("refused")
		}
		return false, nil, nil
	})
	got := Apply(context.Background(), cs, []runtime.Object{pod("", "bad", "i", nil), pod("", "good", "i", nil)}, "")
	if len(got) != 2 || got[0].Err == nil || got[1].Err != nil || got[1].Message != "pod/good created" {
		t.Fatalf("got %+v", got)
	}
}
