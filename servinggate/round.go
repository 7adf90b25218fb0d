package servinggate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	utilpod "k8s.io/kubernetes/pkg/util/pod"

	"github.com/bootlet/bootlet/ownprocess"
	btypes "github.com/bootlet/bootlet/types"
)

// observed is one gated pod of the last list and what a round saw of it.
type observed struct {
	pod   *v1.Pod
	facts Facts
}

// Round is a full round: observe (list this node's pods, ask each gated
// one's own process), decide (Decide, pure, per pod), act (patch the
// conditions that change). It reports whether a pod waits to serve.
func (g *Gate) Round(ctx context.Context) bool {
	cs := g.connect()
	if cs == nil || !g.list(ctx, cs) {
		return false
	}
	obs := make([]observed, len(g.pods))
	for i, p := range g.pods {
		obs[i] = g.check(ctx, p)
	}
	return g.act(ctx, cs, obs, g.decide(obs))
}

// Recheck is a round between full rounds for the pods of the last list
// that wait to serve: it observes the router's verdict alone, and a
// verdict that they serve turns them True. A probe of fresh connections is
// left to the next full round: the router knows within its round, and the
// full check costs connections.
func (g *Gate) Recheck(ctx context.Context) bool {
	cs := g.connect()
	if cs == nil || g.cfg.Verdicts == nil {
		return false
	}
	obs := make([]observed, len(g.pods))
	for i, p := range g.pods {
		obs[i] = g.verdict(p)
	}
	return g.act(ctx, cs, obs, g.decide(obs))
}

