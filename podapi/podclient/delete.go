package podclient

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DeleteOptions says how Delete deletes.
type DeleteOptions struct {
	// GracePeriodSeconds overrides the pod's own grace period when not nil.
	GracePeriodSeconds *int64
	// Wait returns from each pod's delete only once the pod is gone, which
	// is when the daemon has stopped its containers.
	Wait bool
	// Deleted is told of each delete the API accepted, before Delete waits
	// for it: kind is singular (pod, secret, configmap).
	Deleted func(kind, name string)
}

// pollGone is how often Delete asks whether a deleted pod is gone.
const pollGone = 200 * time.Millisecond

// Delete deletes the named objects of resource (pods, secrets or
// configmaps) in ns, one after the other, and stops at the first error.
func Delete(ctx context.Context, cs kubernetes.Interface, resource, ns string, names []string, o DeleteOptions) error {
	opts := metav1.DeleteOptions{GracePeriodSeconds: o.GracePeriodSeconds}
	var del func(ctx context.Context, name string, opts metav1.DeleteOptions) error
	switch resource {
	case "pods":
		del = cs.CoreV1().Pods(ns).Delete
	case "secrets":
		del = cs.CoreV1().Secrets(ns).Delete
	case "configmaps":
		del = cs.CoreV1().ConfigMaps(ns).Delete
	default:
		return fmt.Errorf("cannot delete %q", resource)
	}
	kind := strings.TrimSuffix(resource, "s")
	for _, name := range names {
		if err := del(ctx, name, opts); err != nil {
			return err
		}
		if o.Deleted != nil {
			o.Deleted(kind, name)
		}
		if resource == "pods" && o.Wait {
			if err := waitGone(ctx, cs, ns, name); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitGone polls until the pod is not found. Any other answer, an error
// included, means it may still be there.
func waitGone(ctx context.Context, cs kubernetes.Interface, ns, name string) error {
	for {
		if _, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollGone):
		}
	}
}
