package checkpointer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/ownprocess"
	btypes "github.com/bootlet/bootlet/types"
)

// The checkpointer's I/O (docs/handoff.md, "Checkpointer"): each tick it
// asks the apiserver whether it is ready, lists this node's pods in the
// namespaces it serves, checks each annotated pod's controller against the
// ownership rule book (checkpointer_owner.go), reads the Secrets and
// ConfigMaps of the checkpointed ones, asks the container runtime for the
// local view while the apiserver is unreachable (never the kubelet's API),
// reads the stored checkpoints and the checkpoint pods in bootlet's
// registry, and runs decideCheckpoint for each component. It
// keeps no cache of the apiserver: every decision uses what this tick read
// (bootkube#262 was a stale cache). A checkpoint runs as a pod of bootlet's
// registry: bootlet's worker runs it through CRI, or the handoff presents it
// to a running kubelet as a static pod; deleting it withdraws it.

// Registry is what the checkpointer needs of bootlet's registry
// (podapi.Registry).
type Registry interface {
	ListPods(ns string) ([]v1.Pod, string)
	CreatePod(in *v1.Pod, dryRun bool) (*v1.Pod, error)
	DeletePod(ns, name string, opts *metav1.DeleteOptions) (*v1.Pod, error)
	GetSecret(ns, name string) (*v1.Secret, error)
	PutSecret(s *v1.Secret, create, dryRun bool) (*v1.Secret, error)
	DeleteSecret(ns, name string) error
	GetConfigMap(ns, name string) (*v1.ConfigMap, error)
	PutConfigMap(c *v1.ConfigMap, create, dryRun bool) (*v1.ConfigMap, error)
	DeleteConfigMap(ns, name string) error
}

// NodeEventSink records node events (podapi.EventLog).
type NodeEventSink interface {
	NodeEvent(node, eventType, reason, message string)
}

// Config configures the checkpointer.
type Config struct {
	NodeName string
	// Kubeconfig reaches the apiserver. It is read again at every tick
	// until it loads: on a first boot it is written after bootlet starts.
	Kubeconfig string
	// Client is used instead of Kubeconfig when set (tests).
	Client kubernetes.Interface
	// Readyz asks whether the apiserver is ready (default: GET /readyz
	// through Client; tests replace it, the fake clientset has no REST
	// client).
	Readyz func(ctx context.Context, cs kubernetes.Interface) error
	// Namespaces whose pods may be checkpointed (default
	// DefaultNamespaces, kube-system): the ownership rule book's
	// first rule. The checkpointer lists pods only there, so its RBAC Role
	// needs nothing cluster-wide.
	Namespaces []string
	// PodRunning asks the container runtime whether it runs a pod (a READY
	// sandbox and a running container with that UID): local evidence that
	// a self-hosted pod reported Ready really runs, and, while the
	// apiserver is unreachable, the local view that replaces the kubelet's
	// /pods (Manager.PodRunning; nil: not asked).
	PodRunning func(ctx context.Context, uid types.UID) (bool, error)
	// ServesReadiness asks whether a pod's own process answers its
	// readiness endpoint (default: servesReadiness with the kubeconfig's
	// TLS settings, once it loads; nil with Client set: not asked).
	ServesReadiness func(ctx context.Context, pod *v1.Pod) (bool, string)
	Store           *checkpoint.Store
	Registry        Registry
	Events          NodeEventSink
	Timing          Timing
	// Period between ticks (default 1 s); a watch event wakes it earlier.
	Period time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Checkpointer is the checkpoint controller. Run drives it; one goroutine
// does all its I/O, and mu guards only the status it publishes.
type Checkpointer struct {
	cfg    Config
	client kubernetes.Interface
	wake   chan struct{}

	// Loop state, touched only by the loop goroutine.
	reachable        bool
	everReachable    bool
	unreachableSince time.Time
	mem              map[string]ckptMemory
	why              map[string]string
	// rejected: per component, the hash of a checkpoint bootlet's registry
	// would not accept as a pod, so it is not stored (and not re-reported).
	rejected map[string]string
	// known: per component, the UIDs of its pods on this node that the
	// rule book verified at the last fresh list: the only runtime pods the
	// local view counts as the component's while the apiserver is
	// unreachable (with the stored checkpoint's source UID, after a reboot).
	known map[string][]types.UID
	// reported: what was last reported as an event, per pod UID (a refused
	// pod) or component (a conflict), so each is reported once.
	reported    map[string]string
	watching    bool
	watchClient kubernetes.Interface

	mu     sync.Mutex
	status Status
}

// Status is what the checkpointer last saw and decided.
type Status struct {
	Reachable  bool
	Components map[string]ComponentStatus
}

// ComponentStatus is one component's state.
type ComponentStatus struct {
	StoredHash   string
	StoredSource string
	StoredAt     time.Time
	Active       bool
	Why          string
}

// New builds the controller.
func New(cfg Config) *Checkpointer {
	if cfg.Period <= 0 {
		cfg.Period = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Readyz == nil {
		cfg.Readyz = apiserverReadyz
	}
	if cfg.Timing == (Timing{}) {
		cfg.Timing = DefaultTiming
	}
	if len(cfg.Namespaces) == 0 {
		cfg.Namespaces = DefaultNamespaces
	}
	return &Checkpointer{cfg: cfg, client: cfg.Client, wake: make(chan struct{}, 1),
		unreachableSince: cfg.Now(), mem: map[string]ckptMemory{}, why: map[string]string{}, rejected: map[string]string{},
		known: map[string][]types.UID{}, reported: map[string]string{}}
}

// Status returns a copy of the last published status.
func (c *Checkpointer) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := Status{Reachable: c.status.Reachable, Components: map[string]ComponentStatus{}}
	for k, v := range c.status.Components {
		out.Components[k] = v
	}
	return out
}

// Run ticks until ctx ends.
func (c *Checkpointer) Run(ctx context.Context) {
	klog.InfoS("Checkpointer started", "node", c.cfg.NodeName, "kubeconfig", c.cfg.Kubeconfig, "namespaces", c.cfg.Namespaces,
		"activateAfter", c.cfg.Timing.ActivateAfter, "activateAfterStart", c.cfg.Timing.ActivateAfterStart, "withdrawAfter", c.cfg.Timing.WithdrawAfter)
	t := time.NewTicker(c.cfg.Period)
	defer t.Stop()
	for {
		c.Tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.wake:
		}
	}
}

