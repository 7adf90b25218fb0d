package controller

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/upgrade"
)

// annotationCordoned marks a node this controller cordoned for a kubelet's
// step, so that it uncordons only what it cordoned, never a node a person
// cordoned.
const annotationCordoned = "bootlet.dev/upgrade-cordoned"

// drainNode cordons and drains node for a kubelet's step, as `kubectl
// drain --ignore-daemonsets --delete-emptydir-data` does (evictPods), when the step asks for it
// (a minor) and another Ready, schedulable node can take the pods. With
// none, the pods have nowhere to go and a drain could only stop them: it is
// skipped, and the reason returned. done reports the node ready for its
// agent.
func drainNode(ctx context.Context, cs kubernetes.Interface, node string, wanted bool) (done bool, why string, err error) {
	if !wanted {
		return true, "a patch kubelet step: no drain", nil
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, "", err
	}
	var self *v1.Node
	elsewhere := false
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Name == node {
			self = n
			continue
		}
		if !n.Spec.Unschedulable && upgrade.NodeReady(*n) {
			elsewhere = true
		}
	}
	if self == nil {
		return false, "", fmt.Errorf("node %s is not in the API", node)
	}
	if !elsewhere {
		return true, "no other Ready, schedulable node to take its pods: not drained (the new kubelet adopts every running container)", nil
	}
	if !self.Spec.Unschedulable {
		if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+annotationCordoned+`":"true"}},"spec":{"unschedulable":true}}`), metav1.PatchOptions{FieldManager: "bootlet-upgrade"}); err != nil {
			return false, "", fmt.Errorf("cordoning %s: %w", node, err)
		}
	}
	left, err := evictPods(ctx, cs, node)
	if err != nil {
		return false, "", err
	}
	if len(left) > 0 {
		klog.InfoS("Upgrade controller: drain under way", "node", node, "pods", left)
		return false, "", nil
	}
	return true, "cordoned and drained", nil
}

// uncordon undoes drainNode's cordon, and only that.
func uncordon(ctx context.Context, cs kubernetes.Interface, node string) error {
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if n.Annotations[annotationCordoned] == "" {
		return nil
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"`+annotationCordoned+`":null}},"spec":{"unschedulable":false}}`), metav1.PatchOptions{FieldManager: "bootlet-upgrade"})
	if err == nil {
		klog.InfoS("Upgrade controller: uncordoned", "node", node)
	}
	return err
}

// evictPods asks the Eviction API to evict every pod on node that `kubectl
// drain --ignore-daemonsets --delete-emptydir-data` would: not a
// DaemonSet's, not a mirror (static) pod, not finished. A budget that
// refuses an eviction now (429) is asked again next round; the pods not
// yet gone are returned. Written here rather than taken from
// k8s.io/kubectl/pkg/drain, which would link kubectl's command libraries
// into the daemon of every master.
func evictPods(ctx context.Context, cs kubernetes.Interface, node string) (left []string, err error) {
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		if !evictable(p) {
			continue
		}
		left = append(left, p.Namespace+"/"+p.Name)
		if p.DeletionTimestamp != nil {
			continue
		}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
		if err := cs.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsTooManyRequests(err) {
			return nil, fmt.Errorf("evicting %s/%s: %w", p.Namespace, p.Name, err)
		}
	}
	return left, nil
}

func evictable(p v1.Pod) bool {
	if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
		return false
	}
	if _, mirror := p.Annotations[v1.MirrorPodAnnotationKey]; mirror {
		return false
	}
	if c := metav1.GetControllerOf(&p); c != nil && c.Kind == "DaemonSet" {
		return false
	}
	return true
}
