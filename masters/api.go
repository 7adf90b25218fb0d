package masters

import (
	v1 "k8s.io/api/core/v1"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
)

// The control plane's containers, by their kubeadm names: the bootstrap
// pods and the self-hosted ones alike.
const (
	apiserverContainer = "kube-apiserver"
)

var controlPlaneContainers = []string{apiserverContainer, "kube-controller-manager", "kube-scheduler"}

// NodeOf is n as Decide sees it, from its object and the pods bound to it
// (any namespace; only the control plane's count).
func NodeOf(n *v1.Node, pods []v1.Pod) Node {
	out := Node{Name: n.Name, Ready: upgrade.NodeReady(*n), Address: internalIP(n)}
	_, out.Labelled = n.Labels[Label]
	_, out.CanLead = n.Labels[LabelLeader]
	_, out.RunsControlPlane = n.Labels[btypes.LabelControlPlanePods]
	out.UID = string(n.UID)
	says := func(key string) bool { return n.Annotations[key] == "true" }
	out.MemberHost, out.Withdrawn, out.Cleaned = says(AnnotationMemberHost), says(AnnotationWithdrawn), says(AnnotationCleaned)
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != n.Name || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		switch component(p) {
		case "":
			continue
		case apiserverContainer:
			out.APIServerReady = out.APIServerReady || p.DeletionTimestamp == nil && podutil.IsPodReady(p)
		}
		// A pod being deleted counts until it is gone: a deleted
		// apiserver serves through its shutdown, on its node's member.
		out.ControlPlanePods++
	}
	return out
}

// NodesOf is NodeOf of every node.
func NodesOf(nodes []v1.Node, pods []v1.Pod) []Node {
	out := make([]Node, 0, len(nodes))
	for i := range nodes {
		out = append(out, NodeOf(&nodes[i], pods))
	}
	return out
}

// component is the control-plane container p runs, or "".
func component(p *v1.Pod) string {
	for _, c := range p.Spec.Containers {
		for _, cp := range controlPlaneContainers {
			if c.Name == cp {
				return cp
			}
		}
	}
	return ""
}

func internalIP(n *v1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}