// connect builds the apiserver client from the kubeconfig (once it loads)
// and starts the watch that wakes the loop on changes.
func (c *Checkpointer) connect(ctx context.Context) kubernetes.Interface {
	if c.client == nil && c.cfg.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.cfg.Kubeconfig)
		if err != nil {
			klog.V(4).InfoS("Checkpointer kubeconfig not loadable yet", "path", c.cfg.Kubeconfig, "err", err)
			return nil
		}
		cfg.Timeout = 2 * time.Second
		cfg.UserAgent = "bootlet-checkpointer"
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			klog.ErrorS(err, "Checkpointer cannot build an apiserver client", "kubeconfig", c.cfg.Kubeconfig)
			return nil
		}
		// The watch lasts minutes: its client has no request timeout.
		wcfg := rest.CopyConfig(cfg)
		wcfg.Timeout = 0
		if wcs, err := kubernetes.NewForConfig(wcfg); err == nil {
			c.watchClient = wcs
		}
		c.client = cs
		if c.cfg.ServesReadiness == nil {
			tlsCfg := rest.CopyConfig(cfg)
			c.cfg.ServesReadiness = func(ctx context.Context, pod *v1.Pod) (bool, string) {
				return ownprocess.ServesReadiness(ctx, tlsCfg, pod)
			}
		}
	}
	if c.client != nil && !c.watching {
		c.watching = true
		wcs := c.watchClient
		if wcs == nil {
			wcs = c.client
		}
		for _, ns := range c.cfg.Namespaces {
			go c.watchLoop(ctx, wcs, ns)
		}
	}
	return c.client
}

// watchLoop watches this node's pods in one namespace and wakes the loop
// on every event, so a pod turning Ready is acted on at once. The watch
// only wakes: the tick lists again and decides from that list.
func (c *Checkpointer) watchLoop(ctx context.Context, cs kubernetes.Interface, ns string) {
	sel := fields.OneTermEqualSelector("spec.nodeName", c.cfg.NodeName).String()
	for ctx.Err() == nil {
		// From the version of a list, so a new watch does not replay every
		// pod as ADDED; bounded, so a silently dead connection is renewed.
		var w watch.Interface
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: sel, Limit: 1})
		if err == nil {
			w, err = cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: l.ResourceVersion, TimeoutSeconds: ptr.To[int64](300)})
		}
		if err == nil {
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					break
				}
				c.kick()
			}
			w.Stop()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (c *Checkpointer) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// apiserverReadyz is GET /readyz: "ok" means an apiserver that serves.
