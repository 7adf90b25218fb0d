package credmirror

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
)

// Seed mirrors each credential Secret among objs (render's self-hosted/
// objects) whose directory does not hold a mirror yet. It runs before those
// objects are created, so the first self-hosted pods find their files on
// the master that creates them. A directory that already holds a mirror is
// left alone: once the Secrets are in the apiserver, the apiserver's copy
// wins (a renewal or a rotation may have changed it since render), and the
// controller keeps the directory in line with it.
func Seed(objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		if u.GetKind() != "Secret" || u.GetAPIVersion() != "v1" {
			continue
		}
		s := &v1.Secret{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s); err != nil {
			return fmt.Errorf("secret %s: %w", u.GetName(), err)
		}
		t, ok, err := TargetOf(s)
		if err != nil {
			return fmt.Errorf("secret %s/%s: %w", s.Namespace, s.Name, err)
		}
		if !ok || Complete(t.Dir) {
			continue
		}
		if _, err := Mirror(s, t); err != nil {
			return err
		}
		klog.InfoS("Credentials seeded from the rendered Secret", "secret", klog.KObj(s), "dir", t.Dir)
	}
	return nil
}
