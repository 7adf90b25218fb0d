package servinggate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	utilpod "k8s.io/kubernetes/pkg/util/pod"

	"github.com/bootlet/bootlet/ownprocess"
	btypes "github.com/bootlet/bootlet/types"
)

// NodeEventSink records node events (podapi.EventLog).
type NodeEventSink interface {
	NodeEvent(node, eventType, reason, message string)
}

// Config configures the gate.
type Config struct {
	NodeName string
	// Namespace of the pods (default kube-system, where the self-hosted
	// apiserver's DaemonSet is).
	Namespace string
	// Kubeconfig reaches the apiserver (the checkpointer's identity, whose
	// Role grants the list and the status patch). It is read until it
	// loads, and again when its bytes change (a renewed client
	// certificate).
	Kubeconfig string
	// REST is used when Kubeconfig is empty (a node with a pivot and no
	// checkpointer: the pivot's admin kubeconfig).
	REST *rest.Config
	// Client replaces both (tests); its TLS settings are then unknown, so
	// Serves must be set too.
	Client kubernetes.Interface
	// Verdicts is the apiserver port's router (nil: none): asked first
	// whether the pod's own process serves, and alone between full rounds.
	Verdicts ownprocess.Verdicts
	// Serves asks whether the pod's own process answers its readiness
	// endpoint (default: ownprocess.ServesReadinessVia with Verdicts and
	// the client's TLS settings).
	Serves func(ctx context.Context, pod *v1.Pod) (bool, string)
	Events NodeEventSink
	// Period of the full rounds: list, check, patch (default 1 s).
	Period time.Duration
	// Recheck is how often, while a pod waits to serve, the router's
	// verdict alone is asked between full rounds (default 250 ms, the
	// router's own round): the gate turns True within a recheck of the
	// router routing to the pod.
	Recheck time.Duration
}

// Gate is the controller. Run drives it from one goroutine, which does all
// its I/O; it holds no lock.
type Gate struct {
	cfg Config

	client  kubernetes.Interface
	kcData  []byte
	kcCheck time.Time
	serves  func(ctx context.Context, pod *v1.Pod) (bool, string)

	// pods is the last list's gated pods (with the patches since), mem
	// each one's Memory, reported what was last reported per pod.
	pods     []*v1.Pod
	mem      map[types.UID]Memory
	reported map[types.UID]string
}

// New builds the gate.
func New(cfg Config) *Gate {
	if cfg.Namespace == "" {
		cfg.Namespace = metav1.NamespaceSystem
	}
	if cfg.Period <= 0 {
		cfg.Period = time.Second
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = 250 * time.Millisecond
	}
	return &Gate{cfg: cfg, client: cfg.Client, serves: cfg.Serves, mem: map[types.UID]Memory{}, reported: map[types.UID]string{}}
}

// kubeconfigRecheck is how often the kubeconfig file is compared with the
// one the client was built from.
const kubeconfigRecheck = 10 * time.Second

// Run does a full round every Period and, while a pod waits to serve, a
// recheck every Recheck, until ctx ends.
func (g *Gate) Run(ctx context.Context) {
	klog.InfoS("Serving gate started", "node", g.cfg.NodeName, "namespace", g.cfg.Namespace, "condition", btypes.PodConditionServing)
	next := time.Now()
	for {
		var pending bool
		if !time.Now().Before(next) {
			pending = g.Round(ctx)
			next = time.Now().Add(g.cfg.Period)
		} else {
			pending = g.Recheck(ctx)
		}
		wait := time.Until(next)
		if pending && g.cfg.Verdicts != nil && wait > g.cfg.Recheck {
			wait = g.cfg.Recheck
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// connect builds the client from the kubeconfig once it loads, and again
// when the file changed.
func (g *Gate) connect() kubernetes.Interface {
	if g.cfg.Client != nil {
		return g.cfg.Client
	}
	if g.cfg.Kubeconfig == "" {
		if g.client == nil && g.cfg.REST != nil {
			g.build(g.cfg.REST, nil)
		}
		return g.client
	}
	if g.client != nil && time.Since(g.kcCheck) < kubeconfigRecheck {
		return g.client
	}
	g.kcCheck = time.Now()
	data, err := os.ReadFile(g.cfg.Kubeconfig)
	if err != nil || bytes.Equal(data, g.kcData) {
		return g.client
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", g.cfg.Kubeconfig)
	if err != nil {
		klog.V(4).InfoS("Serving gate: kubeconfig not loadable yet", "path", g.cfg.Kubeconfig, "err", err)
		return g.client
	}
	if g.client != nil {
		klog.InfoS("Serving gate: kubeconfig changed; reconnecting with it", "path", g.cfg.Kubeconfig)
	}
	g.build(cfg, data)
	return g.client
}

func (g *Gate) build(cfg *rest.Config, data []byte) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 2 * time.Second
	cfg.UserAgent = "bootlet-serving-gate"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		klog.ErrorS(err, "Serving gate: cannot build an apiserver client")
		return
	}
	g.client, g.kcData = cs, data
	if g.cfg.Serves == nil {
		tls := rest.CopyConfig(cfg)
		g.serves = func(ctx context.Context, pod *v1.Pod) (bool, string) {
			return ownprocess.ServesReadinessVia(ctx, g.cfg.Verdicts, tls, pod)
		}
	}
}

// Round lists this node's pods, checks each gated one's own process, and
// patches the conditions Decide changes. It reports whether a pod waits
// to serve.
func (g *Gate) Round(ctx context.Context) bool {
	cs := g.connect()
	if cs == nil {
		return false
	}
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
	pending := false
	for _, p := range g.pods {
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
		pending = g.apply(ctx, cs, p, serves, why) || pending
	}
	return pending
}

// Recheck asks the router alone, for the pods of the last list that wait
// to serve, and patches True for those its verdict says serve. A probe of
// fresh connections is left to the next full round: the router knows
// within its round, and the full check costs connections.
func (g *Gate) Recheck(ctx context.Context) bool {
	cs := g.connect()
	if cs == nil || g.cfg.Verdicts == nil {
		return false
	}
	pending := false
	for _, p := range g.pods {
		var serves *bool
		if _, port, err := ownprocess.ReadinessHTTPGet(p); err == nil && port > 0 && p.DeletionTimestamp == nil {
			if known, ok := g.cfg.Verdicts.ServedBy(port, ownprocess.InPod(p.UID)); known && ok {
				serves = &ok
			}
		}
		pending = g.apply(ctx, cs, p, serves, "") || pending
	}
	return pending
}

// apply decides one pod's condition and patches it on a change.
func (g *Gate) apply(ctx context.Context, cs kubernetes.Interface, p *v1.Pod, serves *bool, why string) bool {
	f := Facts{Declared: true, Terminating: p.DeletionTimestamp != nil, Serves: serves, Why: why}
	if _, c := podutil.GetPodCondition(&p.Status, btypes.PodConditionServing); c != nil {
		f.Current = c.Status
	}
	d := Decide(f, g.mem[p.UID])
	g.mem[p.UID] = d.Memory
	if d.Patch == "" {
		return d.Pending
	}
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
		return true
	}
	klog.InfoS("Serving gate", "pod", klog.KObj(p), "uid", p.UID, "condition", btypes.PodConditionServing, "status", d.Patch, "why", d.Message)
	delete(g.reported, p.UID)
	if updated != nil {
		*p = *updated
	} else {
		p.Status = *status
	}
	return d.Pending
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
