package masters

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecideWorkload(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler"}}
	deleting := dep.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	ds := func(gen, observed int64, desired, updated, ready int32) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler", Generation: gen},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: observed, DesiredNumberScheduled: desired, UpdatedNumberScheduled: updated, NumberReady: ready}}
	}
	dsDeleting := ds(1, 1, 3, 3, 3)
	dsDeleting.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name    string
		masters int
		dep     *appsv1.Deployment
		ds      *appsv1.DaemonSet
		want    WorkloadStep
		why     string
		// underway: another component's change ("" none).
		underway string
	}{
		{"one master keeps its Deployment", 1, dep, nil, WorkloadKeep, "", ""},
		{"unsettled count (0) changes nothing", 0, dep, nil, WorkloadKeep, "", ""},
		{"several masters' render: a DaemonSet alone", 3, nil, ds(1, 1, 3, 3, 3), WorkloadKeep, "", ""},
		{"a second master: the DaemonSet first", 2, dep, nil, WorkloadAddDaemonSet, "2 masters", ""},
		{"a Deployment being deleted is left to its deletion", 2, deleting, nil, WorkloadKeep, "being deleted", ""},
		{"the DaemonSet's spec not seen yet", 2, dep, ds(1, 0, 0, 0, 0), WorkloadKeep, "not seen its spec", ""},
		{"the DaemonSet selects fewer nodes than masters", 3, dep, ds(1, 1, 2, 2, 2), WorkloadKeep, "selects 2 nodes of 3", ""},
		{"a pod not Ready yet", 3, dep, ds(1, 1, 3, 3, 2), WorkloadKeep, "3 of 3 pods updated, 2 Ready", ""},
		{"a pod not updated yet", 3, dep, ds(2, 2, 3, 2, 3), WorkloadKeep, "2 of 3 pods updated", ""},
		{"Ready on every master: the Deployment goes", 3, dep, ds(1, 1, 3, 3, 3), WorkloadRemoveDeployment, "Ready on its 3 nodes", ""},
		{"a master the count does not know yet selected too", 2, dep, ds(1, 1, 3, 3, 3), WorkloadRemoveDeployment, "", ""},
		{"back to one master during the change: it goes on", 1, dep, ds(1, 1, 1, 1, 1), WorkloadRemoveDeployment, "Ready on its 1 nodes", ""},
		{"back to one master, the DaemonSet not Ready: wait", 1, dep, ds(1, 1, 1, 1, 0), WorkloadKeep, "0 Ready", ""},
		{"unsettled count during the change: wait", 0, dep, ds(1, 1, 1, 1, 1), WorkloadKeep, "", ""},
		{"a DaemonSet being deleted counts for nothing, Ready or not", 3, dep, dsDeleting, WorkloadKeep, "its DaemonSet is being deleted", ""},
		{"another component changing: no DaemonSet yet", 2, dep, nil, WorkloadKeep, "waits until kube-controller-manager follows them", "kube-controller-manager"},
		{"another component changing: this one's change goes on", 3, dep, ds(1, 1, 3, 3, 3), WorkloadRemoveDeployment, "Ready on its 3 nodes", "kube-controller-manager"},
		{"another component changing, one master: nothing", 1, dep, nil, WorkloadKeep, "", "kube-controller-manager"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := DecideWorkload(tc.masters, tc.dep, tc.ds, tc.underway)
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("DecideWorkload = %q (%q), want %q (with %q)", got, why, tc.want, tc.why)
			}
		})
	}
}

func TestDaemonSetOfKeepsOtherAffinity(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler", Namespace: "kube-system"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-scheduler"}},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "kube-scheduler"}},
				Spec: v1.PodSpec{Affinity: &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{}, NodeAffinity: &v1.NodeAffinity{}}}}}}
	ds := DaemonSetOf(dep)
	if a := ds.Spec.Template.Spec.Affinity; a == nil || a.PodAntiAffinity != nil || a.NodeAffinity == nil {
		t.Errorf("affinity %+v: want the node affinity a person added, without the anti-affinity", a)
	}
	if dep.Spec.Template.Spec.Affinity.PodAntiAffinity == nil {
		t.Error("DaemonSetOf changed the Deployment it was given")
	}
	if ds.Name != dep.Name || ds.Namespace != "kube-system" || ds.Spec.Selector.MatchLabels["k8s-app"] != "kube-scheduler" {
		t.Errorf("DaemonSet %s/%s selector %v", ds.Namespace, ds.Name, ds.Spec.Selector)
	}
}
