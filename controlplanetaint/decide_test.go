package controlplanetaint

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	btypes "github.com/bootlet/bootlet/types"
)

func TestDecide(t *testing.T) {
	m := func(name string, tainted, managed bool) Node {
		return Node{Name: name, ControlPlane: true, Tainted: tainted, Managed: managed}
	}
	w := func(name string) Node { return Node{Name: name} }
	for _, tc := range []struct {
		name        string
		nodes       []Node
		want        []Action
		schedulable bool
	}{
		{"a single node stays schedulable", []Node{m("m1", false, false)}, nil, true},
		{"three masters alone stay schedulable", []Node{m("m1", false, false), m("m2", false, false), m("m3", false, false)}, nil, true},
		{"a worker joins: every master is tainted", []Node{m("m2", false, false), m("m1", false, false), w("w1")},
			[]Action{{"m1", AddTaint}, {"m2", AddTaint}}, false},
		{"already tainted: nothing to do", []Node{m("m1", true, true), w("w1")}, nil, false},
		{"an administrator's taint with a worker: kept", []Node{m("m1", true, false), w("w1")}, nil, false},
		{"the last worker leaves: bootlet's taint goes", []Node{m("m1", true, true)}, []Action{{"m1", RemoveTaint}}, true},
		{"the last worker leaves: an administrator's taint stays", []Node{m("m1", true, false)}, nil, true},
		{"no node at all", nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.nodes)
			if !reflect.DeepEqual(d.Actions, tc.want) || d.Schedulable != tc.schedulable {
				t.Fatalf("Decide = %+v, want actions %+v schedulable %v", d, tc.want, tc.schedulable)
			}
			if d.Why == "" {
				t.Fatal("no reason")
			}
			if tc.schedulable && !strings.Contains(d.Why, "no worker") {
				t.Fatalf("a schedulable control plane does not say why: %q", d.Why)
			}
		})
	}
}

func TestFromNode(t *testing.T) {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m1", Labels: map[string]string{btypes.LabelControlPlane: ""},
		Annotations: map[string]string{AnnotationManaged: "true"}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: btypes.LabelControlPlane, Effect: v1.TaintEffectNoSchedule}}}}
	if got := FromNode(n); got != (Node{Name: "m1", ControlPlane: true, Tainted: true, Managed: true}) {
		t.Fatalf("FromNode = %+v", got)
	}
	n.Spec.Taints[0].Effect = v1.TaintEffectNoExecute
	if got := FromNode(n); got.Tainted {
		t.Fatal("a NoExecute taint counted as the NoSchedule one")
	}
}
