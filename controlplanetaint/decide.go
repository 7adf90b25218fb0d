package controlplanetaint

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"

	btypes "github.com/bootlet/bootlet/types"
)

// AnnotationManaged on a Node says that bootlet added its control-plane
// taint, so bootlet may also take it away.
const AnnotationManaged = "bootlet.dev/control-plane-taint"

// Taint is kubeadm's control-plane taint; the self-hosted control plane,
// CoreDNS, kube-proxy and the CNI tolerate it.
var Taint = v1.Taint{Key: btypes.LabelControlPlane, Effect: v1.TaintEffectNoSchedule}

// Node is what Decide needs of a Node.
type Node struct {
	Name         string
	ControlPlane bool
	Tainted      bool
	Managed      bool
}

// Op is a change to one Node.
type Op int

const (
	AddTaint Op = iota + 1
	RemoveTaint
)

// Action is one change.
type Action struct {
	Node string
	Op   Op
}

// Decision is what to change, and why, in a line a person can read.
type Decision struct {
	Actions []Action
	// Schedulable is true when no worker exists: tenants' pods may run on
	// the masters, and Why says so.
	Schedulable bool
	Why         string
}

// Decide is the taint every Node should carry. Pure.
func Decide(nodes []Node) Decision {
	var masters, workers []string
	for _, n := range nodes {
		if n.ControlPlane {
			masters = append(masters, n.Name)
		} else {
			workers = append(workers, n.Name)
		}
	}
	sort.Strings(workers)
	var d Decision
	if len(workers) == 0 {
		d.Schedulable = true
		d.Why = fmt.Sprintf("the cluster has no worker: its %d control-plane node(s) (%s) take every pod; they are tainted %s:%s once a worker joins",
			len(masters), strings.Join(sortedCopy(masters), ", "), Taint.Key, Taint.Effect)
	} else {
		d.Why = fmt.Sprintf("the cluster has %d worker(s) (%s): control-plane nodes are tainted %s:%s", len(workers), firstFew(workers), Taint.Key, Taint.Effect)
	}
	for _, n := range nodes {
		if !n.ControlPlane {
			continue
		}
		switch {
		case !d.Schedulable && !n.Tainted:
			d.Actions = append(d.Actions, Action{Node: n.Name, Op: AddTaint})
		case d.Schedulable && n.Tainted && n.Managed:
			d.Actions = append(d.Actions, Action{Node: n.Name, Op: RemoveTaint})
		}
	}
	sort.Slice(d.Actions, func(i, j int) bool { return d.Actions[i].Node < d.Actions[j].Node })
	return d
}

// FromNode is Decide's view of a Node.
func FromNode(n *v1.Node) Node {
	_, cp := n.Labels[btypes.LabelControlPlane]
	out := Node{Name: n.Name, ControlPlane: cp, Managed: n.Annotations[AnnotationManaged] == "true"}
	for _, t := range n.Spec.Taints {
		if t.MatchTaint(&Taint) {
			out.Tainted = true
		}
	}
	return out
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func firstFew(s []string) string {
	if len(s) <= 3 {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:3], ", ") + fmt.Sprintf(" and %d more", len(s)-3)
}
