package podclient

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// Query says what `get` fetches.
type Query struct {
	// Resource is the plural, lower-case name (pods, secrets, configmaps,
	// events, namespaces, nodes).
	Resource string
	// Name is one object's; empty lists them.
	Name string
	// Namespace is empty for all namespaces; a named object is then
	// looked for in default.
	Namespace string
	// Selector is a label selector for a list.
	Selector string
}

// Get fetches the object q names, or the list of them: a typed client-go
// object (*v1.Pod, *v1.PodList, ...), as decoded, without its TypeMeta.
func Get(ctx context.Context, cs kubernetes.Interface, q Query) (runtime.Object, error) {
	lo := metav1.ListOptions{LabelSelector: q.Selector}
	core := cs.CoreV1()
	ns, name := q.Namespace, q.Name
	if name != "" && ns == "" {
		ns = metav1.NamespaceDefault
	}
	switch q.Resource {
	case "pods":
		if name != "" {
			return core.Pods(ns).Get(ctx, name, metav1.GetOptions{})
		}
		return core.Pods(ns).List(ctx, lo)
	case "secrets":
		if name != "" {
			return core.Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		}
		return core.Secrets(ns).List(ctx, lo)
	case "configmaps":
		if name != "" {
			return core.ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		}
		return core.ConfigMaps(ns).List(ctx, lo)
	case "events":
		return core.Events(ns).List(ctx, lo)
	case "namespaces":
		return core.Namespaces().List(ctx, lo)
	case "nodes":
		if name != "" {
			return core.Nodes().Get(ctx, name, metav1.GetOptions{})
		}
		return core.Nodes().List(ctx, lo)
	}
	return nil, fmt.Errorf("the server doesn't have a resource type %q", q.Resource)
}