func apiserverReadyz(ctx context.Context, cs kubernetes.Interface) error {
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return err
	}
	if string(body) != "ok" {
		return fmt.Errorf("/readyz: %q", body)
	}
	return nil
}

// apiView is what one tick read from the apiserver.
type apiView struct {
	reachable, fresh bool
	// byComponent: this node's pods that passed the ownership rule book,
	// by component key, with the owner it verified.
	byComponent map[string][]ownedPod
	// owners reads controllers for this tick (nil when not fresh).
	owners ownerReader
}

// ownedPod is a pod with the owner the rule book verified for it.
type ownedPod struct {
	pod   *v1.Pod
	owner CheckpointOwner
}

// Tick is one pass: observe, decide, act. Run calls it every Period (and
// on watch events); tests call it directly.
func (c *Checkpointer) Tick(ctx context.Context) {
	now := c.cfg.Now()
	cs := c.connect(ctx)
	view := c.observeAPI(ctx, cs)
	if view.reachable != c.reachable || c.unreachableSince.IsZero() && !view.reachable {
		if view.reachable {
			klog.InfoS("Checkpointer: apiserver reachable", "after", now.Sub(c.unreachableSince).Round(time.Millisecond))
			c.unreachableSince = time.Time{}
			c.everReachable = true
		} else {
			klog.InfoS("Checkpointer: apiserver unreachable")
			c.unreachableSince = now
		}
		c.reachable = view.reachable
	}
	world := ckptWorld{Now: now, Reachable: view.reachable, Fresh: view.fresh, UnreachableSince: c.unreachableSince, NeverReachable: !c.everReachable}

	stored := c.loadStored()
	active := c.activePods()

	keys := map[string]bool{}
	for k := range stored {
		keys[k] = true
	}
	for k := range view.byComponent {
		keys[k] = true
	}
	for k := range active {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)

	statuses := map[string]ComponentStatus{}
	for _, key := range sorted {
		comp := ckptComponent{}
		st := stored[key]
		if st != nil {
			comp.Stored = st.Hash
			if _, v, why := storedOwnerVerdict(st, c.cfg.Namespaces, nil); v == ownerRefused {
				comp.Disallowed = true
				c.reportOnce("disallowed\x00"+key, why, v1.EventTypeWarning, "CheckpointNotAllowed",
					fmt.Sprintf("checkpoint of %s is not allowed by the ownership rules and is dropped: %s", key, why))
			}
		}
		var candidate *Checkpoint
		mine, others := splitByOwner(st, comp.Disallowed, view.byComponent[key])
		if view.fresh {
			uids := make([]types.UID, 0, len(mine))
			for _, op := range mine {
				uids = append(uids, op.pod.UID)
			}
			c.known[key] = uids
			comp.SelfHosted = len(mine) > 0
			if p := latestReady(podsOf(mine)); p != nil {
				comp.SelfHostedReadySince = readySinceOf(p)
				if c.cfg.PodRunning != nil && active[key] != nil {
					rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					if ok, err := c.cfg.PodRunning(rctx, p.UID); err == nil {
						comp.RuntimeRunning = &ok
					}
					cancel()
				}
				if c.cfg.ServesReadiness != nil && sharesReadinessPort(active[key], p) {
					ok, why := c.cfg.ServesReadiness(ctx, p)
					comp.SelfHostedServes, comp.ServesWhy = &ok, why
				}
				candidate = c.candidate(ctx, cs, p, ownerOf(mine, p), now)
			} else if p := latestReady(podsOf(others)); p != nil {
				// Another controller of the same name: a candidate only
				// once the stored checkpoint's owner is gone.
				owner := ownerOf(others, p)
				comp.CandidateConflicts = st != nil && !comp.Disallowed
				if comp.CandidateConflicts {
					c.reportOnce("conflict\x00"+key, string(owner.UID), v1.EventTypeWarning, "CheckpointConflict",
						fmt.Sprintf("pod %s/%s of %s asks for the checkpoint of %s, which belongs to %s: refused while that owner stands", p.Namespace, p.Name, owner, key, st.Owner()))
				}
				candidate = c.candidate(ctx, cs, p, owner, now)
			}
			if candidate != nil {
				comp.Candidate = candidate.Hash
			}
			if st != nil && !comp.Disallowed && len(mine) == 0 {
				comp.OwnerGone = c.ownerGone(st, view.owners)
			}
		}
		if !view.reachable && st != nil && active[key] == nil && !comp.Disallowed {
			comp.LocalReady = c.localReady(ctx, key, st)
		}
		if p := active[key]; p != nil {
			comp.Active = true
			comp.ActiveSince = activatedAt(p)
			comp.ActiveTerminating = p.DeletionTimestamp != nil
		}

		dec := decideCheckpoint(world, comp, c.mem[key], c.cfg.Timing)
		c.mem[key] = dec.Memory
		// Actions at Info; a changed reason to wait (it counts seconds) at V(2).
		if len(dec.Actions) > 0 {
			klog.InfoS("Checkpointer", "component", key, "decision", dec.Actions, "why", dec.Why)
		} else if dec.Why != c.why[key] && dec.Why != "" {
			klog.V(2).InfoS("Checkpointer", "component", key, "why", dec.Why)
		}
		c.why[key] = dec.Why
		for _, a := range dec.Actions {
			switch a {
			case ckptStore:
				if c.store(candidate) {
					st = candidate
				}
			case ckptActivate:
				if c.activate(st) {
					comp.Active = true
				}
			case ckptWithdraw:
				c.withdraw(active[key])
			case ckptRemove:
				c.remove(st)
				st = nil
			}
		}
		if !comp.Active {
			c.cleanupObjects(key, st)
		}
		cst := ComponentStatus{Active: comp.Active, Why: dec.Why}
		if st != nil {
			cst.StoredHash, cst.StoredSource, cst.StoredAt = st.Hash, st.SourceName, st.StoredAt
		}
		statuses[key] = cst
	}
	for k := range c.mem {
		if !keys[k] {
			delete(c.mem, k)
			delete(c.why, k)
			delete(c.rejected, k)
			delete(c.known, k)
		}
	}
	for k := range c.reported {
		if kind, comp, _ := strings.Cut(k, "\x00"); kind != "pod" && !keys[comp] {
			delete(c.reported, k)
		}
	}
	c.mu.Lock()
	c.status = Status{Reachable: view.reachable, Components: statuses}
	c.mu.Unlock()
}

