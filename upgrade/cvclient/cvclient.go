// Package cvclient reads and writes the upgrade's desired-version object
// (types.ClusterVersion, of the CRD render creates) through a dynamic
// client: the person's side (the desired version) and the controller's (the
// status subresource). It decides nothing; package upgrade does.
package cvclient

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/internal/kubeclient"
	btypes "github.com/bootlet/bootlet/types"
)

// Resource is the ClusterVersion's group, version and resource.
var Resource = schema.GroupVersionResource{Group: btypes.ClusterVersionGroup, Version: btypes.ClusterVersionVersion, Resource: btypes.ClusterVersionResource}

// FieldManager is the controller's and the CLI's field manager.
const FieldManager = "bootlet-upgrade"

// ForConfig is a dynamic client of cfg, the ClusterVersion's client.
func ForConfig(cfg *rest.Config) (dynamic.Interface, error) {
	return dynamic.NewForConfig(cfg)
}

// Run calls run with a clientset and a ClusterVersion client of the
// kubeconfig at path until ctx ends, anew whenever the file's bytes change
// (kubeclient.RunWithConfig): the upgrade controller's and the node
// agent's clients. userAgent names the caller in its logs too.
func Run(ctx context.Context, path, userAgent string, run func(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface)) {
	kubeclient.RunWithConfig(ctx, path, userAgent, func(err error) {
		klog.V(4).InfoS("Kubeconfig not loadable yet", "user", userAgent, "path", path, "err", err)
	}, func(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface) {
		dyn, err := ForConfig(cfg)
		if err != nil {
			klog.ErrorS(err, "No dynamic client", "user", userAgent, "path", path)
			return
		}
		run(ctx, cs, dyn)
	})
}

// Get is the one ClusterVersion; an error satisfying
// apierrors.IsNotFound when no desired version was ever set (or the CRD is
// not there yet).
func Get(ctx context.Context, dyn dynamic.Interface) (*btypes.ClusterVersion, error) {
	u, err := dyn.Resource(Resource).Get(ctx, btypes.ClusterVersionName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(u)
}

// SetDesired asks for version (and etcd's, unless etcdUpgrade is false):
// it creates the object, or updates its spec. Setting the version the object already asks for bumps spec.retry,
// which changes the generation: a stopped upgrade waits for a new one
// before it tries again (upgrade.Decide). The update carries the
// resourceVersion read, so two writers conflict rather than lose one.
func SetDesired(ctx context.Context, dyn dynamic.Interface, version string, etcdUpgrade bool) (*btypes.ClusterVersion, error) {
	var keepEtcd *bool
	if !etcdUpgrade {
		keepEtcd = ptr.To(false)
	}
	cv, err := Get(ctx, dyn)
	if apierrors.IsNotFound(err) {
		cv = &btypes.ClusterVersion{
			TypeMeta:   metav1.TypeMeta{APIVersion: Resource.GroupVersion().String(), Kind: btypes.ClusterVersionKind},
			ObjectMeta: metav1.ObjectMeta{Name: btypes.ClusterVersionName},
			Spec:       btypes.ClusterVersionSpec{DesiredVersion: version, EtcdUpgrade: keepEtcd},
		}
		u, err := toUnstructured(cv)
		if err != nil {
			return nil, err
		}
		out, err := dyn.Resource(Resource).Create(ctx, u, metav1.CreateOptions{FieldManager: FieldManager})
		if err != nil {
			return nil, err
		}
		return fromUnstructured(out)
	}
	if err != nil {
		return nil, err
	}
	if cv.Spec.DesiredVersion == version && (cv.Spec.EtcdUpgrade == nil) == (keepEtcd == nil) {
		cv.Spec.Retry++
	}
	cv.Spec.DesiredVersion, cv.Spec.EtcdUpgrade = version, keepEtcd
	u, err := toUnstructured(cv)
	if err != nil {
		return nil, err
	}
	out, err := dyn.Resource(Resource).Update(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(out)
}

// UpdateStatus writes cv's status (the status subresource: the spec a
// person set is never touched), with cv's resourceVersion.
func UpdateStatus(ctx context.Context, dyn dynamic.Interface, cv *btypes.ClusterVersion) (*btypes.ClusterVersion, error) {
	u, err := toUnstructured(cv)
	if err != nil {
		return nil, err
	}
	out, err := dyn.Resource(Resource).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(out)
}

func fromUnstructured(u *unstructured.Unstructured) (*btypes.ClusterVersion, error) {
	var cv btypes.ClusterVersion
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cv); err != nil {
		return nil, fmt.Errorf("ClusterVersion %s: %w", u.GetName(), err)
	}
	return &cv, nil
}

func toUnstructured(cv *btypes.ClusterVersion) (*unstructured.Unstructured, error) {
	c := *cv // the type fields set on a copy; nothing else changes
	c.APIVersion, c.Kind = Resource.GroupVersion().String(), btypes.ClusterVersionKind
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: obj}, nil
}
