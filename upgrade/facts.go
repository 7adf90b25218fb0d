package upgrade

// Component is a part of the cluster that has a version.
type Component string

// The components, in the order the skew policy upgrades them.
const (
	Etcd              Component = "etcd"
	APIServer         Component = "kube-apiserver"
	ControllerManager Component = "kube-controller-manager"
	Scheduler         Component = "kube-scheduler"
	KubeProxy         Component = "kube-proxy"
	CoreDNS           Component = "coredns"
	Kubelet           Component = "kubelet"
)

// Versions is one set of versions the cluster can run: Kubernetes's, and
// the etcd and CoreDNS that kubeadm pins for it.
type Versions struct {
	Kubernetes, Etcd, CoreDNS string
}

// Of is the version of c in v.
func (v Versions) Of(c Component) string {
	switch c {
	case Etcd:
		return v.Etcd
	case CoreDNS:
		return v.CoreDNS
	}
	return v.Kubernetes
}

// Node is what the controller observed of one node.
type Node struct {
	Name   string
	Master bool
	Ready  bool
	// Running is the version of each component that runs on this node
	// (etcd and the control plane on masters; the kubelet everywhere).
	Running map[Component]string
	// MissingImages are the target's images the node's runtime lacks.
	MissingImages []string
}

// EtcdMember is one member of the etcd cluster as its status reports it.
type EtcdMember struct {
	Name    string
	Version string
	Healthy bool
	Learner bool
	// Helper: a member that the etcd step of a cluster of one or two
	// members added beside the member to keep the quorum while it restarts (its pod carries
	// btypes.LabelEtcdUpgradeHelper); it belongs to no node's versions.
	Helper bool
}

// Cluster is what the controller observed of the whole cluster.
type Cluster struct {
	Nodes []Node
	// EtcdMembers are the members etcd lists; EtcdLeader whether it has
	// a leader.
	EtcdMembers []EtcdMember
	EtcdLeader  bool
	// EtcdSharesClientAddress: every member's pod lets a second process
	// listen on its client address (EtcdSharesClientAddress).
	EtcdSharesClientAddress bool
	// Addons is the version each cluster-wide add-on runs (kube-proxy's
	// DaemonSet, CoreDNS's Deployment).
	Addons map[Component]string
}

// EtcdHelpersFor is how many helper members the step of one of members
// etcd members adds beside it: as many as bring it to EtcdStepMembers, so
// that the others are a quorum while it restarts (two beside one member,
// one beside one of two). With three or more none is needed for the
// quorum; where the members share their client address (sharedAddress:
// --socket-reuse-port, render's), one is added all the same, to serve
// that address while the member restarts (EtcdSharesClientAddress says
// why).
func EtcdHelpersFor(members int, sharedAddress bool) int {
	switch {
	case members < 1:
		return 0
	case members < EtcdStepMembers:
		return EtcdStepMembers - members
	case sharedAddress:
		return 1
	}
	return 0
}

// EtcdNeedsHelpers reports whether a member's step in this etcd adds
// helpers (package upgrade/nodeagent): it has one or two members, its
// helpers aside, or its members share their client address.
func (c Cluster) EtcdNeedsHelpers() bool { return c.EtcdHelpersNeeded() > 0 }

// EtcdHelpersNeeded is how many helpers a member's step adds in this etcd.
func (c Cluster) EtcdHelpersNeeded() int {
	return EtcdHelpersFor(c.etcdMembersProper(), c.EtcdSharesClientAddress)
}

// etcdMembersProper counts etcd's members, its helpers aside.
func (c Cluster) etcdMembersProper() int {
	n := 0
	for _, m := range c.EtcdMembers {
		if !m.Helper {
			n++
		}
	}
	return n
}

// EtcdHelpers are the helper members observed.
func (c Cluster) EtcdHelpers() []EtcdMember {
	var out []EtcdMember
	for _, m := range c.EtcdMembers {
		if m.Helper {
			out = append(out, m)
		}
	}
	return out
}

// masters are the cluster's master nodes, in its order.
func (c Cluster) masters() []Node {
	var out []Node
	for _, n := range c.Nodes {
		if n.Master {
			out = append(out, n)
		}
	}
	return out
}
