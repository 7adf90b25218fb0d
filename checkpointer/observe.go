package checkpointer

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/ownprocess"
	btypes "github.com/bootlet/bootlet/types"
)

// Observation: everything a tick looks at, gathered before Decide.

// observation is what one tick saw: the facts Decide looks at, and what
// carrying out its decisions needs.
type observation struct {
	world     World
	reachable bool
	// keys are the components known from the store, the apiserver or the
	// registry, sorted.
	keys       []string
	components map[string]*componentView
}

// componentView is one component's part of an observation.
type componentView struct {
	facts     Facts
	stored    *Checkpoint
	candidate *Checkpoint
	active    *v1.Pod
	// incoming is the Ready self-hosted pod of this node that takes over
	// from the checkpoint, if any.
	incoming *v1.Pod
	// reports are the events the observation found worth reporting (once).
	reports []report
}

type report struct{ key, value, eventType, reason, msg string }

// observe gathers the facts of every component: the apiserver's view, the
// store, the registry, and the probes the rules need (the runtime, the
// self-hosted pod's own readiness answer).
func (c *Checkpointer) observe(ctx context.Context) observation {
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
	obs := observation{
		world:      World{Now: now, Reachable: view.reachable, Fresh: view.fresh, UnreachableSince: c.unreachableSince, NeverReachable: !c.everReachable},
		reachable:  view.reachable,
		components: map[string]*componentView{},
	}

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
	for k := range keys {
		obs.keys = append(obs.keys, k)
	}
	sort.Strings(obs.keys)

	var upgrades ungatedSteps // read once a tick, and only when a checkpoint would move
	for _, key := range obs.keys {
		cv := &componentView{stored: stored[key], active: active[key]}
		obs.components[key] = cv
		comp := &cv.facts
		st := cv.stored
		if st != nil {
			comp.Stored = st.Hash
			if _, v, why := storedOwnerVerdict(st, c.cfg.Namespaces, nil); v == ownerRefused {
				comp.Disallowed = true
				cv.reports = append(cv.reports, report{"disallowed\x00" + key, why, v1.EventTypeWarning, "CheckpointNotAllowed",
					fmt.Sprintf("checkpoint of %s is not allowed by the ownership rules and is dropped: %s", key, why)})
			}
		}
		mine, others := splitByOwner(st, comp.Disallowed, view.byComponent[key])
		if view.fresh {
			uids := make([]types.UID, 0, len(mine))
			for _, op := range mine {
				uids = append(uids, op.pod.UID)
			}
			c.known[key] = uids
			comp.SelfHosted = len(mine) > 0
			if p := latestReady(podsOf(mine)); p != nil {
				cv.incoming = p
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
				cv.candidate = c.candidate(ctx, cs, p, ownerOf(mine, p), now)
			} else if p := latestReady(podsOf(others)); p != nil {
				// Another controller of the same name: a candidate only
				// once the stored checkpoint's owner is gone.
				owner := ownerOf(others, p)
				comp.CandidateConflicts = st != nil && !comp.Disallowed
				if comp.CandidateConflicts {
					cv.reports = append(cv.reports, report{"conflict\x00" + key, string(owner.UID), v1.EventTypeWarning, "CheckpointConflict",
						fmt.Sprintf("pod %s/%s of %s asks for the checkpoint of %s, which belongs to %s: refused while that owner stands", p.Namespace, p.Name, owner, key, st.Owner())})
				}
				cv.candidate = c.candidate(ctx, cs, p, owner, now)
			}
			if cv.candidate != nil {
				comp.Candidate = cv.candidate.Hash
				if st != nil && cv.candidate.Hash != st.Hash {
					comp.CandidateUngated = c.ungated(ctx, cs, &upgrades, key, cv.candidate.Pod)
				}
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
			comp.ActiveCause = CauseOf(p.Annotations[btypes.AnnotationCheckpointActivatedBy])
			comp.ActiveTerminating = p.DeletionTimestamp != nil
		}
	}
	return obs
}

// ungatedSteps are the upgrade steps of one tick, once read.
type ungatedSteps struct {
	read  bool
	steps []UngatedStep
	err   error
}

// ungated is CandidateUngated for the component key's candidate pod:
// the upgrade step whose version it runs before that step passed its gate.
// The steps are read at most once a tick. A checkpointer whose identity
// may not read the ClusterVersion (a cluster rendered before the rule)
// moves its checkpoints as before, saying so once; any other error holds
// the checkpoint for this tick.
func (c *Checkpointer) ungated(ctx context.Context, cs kubernetes.Interface, u *ungatedSteps, key string, pod *v1.Pod) string {
	if !u.read {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		u.steps, u.err = c.cfg.UngatedSteps(rctx, cs)
		cancel()
		u.read = true
		if apierrors.IsForbidden(u.err) {
			if !c.saidNoUpgrades {
				klog.InfoS("Checkpointer: its identity may not read the ClusterVersion; checkpoints move with the newest Ready pod, not with the upgrade's gates", "err", u.err)
				c.saidNoUpgrades = true
			}
			u.steps, u.err = nil, nil
		}
	}
	if u.err != nil {
		return fmt.Sprintf("an upgrade step that could not be read (%v)", u.err)
	}
	_, name, _ := strings.Cut(key, "/")
	return ungatedBy(u.steps, name, c.cfg.NodeName, pod)
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
	v.owners = &apiOwners{ctx: ctx, cs: cs, node: c.cfg.NodeName, seen: map[string]ownerRead{}}
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

// apiOwners reads controllers and this node's Node from the apiserver,
// each at most once a tick.
type apiOwners struct {
	ctx  context.Context
	cs   kubernetes.Interface
	node string
	seen map[string]ownerRead
}

func (a *apiOwners) ThisNode() (*v1.Node, error) {
	o, err := a.get("Node", "", a.node, func(ctx context.Context) (any, error) {
		return a.cs.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return o.(*v1.Node), nil
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
// template no longer annotated, a DaemonSet that no longer selects this
// node). A failed read keeps the checkpoint.
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