// observeAPI asks /readyz, lists this node's pods in the namespaces it
// serves and applies the ownership rule book to those that ask for a
// checkpoint. A pod whose owner could not be read is left out of this
// tick; one the rule book refuses is reported once.
func (c *Checkpointer) observeAPI(ctx context.Context, cs kubernetes.Interface) apiView {
	v := apiView{}
	if cs == nil {
		return v
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := c.cfg.Readyz(rctx, cs); err != nil {
		klog.V(4).InfoS("Checkpointer: apiserver not ready", "err", err)
		return v
	}
	v.reachable = true
	var pods []v1.Pod
	for _, ns := range c.cfg.Namespaces {
		list, err := cs.CoreV1().Pods(ns).List(rctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", c.cfg.NodeName).String()})
		if err != nil {
			klog.V(2).InfoS("Checkpointer: listing this node's pods failed", "namespace", ns, "err", err)
			return v
		}
		pods = append(pods, list.Items...)
	}
	v.fresh = true
	v.owners = &apiOwners{ctx: ctx, cs: cs, seen: map[string]ownerRead{}}
	v.byComponent = map[string][]ownedPod{}
	if len(c.reported) > 4096 {
		clear(c.reported) // bounded: a flood of refused pods only re-reports
	}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != c.cfg.NodeName || !wantsCheckpoint(p) {
			continue
		}
		owner, verdict, why := verifyPodOwner(p, c.cfg.Namespaces, v.owners)
		switch verdict {
		case ownerOK:
			key := owner.Namespace + "/" + owner.Name
			v.byComponent[key] = append(v.byComponent[key], ownedPod{pod: p, owner: owner})
		case ownerRefused:
			c.reportOnce("pod\x00"+string(p.UID), why, v1.EventTypeWarning, "CheckpointRefused",
				fmt.Sprintf("pod %s/%s asks for a checkpoint and is refused: %s", p.Namespace, p.Name, why))
		default:
			klog.V(2).InfoS("Checkpointer: cannot check a pod's owner this tick", "pod", klog.KObj(p), "why", why)
		}
	}
	return v
}

// reportOnce logs and records an event, once for each (key, value).
func (c *Checkpointer) reportOnce(key, value, eventType, reason, msg string) {
	if c.reported[key] == value {
		return
	}
	c.reported[key] = value
	klog.InfoS("Checkpointer: "+reason, "message", msg)
	c.event(eventType, reason, msg)
}

// apiOwners reads controllers from the apiserver, each at most once a tick.
type apiOwners struct {
	ctx  context.Context
	cs   kubernetes.Interface
	seen map[string]ownerRead
}

type ownerRead struct {
	obj any
	err error
}

func (a *apiOwners) get(kind, ns, name string, read func(context.Context) (any, error)) (any, error) {
	k := kind + "/" + ns + "/" + name
	if r, ok := a.seen[k]; ok {
		return r.obj, r.err
	}
	ctx, cancel := context.WithTimeout(a.ctx, 2*time.Second)
	defer cancel()
	obj, err := read(ctx)
	a.seen[k] = ownerRead{obj, err}
	return obj, err
}

func (a *apiOwners) DaemonSet(ns, name string) (*appsv1.DaemonSet, error) {
	o, err := a.get("DaemonSet", ns, name, func(ctx context.Context) (any, error) {
		return a.cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return o.(*appsv1.DaemonSet), nil
}

func (a *apiOwners) ReplicaSet(ns, name string) (*appsv1.ReplicaSet, error) {
	o, err := a.get("ReplicaSet", ns, name, func(ctx context.Context) (any, error) {
		return a.cs.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return o.(*appsv1.ReplicaSet), nil
}

func (a *apiOwners) Deployment(ns, name string) (*appsv1.Deployment, error) {
	o, err := a.get("Deployment", ns, name, func(ctx context.Context) (any, error) {
		return a.cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return o.(*appsv1.Deployment), nil
}

// splitByOwner splits a component's verified pods into those of the
// stored checkpoint's owner (mine) and those of another controller of the
// same name (others). With no stored checkpoint that counts (none, or one
// the rule book refuses), the first owner in a stable order is the
// component's.
func splitByOwner(st *Checkpoint, disallowed bool, pods []ownedPod) (mine, others []ownedPod) {
	if len(pods) == 0 {
		return nil, nil
	}
	match := func(o CheckpointOwner) bool { return st.sameComponent(o) }
	if st == nil || disallowed {
		first := pods[0].owner
		for _, op := range pods[1:] {
			if op.owner.String() < first.String() {
				first = op.owner
			}
		}
		match = func(o CheckpointOwner) bool { return o == first }
	}
	for _, op := range pods {
		if match(op.owner) {
			mine = append(mine, op)
		} else {
			others = append(others, op)
		}
	}
	return mine, others
}

func podsOf(ops []ownedPod) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(ops))
	for _, op := range ops {
		out = append(out, op.pod)
	}
	return out
}

func ownerOf(ops []ownedPod, p *v1.Pod) CheckpointOwner {
	for _, op := range ops {
		if op.pod == p {
			return op.owner
		}
	}
	return CheckpointOwner{}
}

// candidate reads the objects a Ready pod uses and builds its checkpoint,
// for the owner the rule book verified; nil when one could not be read (a
// missing optional one is left out).
func (c *Checkpointer) candidate(ctx context.Context, cs kubernetes.Interface, pod *v1.Pod, owner CheckpointOwner, now time.Time) *Checkpoint {
	secretNames, cmNames := objectNames(pod)
	var secrets []v1.Secret
	var cms []v1.ConfigMap
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, n := range secretNames {
		s, err := cs.CoreV1().Secrets(pod.Namespace).Get(rctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // optional, or the pod could not run either
		}
		if err != nil {
			klog.V(2).InfoS("Checkpointer: reading a Secret failed; not checkpointing this tick", "pod", klog.KObj(pod), "secret", n, "err", err)
			return nil
		}
		secrets = append(secrets, *s)
	}
	for _, n := range cmNames {
		m, err := cs.CoreV1().ConfigMaps(pod.Namespace).Get(rctx, n, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			klog.V(2).InfoS("Checkpointer: reading a ConfigMap failed; not checkpointing this tick", "pod", klog.KObj(pod), "configMap", n, "err", err)
			return nil
		}
		cms = append(cms, *m)
	}
	return newOwnedCheckpoint(pod, owner, secrets, cms, now)
}

// ownerGone reads the stored checkpoint's owner through the fresh
// apiserver: true only on positive evidence (NotFound, another UID, a
// template no longer annotated). A failed read keeps the checkpoint.
func (c *Checkpointer) ownerGone(st *Checkpoint, owners ownerReader) bool {
	if owners == nil {
		return false
	}
	_, v, why := storedOwnerVerdict(st, c.cfg.Namespaces, owners)
	if v == ownerRefused {
		klog.InfoS("Checkpointer: the stored checkpoint's owner is gone", "component", st.Key(), "owner", st.Owner(), "why", why)
	}
	return v == ownerRefused
}

// localReady is the local view while the apiserver is unreachable, from
// the container runtime (the kubelet's API is not needed, nor trusted): a
// pod the rule book verified for this component (at the last fresh list,
// or the stored checkpoint's source, after a reboot) has a READY sandbox
// and a running container, and its own process answers its HTTP readiness
// endpoint when it has one (host network: on 127.0.0.1). nil: not asked.
func (c *Checkpointer) localReady(ctx context.Context, key string, st *Checkpoint) *bool {
	if c.cfg.PodRunning == nil {
		return nil
	}
	uids := append([]types.UID{}, c.known[key]...)
	if src := types.UID(st.SourceUID); src != "" && !slices.Contains(uids, src) {
		uids = append(uids, src)
	}
	out := false
	for _, uid := range uids {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		running, err := c.cfg.PodRunning(rctx, uid)
		cancel()
		if err != nil {
			return nil
		}
		if !running {
			continue
		}
		pod := st.Pod.DeepCopy()
		pod.UID = uid
		if get, _, _ := ownprocess.ReadinessHTTPGet(pod); get != nil && c.cfg.ServesReadiness != nil {
			if pod.Spec.HostNetwork {
				pod.Status.PodIP = "127.0.0.1"
			}
			ok, why := c.cfg.ServesReadiness(ctx, pod)
			if !ok {
				klog.V(2).InfoS("Checkpointer: the runtime runs the self-hosted pod, but it does not answer its readiness endpoint", "component", key, "uid", uid, "why", why)
				continue
			}
		}
		out = true
		break
	}
	return &out
}

// loadStored decodes every stored checkpoint, by component key.
func (c *Checkpointer) loadStored() map[string]*Checkpoint {
	out := map[string]*Checkpoint{}
	for _, rec := range c.cfg.Store.List(checkpoint.KindPodCheckpoint) {
		ck := &Checkpoint{}
		if err := json.Unmarshal(rec.Data, ck); err != nil || ck.Pod == nil || ck.Name != rec.Name || ck.Namespace != rec.Namespace {
			reason := fmt.Sprintf("checkpointer record does not decode: %v", err)
			klog.ErrorS(err, "Quarantining a damaged pod checkpoint", "namespace", rec.Namespace, "name", rec.Name)
			_ = c.cfg.Store.Quarantine(checkpoint.KindPodCheckpoint, rec.Namespace, rec.Name, reason)
			continue
		}
		out[ck.Key()] = ck
	}
	return out
}

// activePods are the checkpoint pods in bootlet's registry, by component.
func (c *Checkpointer) activePods() map[string]*v1.Pod {
	pods, _ := c.cfg.Registry.ListPods("")
	out := map[string]*v1.Pod{}
	for i := range pods {
		p := &pods[i]
		if key := btypes.CheckpointOf(p); key != "" {
			out[key] = p
		}
	}
	return out
}

// activatedAt is when the checkpointer activated the pod: its annotation
// (the checkpointer's clock), else its creation time.
func activatedAt(p *v1.Pod) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, p.Annotations[btypes.AnnotationCheckpointActivated]); err == nil {
		return t
	}
	return p.CreationTimestamp.Time
}

func (c *Checkpointer) event(eventType, reason, msg string) {
	if c.cfg.Events != nil {
		c.cfg.Events.NodeEvent(c.cfg.NodeName, eventType, reason, msg)
	}
}

func (c *Checkpointer) store(ck *Checkpoint) bool {
	if ck == nil || c.rejected[ck.Key()] == ck.Hash {
		return false
	}
	// A checkpoint bootlet could not run is not worth storing: it would
	// replace one that runs. The registry's own validation decides, in a
	// dry run (AlreadyExists: the pod runs, the spec was accepted then).
	if _, err := c.cfg.Registry.CreatePod(CheckpointPod(ck), true); err != nil && !apierrors.IsAlreadyExists(err) {
		c.rejected[ck.Key()] = ck.Hash
		klog.ErrorS(err, "Not storing a pod checkpoint bootlet could not run", "component", ck.Key(), "source", ck.SourceName)
		c.event(v1.EventTypeWarning, "CheckpointRejected", fmt.Sprintf("pod %s cannot run without an apiserver, its checkpoint is not stored: %v", ck.SourceName, err))
		return false
	}
	delete(c.rejected, ck.Key())
	data, err := json.Marshal(ck)
	if err == nil {
		_, err = c.cfg.Store.Put(checkpoint.KindPodCheckpoint, ck.Namespace, ck.Name, data)
	}
	if err != nil {
		klog.ErrorS(err, "Storing a pod checkpoint failed", "component", ck.Key())
		c.event(v1.EventTypeWarning, "CheckpointWriteFailed", fmt.Sprintf("storing the checkpoint of %s failed: %v", ck.Key(), err))
		return false
	}
	klog.InfoS("Stored pod checkpoint", "component", ck.Key(), "source", ck.SourceName, "uid", ck.SourceUID, "hash", ck.Hash,
		"secrets", len(ck.Secrets), "configMaps", len(ck.ConfigMaps))
	c.event(v1.EventTypeNormal, "CheckpointStored", fmt.Sprintf("checkpoint of %s stored from pod %s (%s)", ck.Key(), ck.SourceName, ck.Hash))
	return true
}

// activate puts the checkpoint's objects into bootlet's registry, then the
// pod that uses them. An object or pod of the same name that the
// checkpointer did not make for this component and owner is never
// overwritten: the activation is refused with an event.
func (c *Checkpointer) activate(ck *Checkpoint) bool {
	if ck == nil {
		return false
	}
	secrets, cms := CheckpointObjects(ck)
	for _, s := range secrets {
		if old, err := c.cfg.Registry.GetSecret(s.Namespace, s.Name); err == nil && !madeFor(old.ObjectMeta, ck) {
			c.conflict(ck, "Secret", s.Namespace, s.Name, old.Annotations)
			return false
		}
		if _, err := c.cfg.Registry.PutSecret(s, true, false); apierrors.IsAlreadyExists(err) {
			_, err = c.cfg.Registry.PutSecret(s, false, false)
			if err != nil {
				klog.ErrorS(err, "Checkpointer: updating a Secret failed", "secret", klog.KObj(s))
				return false
			}
		} else if err != nil {
			klog.ErrorS(err, "Checkpointer: creating a Secret failed", "secret", klog.KObj(s))
			return false
		}
	}
	for _, m := range cms {
		if old, err := c.cfg.Registry.GetConfigMap(m.Namespace, m.Name); err == nil && !madeFor(old.ObjectMeta, ck) {
			c.conflict(ck, "ConfigMap", m.Namespace, m.Name, old.Annotations)
			return false
		}
		if _, err := c.cfg.Registry.PutConfigMap(m, true, false); apierrors.IsAlreadyExists(err) {
			_, err = c.cfg.Registry.PutConfigMap(m, false, false)
			if err != nil {
				klog.ErrorS(err, "Checkpointer: updating a ConfigMap failed", "configMap", klog.KObj(m))
				return false
			}
		} else if err != nil {
			klog.ErrorS(err, "Checkpointer: creating a ConfigMap failed", "configMap", klog.KObj(m))
			return false
		}
	}
	pod := CheckpointPod(ck)
	pod.Annotations[btypes.AnnotationCheckpointActivated] = c.cfg.Now().UTC().Format(time.RFC3339Nano)
	created, err := c.cfg.Registry.CreatePod(pod, false)
	if apierrors.IsAlreadyExists(err) {
		pods, _ := c.cfg.Registry.ListPods(pod.Namespace)
		for i := range pods {
			if pods[i].Name == pod.Name && !madeFor(pods[i].ObjectMeta, ck) {
				c.conflict(ck, "Pod", pod.Namespace, pod.Name, pods[i].Annotations)
				return false
			}
		}
		return true
	}
	if err != nil {
		klog.ErrorS(err, "Checkpointer: running a checkpoint failed", "component", ck.Key())
		c.event(v1.EventTypeWarning, "CheckpointActivationFailed", fmt.Sprintf("running the checkpoint of %s failed: %v", ck.Key(), err))
		return false
	}
	klog.InfoS("Activated pod checkpoint", "component", ck.Key(), "pod", klog.KObj(created), "uid", created.UID, "hash", ck.Hash)
	c.event(v1.EventTypeNormal, "CheckpointActivated", fmt.Sprintf("apiserver unreachable: running the checkpoint of %s as pod %s", ck.Key(), created.Name))
	return true
}

// conflict reports, once per object and claimant, an object in bootlet's
// registry that another component (or a user) holds under the name a
// checkpoint needs.
func (c *Checkpointer) conflict(ck *Checkpoint, kind, ns, name string, annotations map[string]string) {
	holder := annotations[btypes.AnnotationCheckpointOwner]
	if holder == "" {
		holder = annotations[btypes.AnnotationCheckpointOf]
	}
	if holder == "" {
		holder = "not the checkpointer"
	}
	c.reportOnce("object\x00"+ck.Key(), kind+"/"+ns+"/"+name+" "+holder, v1.EventTypeWarning, "CheckpointConflict",
		fmt.Sprintf("the checkpoint of %s (%s) is not run: %s %s/%s exists and belongs to %s; it is not overwritten", ck.Key(), ck.Owner(), kind, ns, name, holder))
}

func (c *Checkpointer) withdraw(p *v1.Pod) {
	if p == nil {
		return
	}
	if _, err := c.cfg.Registry.DeletePod(p.Namespace, p.Name, nil); err != nil && !apierrors.IsNotFound(err) {
		klog.ErrorS(err, "Checkpointer: withdrawing a checkpoint pod failed", "pod", klog.KObj(p))
		return
	}
	klog.InfoS("Withdrew pod checkpoint", "pod", klog.KObj(p), "component", p.Annotations[btypes.AnnotationCheckpointOf])
	c.event(v1.EventTypeNormal, "CheckpointWithdrawn", fmt.Sprintf("self-hosted %s is Ready: checkpoint pod %s withdrawn", p.Annotations[btypes.AnnotationCheckpointOf], p.Name))
}

func (c *Checkpointer) remove(ck *Checkpoint) {
	if ck == nil {
		return
	}
	if err := c.cfg.Store.Delete(checkpoint.KindPodCheckpoint, ck.Namespace, ck.Name); err != nil {
		klog.ErrorS(err, "Removing a pod checkpoint failed", "component", ck.Key())
		return
	}
	klog.InfoS("Removed pod checkpoint: its owner is gone", "component", ck.Key(), "owner", ck.OwnerKind+"/"+ck.OwnerName)
	c.event(v1.EventTypeNormal, "CheckpointRemoved", fmt.Sprintf("checkpoint of %s removed: %s/%s is gone or no longer annotated", ck.Key(), ck.OwnerKind, ck.OwnerName))
}

// cleanupObjects deletes the checkpoint's Secrets and ConfigMaps from
// bootlet's registry once no checkpoint pod uses them; only those the
// checkpointer made for this component and owner.
func (c *Checkpointer) cleanupObjects(key string, ck *Checkpoint) {
	if ck == nil {
		return
	}
	secrets, cms := CheckpointObjects(ck)
	for _, s := range secrets {
		if old, err := c.cfg.Registry.GetSecret(s.Namespace, s.Name); err == nil && madeFor(old.ObjectMeta, ck) {
			if err := c.cfg.Registry.DeleteSecret(s.Namespace, s.Name); err != nil && !apierrors.IsNotFound(err) {
				klog.ErrorS(err, "Checkpointer: deleting a Secret failed", "component", key, "secret", klog.KObj(s))
			}
		}
	}
	for _, m := range cms {
		if old, err := c.cfg.Registry.GetConfigMap(m.Namespace, m.Name); err == nil && madeFor(old.ObjectMeta, ck) {
			if err := c.cfg.Registry.DeleteConfigMap(m.Namespace, m.Name); err != nil && !apierrors.IsNotFound(err) {
				klog.ErrorS(err, "Checkpointer: deleting a ConfigMap failed", "component", key, "configMap", klog.KObj(m))
			}
		}
	}
}
