package upgrade

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
)

// SkewViolations are the version skew policy's rules the cluster breaks
// now. The planner orders its steps so that none is ever broken; the
// controller checks it after every step, and a test's timeline checks it
// at every moment:
//   - the apiservers are within one minor of each other;
//   - no controller-manager or scheduler is newer than any apiserver
//     (behind one API address it may reach any of them), nor more than
//     one minor older than the newest;
//   - no kubelet or kube-proxy is newer than any apiserver, nor more than
//     MaxKubeletMinorsBehind minors older than the newest.
//
// Versions are compared by minor, as the policy states them: a patch
// ahead of an apiserver's is no violation.
func SkewViolations(c Cluster) []string {
	var out []string
	var oldest, newest *version.Version
	var oldestAt, newestAt string
	type ran struct {
		node string
		c    Component
		v    *version.Version
	}
	var others []ran
	for _, n := range c.Nodes {
		for comp, s := range n.Running {
			if comp == Etcd || comp == CoreDNS {
				continue
			}
			v, err := parse(string(comp)+" on "+n.Name, s)
			if err != nil {
				out = append(out, err.Error())
				continue
			}
			if comp != APIServer {
				others = append(others, ran{n.Name, comp, v})
				continue
			}
			if oldest == nil || v.LessThan(oldest) {
				oldest, oldestAt = v, n.Name
			}
			if newest == nil || newest.LessThan(v) {
				newest, newestAt = v, n.Name
			}
		}
	}
	if s, ok := c.Addons[KubeProxy]; ok {
		if v, err := parse("kube-proxy", s); err == nil {
			others = append(others, ran{"", KubeProxy, v})
		} else {
			out = append(out, err.Error())
		}
	}
	if oldest == nil {
		return out
	}
	if minorsApart(oldest, newest) > 1 {
		out = append(out, fmt.Sprintf("the apiservers are more than one minor apart: %s on %s, %s on %s", oldest, oldestAt, newest, newestAt))
	}
	for _, r := range others {
		where := ""
		if r.node != "" {
			where = " on " + r.node
		}
		if minorsApart(oldest, r.v) > 0 {
			out = append(out, fmt.Sprintf("%s%s runs %s, newer than the apiserver on %s (%s)", r.c, where, r.v, oldestAt, oldest))
		}
		if (r.c == ControllerManager || r.c == Scheduler) && minorsApart(r.v, newest) > 1 {
			out = append(out, fmt.Sprintf("%s%s runs %s, more than one minor older than the apiserver on %s (%s)", r.c, where, r.v, newestAt, newest))
		}
		if (r.c == Kubelet || r.c == KubeProxy) && minorsApart(r.v, newest) > MaxKubeletMinorsBehind {
			out = append(out, fmt.Sprintf("%s%s runs %s, more than %d minors older than the apiserver on %s (%s)", r.c, where, r.v, MaxKubeletMinorsBehind, newestAt, newest))
		}
	}
	return out
}
