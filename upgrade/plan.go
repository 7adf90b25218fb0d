package upgrade

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/version"
)

// Step is one component moved on one node (Node empty: a cluster-wide
// add-on, kube-proxy's DaemonSet or CoreDNS's Deployment).
type Step struct {
	Component Component
	Node      string
	From, To  string
	// Drain asks for the node to be cordoned and drained before a kubelet
	// step, as the skew policy asks for a minor kubelet upgrade.
	Drain bool
}

func (s Step) String() string {
	where := s.Node
	if where == "" {
		where = "cluster"
	}
	return fmt.Sprintf("%s on %s: %s -> %s", s.Component, where, s.From, s.To)
}

// Plan is every step still to take from what c runs to target, in the
// order the skew policy allows: each etcd member (hop by hop, EtcdPath),
// each master's apiserver, then the controller-manager and the scheduler,
// the add-ons, and the kubelets last, masters first. A step whose
// component already runs its version is not in it, so the plan of a
// cluster observed halfway is the rest of the upgrade: a controller that
// restarts, or a new leader, computes the same rest.
func Plan(c Cluster, target Versions, etcdVersions []string) ([]Step, error) {
	var steps []Step
	masters := c.masters()

	if target.Etcd != "" {
		// Every member's hops, ordered by the version they go to: all
		// members reach the newest patch of a minor before any leaves
		// it, so the cluster spans at most two adjacent minors and no
		// member joins the next minor from an older patch.
		var hops []Step
		for _, n := range masters {
			from, ok := n.Running[Etcd]
			if !ok || from == target.Etcd {
				continue
			}
			path, err := EtcdPath(from, target.Etcd, etcdVersions)
			if err != nil {
				return nil, fmt.Errorf("etcd on %s: %w", n.Name, err)
			}
			prev := from
			for _, h := range path {
				hops = append(hops, Step{Component: Etcd, Node: n.Name, From: prev, To: h})
				prev = h
			}
		}
		sort.SliceStable(hops, func(i, j int) bool { return older(hops[i].To, hops[j].To) && !older(hops[j].To, hops[i].To) })
		steps = append(steps, hops...)
	}
	perMaster := func(comp Component) {
		for _, n := range masters {
			if from, ok := n.Running[comp]; ok && from != target.Of(comp) {
				steps = append(steps, Step{Component: comp, Node: n.Name, From: from, To: target.Of(comp)})
			}
		}
	}
	perMaster(APIServer)
	perMaster(ControllerManager)
	perMaster(Scheduler)
	for _, comp := range []Component{KubeProxy, CoreDNS} {
		if from, ok := c.Addons[comp]; ok && from != target.Of(comp) && target.Of(comp) != "" {
			steps = append(steps, Step{Component: comp, From: from, To: target.Of(comp)})
		}
	}

	to, err := parse("target Kubernetes", target.Kubernetes)
	if err != nil {
		return nil, err
	}
	kubelets := append(masters, workers(c)...)
	for _, n := range kubelets {
		from, ok := n.Running[Kubelet]
		if !ok || from == target.Kubernetes {
			continue
		}
		f, err := parse("node "+n.Name+"'s kubelet", from)
		if err != nil {
			return nil, err
		}
		steps = append(steps, Step{Component: Kubelet, Node: n.Name, From: from, To: target.Kubernetes, Drain: !sameMinor(f, to)})
	}
	for _, st := range steps {
		if st.Component != Etcd && older(st.To, st.From) {
			return nil, fmt.Errorf("%s runs %s, newer than the target %s: bootlet does not downgrade (a downgrade is a restore from a snapshot)", Step{Component: st.Component, Node: st.Node}.where(), st.From, st.To)
		}
	}
	return steps, nil
}

// DrainFor reports whether a kubelet moving from one version to another
// is drained first: the skew policy asks it for a minor upgrade.
func DrainFor(from, to string) bool {
	f, err1 := parse("", from)
	t, err2 := parse("", to)
	return err1 != nil || err2 != nil || !sameMinor(f, t)
}

// where names the step's component and node, as String does.
func (s Step) where() string {
	if s.Node == "" {
		return string(s.Component)
	}
	return string(s.Component) + " on " + s.Node
}

func workers(c Cluster) []Node {
	var out []Node
	for _, n := range c.Nodes {
		if !n.Master {
			out = append(out, n)
		}
	}
	return out
}

// EtcdPath is the versions etcd goes through from from to to, to
// included, by etcd's rules: one minor at a time, and a minor is left only
// from its newest patch among known (the versions the target's images
// offer). A path down is refused: etcd does not downgrade in place.
func EtcdPath(from, to string, known []string) ([]string, error) {
	f, err := parse("etcd", from)
	if err != nil {
		return nil, err
	}
	t, err := parse("target etcd", to)
	if err != nil {
		return nil, err
	}
	if t.LessThan(f) {
		return nil, fmt.Errorf("etcd %s to %s goes down: etcd upgrades only", from, to)
	}
	if f.Major() != t.Major() {
		return nil, fmt.Errorf("etcd %s to %s changes the major version", from, to)
	}
	newest := map[uint]*version.Version{}
	for _, k := range append(append([]string(nil), known...), to) {
		v, err := parse("known etcd", k)
		if err != nil {
			return nil, err
		}
		if v.Major() != f.Major() {
			continue
		}
		if cur, ok := newest[v.Minor()]; !ok || cur.LessThan(v) {
			newest[v.Minor()] = v
		}
	}
	var path []string
	cur := f
	for !sameMinor(cur, t) {
		top, ok := newest[cur.Minor()]
		if !ok || top.LessThan(cur) {
			top = cur
		}
		if top.GreaterThan(cur) {
			path = append(path, "v"+top.String())
			cur = top
		}
		next, ok := newest[cur.Minor()+1]
		if !ok {
			return nil, fmt.Errorf("etcd %s to %s: no known %d.%d release to pass through", from, to, cur.Major(), cur.Minor()+1)
		}
		if sameMinor(next, t) {
			next = t
		}
		path = append(path, "v"+next.String())
		cur = next
	}
	if cur.LessThan(t) {
		path = append(path, "v"+t.String())
	}
	return trimV(path, to), nil
}

// trimV writes the path's versions as the target is written (with or
// without the leading v).
func trimV(path []string, like string) []string {
	if len(like) > 0 && like[0] == 'v' {
		return path
	}
	out := make([]string, len(path))
	for i, p := range path {
		out[i] = p[1:]
	}
	return out
}

// EtcdStepMembers is the fewest etcd members with which one member's
// replacement keeps a quorum: the others are a majority of the whole. The
// step of one of fewer members reaches it by adding helpers beside it
// (EtcdHelpersFor).
const EtcdStepMembers = 3
