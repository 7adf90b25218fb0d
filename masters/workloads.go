package masters

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ElectedComponents are the control-plane workloads whose pods elect a
// leader: render makes each a Deployment of two replicas with one master,
// and a DaemonSet on the control-plane nodes with several.
var ElectedComponents = BudgetedComponents

// WorkloadStep is what the controller does to one elected component's
// workload this round.
type WorkloadStep string

const (
	// WorkloadKeep: nothing to do, or something to wait for.
	WorkloadKeep WorkloadStep = ""
	// WorkloadAddDaemonSet creates the DaemonSet DaemonSetOf makes of the
	// Deployment.
	WorkloadAddDaemonSet WorkloadStep = "AddDaemonSet"
	// WorkloadRemoveDeployment deletes the Deployment, its DaemonSet's
	// pods Ready on every master.
	WorkloadRemoveDeployment WorkloadStep = "RemoveDeployment"
)

// DecideWorkload keeps an elected component following the masters' label
// once a cluster rendered with one master has more: a Deployment's two
// replicas were scheduled where the one master was, and stay there
// (tolerating an unreachable node, they are never evicted), so the first
// master's loss would take the controller-manager or the scheduler with
// it. With more than one master the component becomes what render makes
// for several: a DaemonSet, one pod per master, that follows the label.
// The DaemonSet comes first, and the Deployment goes only once the
// DaemonSet's pods are Ready on every node it selects, so a pod of the
// component runs throughout (leader election lets only one act, whatever
// their number). With one master nothing changes back: a DaemonSet on one
// master is a correct one, and a change begun with two masters goes on
// with one (a promoted node demoted before the DaemonSet was Ready).
// One component changes at a time (underway: another one's change, ""
// none): each change starts a pod per master at once, and two together
// on a small node starve the apiserver that serves meanwhile.
//
// masterCount is MasterCount's (0: unsettled); dep and ds are the
// component's Deployment and DaemonSet (nil: none).
func DecideWorkload(masterCount int, dep *appsv1.Deployment, ds *appsv1.DaemonSet, underway string) (WorkloadStep, string) {
	switch {
	case dep == nil || masterCount < 1:
		return WorkloadKeep, ""
	case dep.DeletionTimestamp != nil:
		return WorkloadKeep, fmt.Sprintf("Deployment %s is being deleted", dep.Name)
	case ds == nil && masterCount < 2:
		return WorkloadKeep, ""
	case ds == nil && underway != "":
		return WorkloadKeep, fmt.Sprintf("%d masters: %s waits until %s follows them", masterCount, dep.Name, underway)
	case ds == nil:
		return WorkloadAddDaemonSet, fmt.Sprintf("%d masters: %s follows their label as a DaemonSet", masterCount, dep.Name)
	case ds.DeletionTimestamp != nil:
		// Its status may still count Ready pods that are about to go:
		// the Deployment stays, and a DaemonSet is made again once this
		// one is gone.
		return WorkloadKeep, fmt.Sprintf("Deployment %s stays: its DaemonSet is being deleted", dep.Name)
	}
	if ok, why := daemonSetReady(ds, masterCount); !ok {
		return WorkloadKeep, fmt.Sprintf("Deployment %s stays until its DaemonSet is Ready: %s", dep.Name, why)
	}
	return WorkloadRemoveDeployment, fmt.Sprintf("DaemonSet %s is Ready on its %d nodes: its Deployment goes", ds.Name, ds.Status.DesiredNumberScheduled)
}

// daemonSetReady: ds's controller has seen its spec, and every pod it
// wants (at least one per master) is updated and Ready.
func daemonSetReady(ds *appsv1.DaemonSet, masterCount int) (bool, string) {
	st := ds.Status
	switch {
	case st.ObservedGeneration < ds.Generation:
		return false, "its controller has not seen its spec yet"
	case int(st.DesiredNumberScheduled) < masterCount:
		return false, fmt.Sprintf("it selects %d nodes of %d masters", st.DesiredNumberScheduled, masterCount)
	case st.UpdatedNumberScheduled < st.DesiredNumberScheduled || st.NumberReady < st.DesiredNumberScheduled:
		return false, fmt.Sprintf("%d of %d pods updated, %d Ready", st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberReady)
	}
	return true, ""
}

// DaemonSetOf is the DaemonSet render makes with several masters
// (manifests' mastersDaemonSet) from the Deployment render makes with one:
// the same name, labels, selector and pod template (whose nodeSelector
// and tolerations already place it on the control-plane nodes), without
// the Deployment's preferred anti-affinity (a DaemonSet places one pod
// per node), rolled one node at a time.
func DaemonSetOf(dep *appsv1.Deployment) *appsv1.DaemonSet {
	tmpl := *dep.Spec.Template.DeepCopy()
	if a := tmpl.Spec.Affinity; a != nil {
		a.PodAntiAffinity = nil
		if *a == (v1.Affinity{}) {
			tmpl.Spec.Affinity = nil
		}
	}
	maxUnavailable := intstr.FromInt32(1)
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: dep.Name, Namespace: dep.Namespace, Labels: tmpl.Labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: dep.Spec.Selector.DeepCopy(),
			Template: tmpl,
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: &maxUnavailable},
			},
		},
	}
}
