package types

import (
	v1 "k8s.io/api/core/v1"
)

// Owner is who runs a pod on the node: bootlet itself, the kubelet (which
// adopted it as a static pod with the same UID), or nobody any more
// (bootlet withdrew the static copy). It only ever moves forward.
type Owner string

const (
	OwnerBootlet       Owner = "bootlet"
	OwnerKubeletStatic Owner = "kubelet-static"
	OwnerReleased      Owner = "released"
)

// AnnotationOwner records a pod's Owner on the API object, and with it in
// the checkpoint record, so a restarted bootlet keeps its hands off a pod
// the kubelet adopted. A pod without it is bootlet's.
const AnnotationOwner = "bootlet.dev/owner"

// OwnerOf reads a pod's recorded owner.
func OwnerOf(pod *v1.Pod) Owner {
	switch o := Owner(pod.Annotations[AnnotationOwner]); o {
	case OwnerKubeletStatic, OwnerReleased:
		return o
	}
	return OwnerBootlet
}
