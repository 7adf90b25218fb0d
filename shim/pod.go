package shim

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	// Register the core group into legacyscheme with its defaulters, as the
	// kubelet's config sources do.
	_ "k8s.io/kubernetes/pkg/apis/core/install"
)

// Annotations bootlet sets on the pods it runs. They travel into the CRI
// sandbox (the kubelet copies pod annotations there too), which is how
// bootlet recognises its own sandboxes and never touches anyone else's.
const (
	AnnotationManagedBy = "bootlet.dev/managed-by"
	ManagedByValue      = "bootlet"
	// ConfigSourceBootlet is the kubernetes.io/config.source bootlet reports.
	ConfigSourceBootlet = "bootlet"
)

// RuntimePod returns the pod as the runtime (and a kubelet adopting it) sees
// it: the static-pod name NAME-NODENAME.
func RuntimePod(pod *v1.Pod, nodeName string) *v1.Pod {
	rp := pod.DeepCopy()
	rp.Name = StaticPodName(pod.Name, nodeName)
	return rp
}

// StaticPodName is the kubelet's generatePodName.
func StaticPodName(name, nodeName string) string {
	return name + "-" + nodeName
}

// PodKey identifies a pod in the API.
type PodKey struct{ Namespace, Name string }

func (k PodKey) String() string { return k.Namespace + "/" + k.Name }

// KeyOf returns a pod's key.
func KeyOf(pod *v1.Pod) PodKey { return PodKey{pod.Namespace, pod.Name} }

// UIDOf is a small helper for logs.
func UIDOf(pod *v1.Pod) types.UID { return pod.UID }
