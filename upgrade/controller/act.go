package controller

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/upgrade"
)

// setImage sets the image of step s's component to its image at version
// v, the way `kubectl set image` does (a strategic merge patch of the one
// container, by name): the component's DaemonSet or Deployment in
// kube-system rolls it. A control-plane component's workload is shared by
// the masters, so its first step sets the image and the next masters'
// steps find it set; the DaemonSet's rolling update (maxSurge 1 for the
// apiserver, through the port hand-over) moves one master at a time. A
// node's own steps (the kubelet, an etcd member) are its daemon's: the
// controller only records them.
func setImage(ctx context.Context, cs kubernetes.Interface, s upgrade.Step, v string) error {
	switch s.Component {
	case upgrade.Kubelet, upgrade.Etcd:
		return nil
	}
	name := string(s.Component)
	image := upgrade.ImageOf(s.Component, v)
	fields := map[string]any{"name": name, "image": image}
	opts := metav1.PatchOptions{FieldManager: "bootlet-upgrade"}
	// The same name is a DaemonSet or a Deployment by the cluster's shape
	// (the controller-manager and the scheduler: a Deployment on one
	// master, a DaemonSet on several); both are tried.
	ds, err := cs.AppsV1().DaemonSets("kube-system").Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		ctr := container(ds.Spec.Template.Spec.Containers, name)
		var annotations map[string]any
		if s.Component == upgrade.APIServer && ctr != nil {
			// The apiserver's step also puts back the single etcd
			// endpoint etcd's steps widened (widenForEtcd): one roll.
			var command []string
			if annotations, command = narrowAfterEtcd(ds, ctr); annotations != nil {
				fields["command"] = command
			}
		}
		if annotations == nil && ctr != nil && ctr.Image == image {
			return nil
		}
		patch, err := containerPatch(annotations, fields)
		if err != nil {
			return err
		}
		_, err = cs.AppsV1().DaemonSets("kube-system").Patch(ctx, name, types.StrategicMergePatchType, patch, opts)
		return err
	case !apierrors.IsNotFound(err):
		return err
	}
	d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("kube-system has no DaemonSet or Deployment %s to move to %s", name, image)
		}
		return err
	}
	if ctr := container(d.Spec.Template.Spec.Containers, name); ctr != nil && ctr.Image == image {
		return nil
	}
	patch, err := containerPatch(nil, fields)
	if err != nil {
		return err
	}
	_, err = cs.AppsV1().Deployments("kube-system").Patch(ctx, name, types.StrategicMergePatchType, patch, opts)
	return err
}

// containerPatch is a strategic merge patch of a workload: the fields of
// one container of its pod template (merged by name, as `kubectl set
// image` does), and annotations of the workload itself (nil: none; a nil
// value removes one).
func containerPatch(annotations, ctr map[string]any) ([]byte, error) {
	p := map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []map[string]any{ctr}}}}}
	if annotations != nil {
		p["metadata"] = map[string]any{"annotations": annotations}
	}
	return json.Marshal(p)
}

// container is the container named name of cs, nil without one.
func container(cs []v1.Container, name string) *v1.Container {
	for i := range cs {
		if cs[i].Name == name {
			return &cs[i]
		}
	}
	return nil
}
