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

// PodRuntimeFacts is what a pod's worker saw of the pod in the runtime at
// one sync, as the handoff needs it (plain values: the handoff never
// imports the runner, the runner never imports the handoff).
type PodRuntimeFacts struct {
	// Terminating: the pod was deleted from bootlet's API.
	Terminating bool
	// SandboxReady: CRI shows a READY sandbox with the pod's UID.
	SandboxReady bool
	// Starting: bootlet has a start under way for the pod: this sync
	// creates a sandbox or creates and starts a container, or a container
	// of the pod is CREATED and not started yet. A kubelet that saw the pod
	// now would start a second copy of that container (it never adopts a
	// CREATED one).
	Starting bool
	// Empty: no sandbox and no container of the pod exists.
	Empty bool
}
