package pivot

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Action: carrying out a round's decision.

// act logs each component's decision when it changes and withdraws the
// bootstrap pods Decide let go.
func (p *pivot) act(ctx context.Context, facts Facts, steps Decision) {
	for _, s := range steps {
		if p.last[s.Component] != s.Reason {
			p.last[s.Component] = s.Reason
			klog.InfoS("Pivot", "component", s.Component, "withdraw", s.Withdraw, "done", s.Done, "reason", s.Reason)
		}
		if !s.Withdraw {
			continue
		}
		c := componentNamed(p.cfg.Components, s.Component)
		if c.APIServer && p.cfg.Handover != nil {
			p.handOver(ctx, c, facts, s)
		}
		p.withdraw(c, facts, s)
	}
}

// withdraw deletes the bootstrap pod from bootlet's registry, with a UID
// precondition so a pod re-created meanwhile is left alone. The registry's
// release path withdraws the static copy and the kubelet stops the pod
// gracefully (SIGTERM, the pod's grace period).
func (p *pivot) withdraw(c Component, f Facts, s ComponentDecision) {
	var uid types.UID
	for _, cf := range f.Components {
		if cf.Component.Name == c.Name && cf.Bootstrap != nil {
			uid = cf.Bootstrap.UID
		}
	}
	pod, err := p.cfg.Pods.DeletePod(c.Bootstrap.Namespace, c.Bootstrap.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil {
		klog.ErrorS(err, "Pivot: withdrawing the bootstrap pod failed", "pod", c.Bootstrap.String())
		return
	}
	klog.InfoS("Pivot: withdrew the bootstrap pod", "pod", c.Bootstrap.String(), "selfHosted", s.Pod, "reason", s.Reason)
	if p.cfg.Events != nil && pod != nil {
		p.cfg.Events.Event(pod, v1.EventTypeNormal, "PivotedToSelfHosted", fmt.Sprintf("%s: %s; bootstrap pod withdrawn", c.Name, s.Reason))
	}
}

// handOver moves the apiserver port's new connections to the self-hosted
// apiserver s.Pod and lets the bootstrap one's clients leave before it is
// withdrawn (docs/design/reuseport.md, "How it works").
func (p *pivot) handOver(ctx context.Context, c Component, f Facts, s ComponentDecision) {
	for _, cf := range f.Components {
		if cf.Component.Name != c.Name || cf.Bootstrap == nil {
			continue
		}
		for _, sh := range cf.SelfHosted {
			if sh.Name == s.Pod {
				p.cfg.Handover(ctx, sh.UID, cf.Bootstrap.UID)
			}
		}
	}
}

func componentNamed(cs []Component, name string) Component {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return Component{}
}
