package types

import (
	v1 "k8s.io/api/core/v1"
)

// Annotations bootlet sets on the pods it runs. They travel into the CRI
// sandbox (the kubelet copies pod annotations there too), which is how
// bootlet recognises its own sandboxes and never touches anyone else's.
const (
	AnnotationManagedBy = "bootlet.dev/managed-by"
	ManagedByValue      = "bootlet"
	// ConfigSourceBootlet is the kubernetes.io/config.source bootlet reports.
	ConfigSourceBootlet = "bootlet"
	// AnnotationStartAfter lists pods of the same namespace (comma-separated
	// names) that must serve before bootlet starts this pod, as systemd's
	// After= (runner/startafter.go, README "Start order"). bootlet render sets
	// it on the bootstrap pods that reach the apiserver through a kubeconfig.
	AnnotationStartAfter = "bootlet.dev/start-after"
)

// StaticPodName is the kubelet's generatePodName.
func StaticPodName(name, nodeName string) string {
	return name + "-" + nodeName
}

// PodKey identifies a pod in the API.
type PodKey struct{ Namespace, Name string }

func (k PodKey) String() string { return k.Namespace + "/" + k.Name }

// KeyOf returns a pod's key.
func KeyOf(pod *v1.Pod) PodKey { return PodKey{Namespace: pod.Namespace, Name: pod.Name} }

// RuntimePod returns the pod as the runtime (and a kubelet adopting it) sees
// it: the static-pod name NAME-NODENAME.
func RuntimePod(pod *v1.Pod, nodeName string) *v1.Pod {
	rp := pod.DeepCopy()
	rp.Name = StaticPodName(pod.Name, nodeName)
	return rp
}

// LabelControlPlane is the node-role label that makes a node a master: an
// administrator's word (NodeRestriction forbids a kubelet the
// node-role.kubernetes.io/ labels), which the pivot sets on a first-boot
// master.
const LabelControlPlane = "node-role.kubernetes.io/control-plane"

// LabelControlPlanePods is the label the self-hosted control plane's pods
// select (render's node selector). The pivot sets it with
// LabelControlPlane on a first-boot master; afterwards the masters'
// controller sets and removes it, so that a demoted master leaves the API
// address before its apiserver goes, and a promoted one runs an apiserver
// only once its etcd member votes. A kubelet cannot set it:
// NodeRestriction forbids it the node-restriction.kubernetes.io/ prefix.
const LabelControlPlanePods = "node-restriction.kubernetes.io/bootlet-control-plane"

// LabelEtcdUpgradeHelper marks the pod of a helper member that a
// one-member etcd's upgrade step adds beside the member (package
// upgrade/nodeagent); its value is the helper's etcd --name. The upgrade's
// observation counts such a pod as a member of its own, never as the
// node's.
const LabelEtcdUpgradeHelper = "bootlet.dev/etcd-upgrade-helper"

// IsEtcdUpgradeHelper reports whether pod is such a helper's.
func IsEtcdUpgradeHelper(pod *v1.Pod) bool {
	_, ok := pod.Labels[LabelEtcdUpgradeHelper]
	return ok
}

// NodeBootstrapTokenGroup is the extra group of render's bootstrap tokens:
// the only group whose node client certificate requests bootlet's approver
// decides (package csrapprover). It is kubeadm's
// system:bootstrappers:kubeadm:default-node-token with bootlet's name, so a
// token made for another purpose cannot obtain a node identity.
const NodeBootstrapTokenGroup = "system:bootstrappers:bootlet:default-node-token"
