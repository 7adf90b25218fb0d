package observer

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
)

// Read lists what upgrade.Observe needs, with the API's own reads (no
// cache: a plan is made once, and each round of a controller must see the
// step it just took).
func Read(ctx context.Context, cs kubernetes.Interface) (upgrade.Observed, error) {
	var o upgrade.Observed
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, fmt.Errorf("listing nodes: %w", err)
	}
	pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, fmt.Errorf("listing kube-system's pods: %w", err)
	}
	dss, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, fmt.Errorf("listing kube-system's DaemonSets: %w", err)
	}
	deps, err := cs.AppsV1().Deployments(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	if err != nil {
		return o, fmt.Errorf("listing kube-system's Deployments: %w", err)
	}
	o.Nodes, o.Pods, o.DaemonSets, o.Deployments = nodes.Items, pods.Items, dss.Items, deps.Items
	o.EtcdMembers, o.EtcdLeader = EtcdFromPods(pods.Items)
	return o, nil
}

// EtcdFromPods is etcd's membership as its pods show it: a member per
// node that runs an etcd pod (two pods on one node, a static pod beside its
// successor, are one member: healthy if either is Ready, at the older
// version; a helper of a one-member etcd step is a member of its own),
// healthy while Ready (its probes are etcd's own /livez and
// /readyz), and a leader while a quorum of them is healthy. It is the
// view the API gives without etcd's credentials, which only a master's
// files hold; it cannot tell a learner.
func EtcdFromPods(pods []v1.Pod) (members []upgrade.EtcdMember, leader bool) {
	byNode := map[string]int{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			if c.Name != "etcd" {
				continue
			}
			// The older of what the spec names and what runs: a mirror pod
			// whose static pod changed under the same UID keeps its old
			// spec, and a container replaced keeps running the old image
			// until it is.
			v := upgrade.VersionOfImage(c.Image)
			if r := upgrade.VersionOfImage(upgrade.RunningImage(p, c)); upgrade.OlderVersion(r, v) {
				v = r
			}
			m := upgrade.EtcdMember{Name: p.Spec.NodeName, Version: v, Healthy: podutil.IsPodReady(&p)}
			if name, helper := p.Labels[btypes.LabelEtcdUpgradeHelper]; helper {
				// A helper of a one-member step: a member of its own
				// beside the node's, named by its etcd --name.
				m.Name, m.Helper = name, true
			}
			i, seen := byNode[m.Name]
			if !seen {
				byNode[m.Name] = len(members)
				members = append(members, m)
				continue
			}
			cur := &members[i]
			cur.Healthy = cur.Healthy || m.Healthy
			if upgrade.OlderVersion(m.Version, cur.Version) {
				cur.Version = m.Version
			}
		}
	}
	healthy, voting := 0, 0
	for _, m := range members {
		if m.Helper && !m.Healthy {
			// A helper is not Ready while it is a learner (etcd's
			// /readyz), which no quorum counts; the pods cannot tell
			// it from a voter that stopped.
			continue
		}
		voting++
		if m.Healthy {
			healthy++
		}
	}
	return members, voting > 0 && healthy > voting/2
}

// PlanReport reads the cluster and decides the plan of its upgrade to the
// Kubernetes version target (etcd's too, when etcdUpgrade).
func PlanReport(ctx context.Context, cs kubernetes.Interface, target string, etcdUpgrade bool) (upgrade.PlanReport, error) {
	to, err := upgrade.DesiredVersions(target, etcdUpgrade)
	if err != nil {
		return upgrade.PlanReport{}, err
	}
	o, err := Read(ctx, cs)
	if err != nil {
		return upgrade.PlanReport{}, err
	}
	return upgrade.MakePlanReport(upgrade.Observe(o, to), to)
}
