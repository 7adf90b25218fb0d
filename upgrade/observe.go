package upgrade

import (
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"

	btypes "github.com/bootlet/bootlet/types"
)

// Observed is what one round reads of the cluster: the API's objects, and
// etcd's own view of its members (etcd is not an API object).
type Observed struct {
	Nodes []v1.Node
	// Pods are kube-system's: the control plane's (self-hosted, and the
	// bootstrap pods a kubelet mirrors) and the add-ons'.
	Pods        []v1.Pod
	DaemonSets  []appsv1.DaemonSet
	Deployments []appsv1.Deployment
	EtcdMembers []EtcdMember
	EtcdLeader  bool
}

// componentOfContainer names the component a kube-system container runs,
// by the container names of kubeadm's manifests, which render keeps.
var componentOfContainer = map[string]Component{
	"etcd":                    Etcd,
	"kube-apiserver":          APIServer,
	"kube-controller-manager": ControllerManager,
	"kube-scheduler":          Scheduler,
	"kube-proxy":              KubeProxy,
	"coredns":                 CoreDNS,
}

// Observe turns one round's objects into the facts the rule book decides
// on. A component's version on a node is the tag of the image its
// container runs (the status's, once the container started; the spec's
// before); where two pods of one component share a node, as during a
// surge, the older version counts, since the skew policy must hold for
// whichever of them serves. The kubelet's is the one it reports. A node
// lacks target's images that its kubelet does not list (the kubelet must
// report every image: nodeStatusMaxImages -1).
func Observe(o Observed, target Versions) Cluster {
	c := Cluster{EtcdMembers: o.EtcdMembers, EtcdLeader: o.EtcdLeader, Addons: map[Component]string{},
		EtcdSharesClientAddress: EtcdSharesClientAddress(o.Pods)}
	byNode := map[string]map[Component]string{}
	for _, p := range o.Pods {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		if btypes.IsEtcdUpgradeHelper(&p) {
			continue // a member of its own, at the version the step left
		}
		for _, ctr := range p.Spec.Containers {
			comp, ok := componentOfContainer[ctr.Name]
			if !ok {
				continue
			}
			ver := VersionOfImage(RunningImage(p, ctr))
			if ver == "" {
				continue
			}
			if byNode[p.Spec.NodeName] == nil {
				byNode[p.Spec.NodeName] = map[Component]string{}
			}
			if cur, ok := byNode[p.Spec.NodeName][comp]; !ok || older(ver, cur) {
				byNode[p.Spec.NodeName][comp] = ver
			}
		}
	}
	for _, n := range o.Nodes {
		_, master := n.Labels[btypes.LabelControlPlane]
		node := Node{Name: n.Name, Master: master, Ready: NodeReady(n), Running: map[Component]string{}}
		for comp, v := range byNode[n.Name] {
			if comp == CoreDNS {
				continue // not a node's: its Deployment's
			}
			// kube-proxy's pod counts too: the skew policy holds for
			// each one that runs, while its DaemonSet rolls.
			node.Running[comp] = v
		}
		if kv := n.Status.NodeInfo.KubeletVersion; kv != "" {
			node.Running[Kubelet] = kv
		}
		if target.Kubernetes != "" {
			node.MissingImages = missing(NodeImages(target, master), n.Status.Images)
		}
		c.Nodes = append(c.Nodes, node)
	}
	sort.Slice(c.Nodes, func(i, j int) bool { return c.Nodes[i].Name < c.Nodes[j].Name })
	addon := func(comp Component, tmpl v1.PodTemplateSpec) {
		for _, ctr := range tmpl.Spec.Containers {
			if componentOfContainer[ctr.Name] == comp {
				if v := VersionOfImage(ctr.Image); v != "" {
					c.Addons[comp] = v
				}
			}
		}
	}
	for _, ds := range o.DaemonSets {
		addon(KubeProxy, ds.Spec.Template)
	}
	for _, d := range o.Deployments {
		addon(CoreDNS, d.Spec.Template)
	}
	return c
}

// RunningImage is the image the container runs: the status's once it
// started (what the runtime resolved), else the spec's. A runtime reports
// an image with no tag by its ID, which names no version: then the spec's.
func RunningImage(p v1.Pod, ctr v1.Container) string {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == ctr.Name && s.State.Running != nil && s.Image != "" {
			if _, err := parse("", VersionOfImage(s.Image)); err == nil {
				return s.Image
			}
		}
	}
	return ctr.Image
}

// OlderVersion reports whether version a is older than b, as the rule
// book compares them (an unparsable one counts as older).
func OlderVersion(a, b string) bool { return older(a, b) }

// older reports whether a is an older version than b; an unparsable one
// counts as older, so it is never hidden behind a good one.
func older(a, b string) bool {
	va, err := parse("", a)
	if err != nil {
		return true
	}
	vb, err := parse("", b)
	if err != nil {
		return false
	}
	return va.LessThan(vb)
}

// NodeReady reports whether n's Ready condition is True.
func NodeReady(n v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// missing are the refs that no image of the node's names.
func missing(refs []string, have []v1.ContainerImage) []string {
	names := map[string]bool{}
	for _, img := range have {
		for _, n := range img.Names {
			names[n] = true
		}
	}
	var out []string
	for _, r := range refs {
		if !names[r] {
			out = append(out, r)
		}
	}
	return out
}
