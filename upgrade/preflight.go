package upgrade

import (
	"fmt"
	"sort"
)

// Refusal is one reason not to start an upgrade, for a person to act on.
type Refusal struct {
	// Reason is a CamelCase word, as a condition's.
	Reason  string
	Message string
}

// Refusal reasons.
const (
	ReasonNotOneMinor      = "NotOneMinorUp"
	ReasonAlreadyRuns      = "AlreadyRuns"
	ReasonNodeNotReady     = "NodeNotReady"
	ReasonEtcdUnhealthy    = "EtcdUnhealthy"
	ReasonEtcdMemberAbsent = "EtcdMemberMissing"
	ReasonImagesMissing    = "ImagesMissing"
	ReasonKubeletTooOld    = "KubeletTooOld"
	ReasonInvalidVersion   = "InvalidVersion"
	ReasonSkew             = "VersionSkew"
)

// MaxKubeletMinorsBehind is how many minors a kubelet may lag the
// apiserver (the version skew policy, since v1.28).
const MaxKubeletMinorsBehind = 3

// Preflight lists every reason to refuse moving the cluster from current
// to target, all of them at once, so that one round of fixes is enough.
// None means the upgrade may start.
func Preflight(c Cluster, current, target Versions) []Refusal {
	var out []Refusal
	refuse := func(reason, format string, args ...any) {
		out = append(out, Refusal{Reason: reason, Message: fmt.Sprintf(format, args...)})
	}
	from, err := parse("current Kubernetes", current.Kubernetes)
	if err != nil {
		refuse(ReasonInvalidVersion, "%v", err)
		return out
	}
	to, err := parse("target Kubernetes", target.Kubernetes)
	if err != nil {
		refuse(ReasonInvalidVersion, "%v", err)
		return out
	}
	switch d := minorsApart(from, to); {
	case from.Major() != to.Major():
		refuse(ReasonNotOneMinor, "%s to %s changes the major version", current.Kubernetes, target.Kubernetes)
	case d < 0 || d == 0 && to.LessThan(from):
		refuse(ReasonNotOneMinor, "%s to %s goes down: a downgrade is a restore from a snapshot, not an upgrade", current.Kubernetes, target.Kubernetes)
	case d > 1:
		refuse(ReasonNotOneMinor, "%s to %s is %d minors: upgrade one minor at a time (to v%d.%d first)", current.Kubernetes, target.Kubernetes, d, from.Major(), from.Minor()+1)
	case d == 0 && to.EqualTo(from):
		refuse(ReasonAlreadyRuns, "the cluster already runs %s", target.Kubernetes)
	}

	for _, n := range c.Nodes {
		if !n.Ready {
			refuse(ReasonNodeNotReady, "node %s is not Ready", n.Name)
		}
		if len(n.MissingImages) > 0 {
			missing := append([]string(nil), n.MissingImages...)
			sort.Strings(missing)
			refuse(ReasonImagesMissing, "node %s lacks the target's images %v (bootlet images import)", n.Name, missing)
		}
		if kv, ok := n.Running[Kubelet]; ok {
			k, err := parse("node "+n.Name+"'s kubelet", kv)
			if err != nil {
				refuse(ReasonInvalidVersion, "%v", err)
			} else if minorsApart(k, to) > MaxKubeletMinorsBehind {
				refuse(ReasonKubeletTooOld, "node %s's kubelet %s is more than %d minors older than %s", n.Name, kv, MaxKubeletMinorsBehind, target.Kubernetes)
			}
		}
	}

	members := map[string]EtcdMember{}
	for _, m := range c.EtcdMembers {
		members[m.Name] = m
		if !m.Healthy {
			refuse(ReasonEtcdUnhealthy, "etcd member %s is unhealthy", m.Name)
		}
		if m.Learner {
			refuse(ReasonEtcdUnhealthy, "etcd member %s is a learner: finish or undo its join first", m.Name)
		}
	}
	if !c.EtcdLeader {
		refuse(ReasonEtcdUnhealthy, "no quorum of etcd's members is Ready")
	}
	for _, n := range c.masters() {
		if _, ok := members[n.Name]; !ok {
			refuse(ReasonEtcdMemberAbsent, "master %s has no etcd member", n.Name)
		}
	}
	for _, v := range SkewViolations(c) {
		refuse(ReasonSkew, "%s", v)
	}
	return out
}
