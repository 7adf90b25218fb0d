package podclient

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// Applied is the outcome of applying one object: Message is kubectl's line
// ("pod/x created", "... configured", "... unchanged") when Err is nil.
type Applied struct {
	Message string
	Err     error
}

// Apply applies each object in turn and returns one outcome per object, in
// order; one object failing does not stop the others. ns is the namespace
// of objects that name none (empty: default).
func Apply(ctx context.Context, cs kubernetes.Interface, objs []runtime.Object, ns string) []Applied {
	out := make([]Applied, 0, len(objs))
	for _, obj := range objs {
		msg, err := applyOne(ctx, cs, obj, ns)
		out = append(out, Applied{Message: msg, Err: err})
	}
	return out
}

// applyOne creates the object, or replaces it when it exists and differs.
func applyOne(ctx context.Context, cs kubernetes.Interface, obj runtime.Object, ns string) (string, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	pick := func(objNS string) string {
		if objNS != "" {
			return objNS
		}
		if ns != "" {
			return ns
		}
		return metav1.NamespaceDefault
	}
	switch o := obj.(type) {
	case *v1.Pod:
		o.Namespace = pick(o.Namespace)
		return createOrReplace(ctx, cs.CoreV1().Pods(o.Namespace), "pod", o, func(cur *v1.Pod) (*v1.Pod, bool) {
			// Only what a pod update may change: labels, annotations, images.
			want := cur.DeepCopy()
			want.Labels, want.Annotations = o.Labels, mergeAnnotations(cur.Annotations, o.Annotations)
			setImages(want.Spec.Containers, o.Spec.Containers)
			setImages(want.Spec.InitContainers, o.Spec.InitContainers)
			return want, apiequality.Semantic.DeepEqual(want.Spec, cur.Spec) && apiequality.Semantic.DeepEqual(want.ObjectMeta, cur.ObjectMeta)
		})
	case *v1.Secret:
		o.Namespace = pick(o.Namespace)
		return createOrReplace(ctx, cs.CoreV1().Secrets(o.Namespace), "secret", o, func(cur *v1.Secret) (*v1.Secret, bool) {
			o.ResourceVersion = cur.ResourceVersion
			return o, false // stringData cannot be compared with data client-side
		})
	case *v1.ConfigMap:
		o.Namespace = pick(o.Namespace)
		return createOrReplace(ctx, cs.CoreV1().ConfigMaps(o.Namespace), "configmap", o, func(cur *v1.ConfigMap) (*v1.ConfigMap, bool) {
			o.ResourceVersion = cur.ResourceVersion
			return o, apiequality.Semantic.DeepEqual(cur.Data, o.Data) && apiequality.Semantic.DeepEqual(cur.BinaryData, o.BinaryData) &&
				apiequality.Semantic.DeepEqual(cur.Labels, o.Labels)
		})
	}
	return "", fmt.Errorf("unsupported object %T", obj)
}

// typedClient is the part of a client-go typed client createOrReplace uses.
type typedClient[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// createOrReplace creates obj if absent; otherwise update turns the current
// object into the one to PUT and says whether nothing would change.
func createOrReplace[T metav1.Object](ctx context.Context, api typedClient[T], kind string, obj T, update func(cur T) (T, bool)) (string, error) {
	ref := kind + "/" + obj.GetName()
	cur, err := api.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = api.Create(ctx, obj, metav1.CreateOptions{})
		return ref + " created", err
	}
	if err != nil {
		return "", err
	}
	want, unchanged := update(cur)
	if unchanged {
		return ref + " unchanged", nil
	}
	_, err = api.Update(ctx, want, metav1.UpdateOptions{})
	return ref + " configured", err
}

// setImages copies each src container's image onto the dst container of
// the same name; containers only one side has are left alone.
func setImages(dst, src []v1.Container) {
	for i := range dst {
		for _, c := range src {
			if c.Name == dst[i].Name {
				dst[i].Image = c.Image
			}
		}
	}
}

// mergeAnnotations is want plus cur's annotations that the daemon or the
// kubelet set (kubernetes.io/config.*, bootlet.dev/*: the config source,
// the owner, the checkpoint marks): a manifest does not carry them, and an
// update that dropped them would lose who runs the pod.
func mergeAnnotations(cur, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range cur {
		if strings.HasPrefix(k, "kubernetes.io/config.") || strings.HasPrefix(k, "bootlet.dev/") {
			out[k] = v
		}
	}
	for k, v := range want {
		out[k] = v
	}
	return out
}