// list reads this node's gated pods into g.pods and forgets the pods that
// are gone. It reports whether the list succeeded.
func (g *Gate) list(ctx context.Context, cs kubernetes.Interface) bool {
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	list, err := cs.CoreV1().Pods(g.cfg.Namespace).List(lctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", g.cfg.NodeName).String()})
	cancel()
	if err != nil {
		klog.V(2).InfoS("Serving gate: listing this node's pods failed", "namespace", g.cfg.Namespace, "err", err)
		return false
	}
	g.pods = g.pods[:0]
	seen := map[types.UID]bool{}
	for i := range list.Items {
		if p := &list.Items[i]; p.Spec.NodeName == g.cfg.NodeName && gated(p) {
			g.pods = append(g.pods, p)
			seen[p.UID] = true
		}
	}
	for uid := range g.mem {
		if !seen[uid] {
			delete(g.mem, uid)
			delete(g.reported, uid)
		}
	}
	return true
}

// check observes one pod in a full round: its own process asked, unless
// the pod is being deleted or no container of it runs.
func (g *Gate) check(ctx context.Context, p *v1.Pod) observed {
	var serves *bool
	var why string
	if p.DeletionTimestamp == nil && g.serves != nil {
		ok := false
		if running(p) {
			ok, why = g.serves(ctx, p)
		} else {
			why = "no container of the pod is running"
		}
		serves = &ok
	}
	return observed{p, factsOf(p, serves, why)}
}

// verdict observes one pod in a recheck: serving when the router knows
// its own process serves, not asked otherwise.
func (g *Gate) verdict(p *v1.Pod) observed {
	var serves *bool
	if _, port, err := ownprocess.ReadinessHTTPGet(p); err == nil && port > 0 && p.DeletionTimestamp == nil {
		if known, ok := g.cfg.Verdicts.ServedBy(port, ownprocess.InPod(p.UID)); known && ok {
			serves = &ok
		}
	}
	return observed{p, factsOf(p, serves, "")}
}

// factsOf is Decide's view of a gated pod.
func factsOf(p *v1.Pod, serves *bool, why string) Facts {
	f := Facts{Declared: true, Terminating: p.DeletionTimestamp != nil, Serves: serves, Why: why}
	if _, c := podutil.GetPodCondition(&p.Status, btypes.PodConditionServing); c != nil {
		f.Current = c.Status
	}
	return f
}

// decide is Decide for each observed pod with what the gate remembers of
// it; it changes nothing.
func (g *Gate) decide(obs []observed) []Decision {
	ds := make([]Decision, len(obs))
	for i, o := range obs {
		ds[i] = Decide(o.facts, g.mem[o.pod.UID])
	}
	return ds
}

// act keeps each decision's Memory and patches the conditions that
// change. It reports whether a pod waits to serve (a failed patch counts).
func (g *Gate) act(ctx context.Context, cs kubernetes.Interface, obs []observed, ds []Decision) bool {
	pending := false
	for i, o := range obs {
		d := ds[i]
		g.mem[o.pod.UID] = d.Memory
		if d.Patch != "" && !g.patch(ctx, cs, o.pod, d) {
			pending = true
			continue
		}
		pending = d.Pending || pending
	}
	return pending
}

// patch sets the condition d decided on p, and p to the patched pod. A
// failure is logged and reported once as a node event.
func (g *Gate) patch(ctx context.Context, cs kubernetes.Interface, p *v1.Pod, d Decision) bool {
	status := p.Status.DeepCopy()
	podutil.UpdatePodCondition(status, &v1.PodCondition{Type: btypes.PodConditionServing, Status: d.Patch, Reason: d.Reason, Message: d.Message})
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	updated, _, _, err := utilpod.PatchPodStatus(pctx, cs, p.Namespace, p.Name, p.UID, p.Status, *status)
	cancel()
	if err != nil {
		// PatchPodStatus wraps the apiserver's error as text (its type is
		// lost); the apiserver's refusal reads "... is forbidden: ...".
		msg := fmt.Sprintf("setting %s=%s on pod %s/%s failed: %v", btypes.PodConditionServing, d.Patch, p.Namespace, p.Name, err)
		if strings.Contains(err.Error(), " is forbidden: ") {
			msg = fmt.Sprintf("setting %s=%s on pod %s/%s is forbidden: the Role in self-hosted/%s grants pods/status patch since the serving gate; apply it (kubectl apply -f)",
				btypes.PodConditionServing, d.Patch, p.Namespace, p.Name, rbacFile)
		}
		klog.ErrorS(err, "Serving gate: patching a pod's status failed", "pod", klog.KObj(p), "status", d.Patch)
		g.reportOnce(p.UID, string(d.Patch), "PodServingGateFailed", msg)
		return false
	}
	klog.InfoS("Serving gate", "pod", klog.KObj(p), "uid", p.UID, "condition", btypes.PodConditionServing, "status", d.Patch, "why", d.Message)
	delete(g.reported, p.UID)
	if updated != nil {
		*p = *updated
	} else {
		p.Status = *status
	}
	return true
}

// rbacFile is manifests.CheckpointerRBACFile (manifests is the renderer;
// bootlet's daemon need not import it for a name).
const rbacFile = "bootlet-checkpointer-rbac.yaml"

// reportOnce records an event once per pod and value (the status it could
// not set): a failing patch is retried every round.
func (g *Gate) reportOnce(uid types.UID, value, reason, msg string) {
	if g.reported[uid] == value {
		return
	}
	g.reported[uid] = value
	if g.cfg.Events != nil {
		g.cfg.Events.NodeEvent(g.cfg.NodeName, v1.EventTypeWarning, reason, msg)
	}
}

// gated: the pod declares the gate and runs in the host network. The
// own-process check reads bootlet's /proc/net, which is the pod's only in
// the host network; and only such a pod can share the node's apiserver
// port.
func gated(p *v1.Pod) bool {
	return p.Spec.HostNetwork && slices.ContainsFunc(p.Spec.ReadinessGates, func(r v1.PodReadinessGate) bool {
		return r.ConditionType == btypes.PodConditionServing
	})
}

// running: the pod's status names a running container. A pod still pulling
// or creating has no process to ask, and asking would cost connections to
// the other apiserver (the router's target). After a reboot the stored
// status still says running: then the check runs and finds out.
func running(p *v1.Pod) bool {
	return slices.ContainsFunc(p.Status.ContainerStatuses, func(s v1.ContainerStatus) bool { return s.State.Running != nil })
}
