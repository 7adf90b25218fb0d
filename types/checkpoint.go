package types

import (
	v1 "k8s.io/api/core/v1"
)

// Annotations and labels of the checkpointer.
const (
	// AnnotationCheckpoint on a pod (or a self-hosted pod template) asks
	// bootlet's checkpointer to keep the pod, and the Secrets and
	// ConfigMaps it uses, so it can run them after a reboot before any
	// apiserver is up.
	AnnotationCheckpoint = "bootlet.dev/checkpoint"
	// AnnotationCheckpointOf is on every pod (and Secret, ConfigMap) bootlet
	// runs from a checkpoint: the component's NAMESPACE/NAME. Such a pod is
	// never checkpointed itself, and bootlet get pods shows it.
	AnnotationCheckpointOf = "bootlet.dev/checkpoint-of"
	// AnnotationCheckpointSource names the self-hosted pod the checkpoint
	// was taken from ("NAMESPACE/NAME UID") and when.
	AnnotationCheckpointSource = "bootlet.dev/checkpoint-source"
	// AnnotationCheckpointActivated is when the checkpointer created the
	// pod (RFC 3339, the checkpointer's clock): the time a self-hosted pod's
	// Ready condition must be newer than before it counts.
	AnnotationCheckpointActivated = "bootlet.dev/checkpoint-activated"
	// AnnotationCheckpointActivatedBy says why the checkpointer created the
	// pod: "start" (the apiserver had not answered once since bootlet
	// started: a reboot, or the daemon's start), or "outage" (the apiserver
	// went away under a running bootlet). It is in bootlet's durable
	// registry with the pod, so it survives a restart of bootlet; a pod
	// without it counts as "outage".
	AnnotationCheckpointActivatedBy = "bootlet.dev/checkpoint-activated-by"
	// AnnotationCheckpointOwner is on every pod, Secret and ConfigMap the
	// checkpointer makes in bootlet's registry: the controller the
	// checkpoint stands for (kind, namespace, name and UID). An object of
	// the same name that names another owner (or none, or another
	// component) is never overwritten or deleted: two components whose
	// COMPONENT-checkpoint-NAME names collide, or a user's own object, stay
	// apart.
	AnnotationCheckpointOwner = "bootlet.dev/checkpoint-owner"
	// LabelCheckpointOf selects what the checkpointer made in bootlet's
	// registry: the component's name (its namespace is the object's).
	LabelCheckpointOf = "bootlet.dev/checkpoint-of"
)

// PodConditionServing is the readiness gate bootlet renders on the
// self-hosted apiserver's pods and sets from the node (package
// servinggate): True once the pod's own process answers its readiness
// endpoint. The kubelet's probe cannot tell: two apiservers share the port,
// and its probe's connection reaches whichever the router targets.
const PodConditionServing v1.PodConditionType = "bootlet.dev/serving"

// CheckpointAPIVersion and CheckpointKind mark a stored checkpoint.
const (
	CheckpointAPIVersion = "bootlet.dev/v1alpha1"
	CheckpointKind       = "PodCheckpoint"
)

// CheckpointOf is the component (NS/NAME) a pod of bootlet's registry is
// the running checkpoint of, "" when it is not a checkpoint pod (both the
// annotation and the label the checkpointer sets are needed).
func CheckpointOf(p *v1.Pod) string {
	if p.Labels[LabelCheckpointOf] == "" {
		return ""
	}
	return p.Annotations[AnnotationCheckpointOf]
}
