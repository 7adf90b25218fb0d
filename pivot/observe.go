package pivot

import (
	"context"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/ownprocess"
)

// Observation: what a round looks at, gathered before Decide.

// observe gathers every fact Decide looks at: first what bootlet's
// registry and the apiserver say (bootstrap pods, self-hosted pods, the
// default/kubernetes endpoints), then the one probe the rules need: whether
// the serving candidate's own process answers /readyz. false: a read
// failed, and nothing is decided from a partial view.
func (p *pivot) observe(ctx context.Context) (Facts, bool) {
	facts := Facts{}
	var apiserverPod *v1.Pod
	selfHosted := map[string][]*v1.Pod{}
	for _, c := range p.cfg.Components {
		cf := ComponentFacts{Component: c}
		bp, err := p.cfg.Pods.GetPod(c.Bootstrap.Namespace, c.Bootstrap.Name)
		if err == nil {
			cf.Bootstrap = bootstrapFacts(bp)
			if c.APIServer {
				apiserverPod = bp
			}
		} else if !apierrors.IsNotFound(err) {
			klog.ErrorS(err, "Pivot: reading the bootstrap pod failed", "pod", c.Bootstrap.String())
			return facts, false
		}
		sel, err := labels.Parse(c.Selector)
		if err != nil {
			klog.ErrorS(err, "Pivot: bad selector", "component", c.Name)
			return facts, false
		}
		shs, err := p.pods.Pods(metav1.NamespaceSystem).List(sel)
		if err != nil {
			klog.ErrorS(err, "Pivot: listing self-hosted pods failed", "component", c.Name)
			return facts, false
		}
		sort.Slice(shs, func(i, j int) bool { return shs[i].Name < shs[j].Name })
		for _, sp := range shs {
			sf := selfHostedFacts(sp)
			if NeedsProcessCheck(cf, sf) {
				sf.NoProcess = !runsOnThisNode(sp)
			}
			cf.SelfHosted = append(cf.SelfHosted, sf)
		}
		selfHosted[c.Name] = shs
		facts.Components = append(facts.Components, cf)
	}
	if apiserverPod != nil {
		facts.EndpointsListNode = p.endpointsListNode(ctx, advertiseAddress(apiserverPod))
	}
	for i := range facts.Components {
		cf := &facts.Components[i]
		cand := servingCandidate(*cf)
		if cand == nil {
			continue
		}
		for _, sp := range selfHosted[cf.Component.Name] {
			if sp.UID == cand.UID {
				ok, why := p.servesReadyz(ctx, sp)
				cand.ServesReadyz = ok
				if !ok {
					klog.V(2).InfoS("Pivot: the self-hosted apiserver's own process does not answer /readyz yet", "pod", sp.Name, "why", why)
				}
			}
		}
	}
	return facts, true
}

// endpointsListNode reports whether both default/kubernetes objects, the
// Endpoints and the EndpointSlice the apiserver's reconciler keeps with it,
// list ip.
func (p *pivot) endpointsListNode(ctx context.Context, ip string) bool {
	if ip == "" {
		return false
	}
	ep, err := p.kube.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || !endpointsList(ep, ip) {
		return false
	}
	slices, err := p.kube.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		return false
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if a == ip {
					return true
				}
			}
		}
	}
	return false
}

// runsOnThisNode reports whether a process of one of the containers pod's
// status reports running runs on this node. A status etcd kept from before
// names containers that are gone; the kubelet's own status names a
// container running only once it runs, and the pod's sandbox (pause) is
// not one of its containers, so a pod the kubelet is only starting does
// not count either.
func runsOnThisNode(pod *v1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil || cs.ContainerID == "" {
			continue
		}
		id := cs.ContainerID
		if i := strings.Index(id, "://"); i >= 0 {
			id = id[i+3:]
		}
		if len(ownprocess.Processes(ownprocess.InContainer(pod.UID, id))) > 0 {
			return true
		}
	}
	return false
}

// servesReadyz reports whether a process of pod (a self-hosted apiserver on
// this node) itself answers its readiness endpoint with 200, and why not.
func (p *pivot) servesReadyz(ctx context.Context, pod *v1.Pod) (bool, string) {
	return ownprocess.ServesReadinessVia(ctx, p.cfg.Verdicts, p.rest, pod)
}
