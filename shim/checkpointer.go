package shim

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/cri"
)

// The checkpointer's I/O (docs/handoff.md, "Checkpointer"): each tick it
// asks the apiserver whether it is ready, lists this node's pods, reads the
// Secrets and ConfigMaps of the checkpointed ones, asks the kubelet's /pods
// (the fallback view), reads the stored checkpoints and the checkpoint pods
// in bootlet's registry, and runs decideCheckpoint for each component. It
// keeps no cache of the apiserver: every decision uses what this tick read
// (bootkube#262 was a stale cache). A checkpoint runs as a pod of bootlet's
// registry: bootlet's worker runs it through CRI, or the handoff presents it
// to a running kubelet as a static pod; deleting it withdraws it.

// CheckpointRegistry is what the checkpointer needs of bootlet's registry
// (podapi.Registry).
type CheckpointRegistry interface {
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

// CheckpointerConfig configures the checkpointer.
type CheckpointerConfig struct {
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
	// KubeletPodsURL is the kubelet's /pods ("" none): the read-only port
	// (http://127.0.0.1:10255/pods) or the authenticated one
	// (https://127.0.0.1:10250/pods, with the kubeconfig's client
	// certificate; the kubelet's self-signed serving certificate is not
	// verified).
	KubeletPodsURL string
	// KubeletClient is used for KubeletPodsURL when set (tests).
	KubeletClient *http.Client
	// PodRunning asks the container runtime whether it runs a pod (a READY
	// sandbox and a running container with that UID): local evidence that
	// a self-hosted pod reported Ready really runs (Manager.PodRunning;
	// nil: not asked).
	PodRunning func(ctx context.Context, uid types.UID) (bool, error)
	// ServesReadiness asks whether a pod's own process answers its
	// readiness endpoint (default: servesReadiness with the kubeconfig's
	// TLS settings, once it loads; nil with Client set: not asked).
	ServesReadiness func(ctx context.Context, pod *v1.Pod) (bool, string)
	Store           *checkpoint.Store
	Registry        CheckpointRegistry
	Events          NodeEventSink
	Timing          CheckpointerTiming
	// Period between ticks (default 1 s); a watch event wakes it earlier.
	Period time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Checkpointer is the checkpoint controller. Run drives it; one goroutine
// does all its I/O, and mu guards only the status it publishes.
type Checkpointer struct {
	cfg     CheckpointerConfig
	client  kubernetes.Interface
	kubelet *http.Client
	wake    chan struct{}

	// Loop state, touched only by the loop goroutine.
	reachable        bool
	everReachable    bool
	unreachableSince time.Time
	mem              map[string]ckptMemory
	why              map[string]string
	// rejected: per component, the hash of a checkpoint bootlet's registry
	// would not accept as a pod, so it is not stored (and not re-reported).
	rejected    map[string]string
	watching    bool
	watchClient kubernetes.Interface

	mu     sync.Mutex
	status CheckpointerStatus
}

// CheckpointerStatus is what the checkpointer last saw and decided.
type CheckpointerStatus struct {
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

// NewCheckpointer builds the controller.
func NewCheckpointer(cfg CheckpointerConfig) *Checkpointer {
	if cfg.Period <= 0 {
		cfg.Period = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Readyz == nil {
		cfg.Readyz = apiserverReadyz
	}
	if cfg.Timing == (CheckpointerTiming{}) {
		cfg.Timing = DefaultCheckpointerTiming
	}
	return &Checkpointer{cfg: cfg, client: cfg.Client, kubelet: cfg.KubeletClient, wake: make(chan struct{}, 1),
		unreachableSince: cfg.Now(), mem: map[string]ckptMemory{}, why: map[string]string{}, rejected: map[string]string{}}
}

// Status returns a copy of the last published status.
func (c *Checkpointer) Status() CheckpointerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := CheckpointerStatus{Reachable: c.status.Reachable, Components: map[string]ComponentStatus{}}
	for k, v := range c.status.Components {
		out.Components[k] = v
	}
	return out
}

// Run ticks until ctx ends.
func (c *Checkpointer) Run(ctx context.Context) {
	klog.InfoS("Checkpointer started", "node", c.cfg.NodeName, "kubeconfig", c.cfg.Kubeconfig, "kubeletPods", c.cfg.KubeletPodsURL,
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
				return servesReadiness(ctx, tlsCfg, pod)
			}
		}
		if c.kubelet == nil && c.cfg.KubeletPodsURL != "" {
			c.kubelet = kubeletClient(cfg)
		}
	}
	if c.kubelet == nil && c.cfg.KubeletPodsURL != "" {
		c.kubelet = &http.Client{Timeout: 2 * time.Second}
	}
	if c.client != nil && !c.watching {
		c.watching = true
		wcs := c.watchClient
		if wcs == nil {
			wcs = c.client
		}
		go c.watchLoop(ctx, wcs)
	}
	return c.client
}

// kubeletClient talks to the kubelet's port with the kubeconfig's client
// certificate. The kubelet serves a self-signed certificate by default
// (no serverTLSBootstrap), which no CA verifies: the URL is loopback.
func kubeletClient(cfg *rest.Config) *http.Client {
	kc := rest.CopyConfig(cfg)
	kc.TLSClientConfig.Insecure = true
	kc.TLSClientConfig.CAFile, kc.TLSClientConfig.CAData = "", nil
	kc.Timeout = 2 * time.Second
	hc, err := rest.HTTPClientFor(kc)
	if err != nil {
		klog.ErrorS(err, "Checkpointer cannot build the kubelet client; using no client certificate")
		return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback kubelet, see above
	}
	hc.Timeout = 2 * time.Second
	return hc
}

// watchLoop watches this node's pods and wakes the loop on every event, so
// a pod turning Ready is acted on at once. The watch only wakes: the tick
// lists again and decides from that list.
func (c *Checkpointer) watchLoop(ctx context.Context, cs kubernetes.Interface) {
	sel := fields.OneTermEqualSelector("spec.nodeName", c.cfg.NodeName).String()
	for ctx.Err() == nil {
		// From the version of a list, so a new watch does not replay every
		// pod as ADDED; bounded, so a silently dead connection is renewed.
		var w watch.Interface
		l, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: sel, Limit: 1})
		if err == nil {
			w, err = cs.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: l.ResourceVersion, TimeoutSeconds: ptr.To[int64](300)})
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

// PodRunning reports whether the runtime has a READY sandbox and a running
// container with the pod UID uid, whoever made them (bootlet or the
// kubelet: they share the runtime). For CheckpointerConfig.PodRunning.
func (m *Manager) PodRunning(ctx context.Context, uid types.UID) (bool, error) {
	sel := map[string]string{cri.LabelPodUID: string(uid)}
	sbs, err := m.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel,
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}})
	if err != nil || len(sbs) == 0 {
		return false, err
	}
	ctrs, err := m.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel,
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
	return err == nil && len(ctrs) > 0, err
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
	byComponent      map[string][]*v1.Pod
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
	kubeletReady := c.observeKubelet(ctx)

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
		}
		var candidate *Checkpoint
		pods := view.byComponent[key]
		if view.fresh {
			comp.SelfHosted = len(pods) > 0
			if p := latestReady(pods); p != nil {
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
				candidate = c.candidate(ctx, cs, p, now)
				if candidate != nil {
					comp.Candidate = candidate.Hash
				}
			}
			if st != nil && !comp.SelfHosted {
				comp.OwnerGone = c.ownerGone(ctx, cs, st)
			}
		}
		if r, ok := kubeletReady[key]; ok {
			comp.KubeletReady = &r
		} else if kubeletReady != nil {
			f := false
			comp.KubeletReady = &f
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
		}
	}
	c.mu.Lock()
	c.status = CheckpointerStatus{Reachable: view.reachable, Components: statuses}
	c.mu.Unlock()
}

// observeAPI asks /readyz and lists this node's pods.
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
	list, err := cs.CoreV1().Pods("").List(rctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", c.cfg.NodeName).String()})
	if err != nil {
		klog.V(2).InfoS("Checkpointer: listing this node's pods failed", "err", err)
		return v
	}
	v.fresh = true
	v.byComponent = map[string][]*v1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NodeName != c.cfg.NodeName || !wantsCheckpoint(p) {
			continue
		}
		ns, name, _, _ := componentOf(p)
		v.byComponent[ns+"/"+name] = append(v.byComponent[ns+"/"+name], p)
	}
	return v
}

// candidate reads the objects a Ready pod uses and builds its checkpoint;
// nil when one could not be read (a missing optional one is left out).
func (c *Checkpointer) candidate(ctx context.Context, cs kubernetes.Interface, pod *v1.Pod, now time.Time) *Checkpoint {
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
	return NewCheckpoint(pod, secrets, cms, now)
}

// ownerGone reads the stored component's owner: gone (NotFound), or no
// longer asking for a checkpoint. Any other answer keeps the checkpoint.
func (c *Checkpointer) ownerGone(ctx context.Context, cs kubernetes.Interface, st *Checkpoint) bool {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var tmpl *v1.PodTemplateSpec
	var err error
	switch st.OwnerKind {
	case "":
		var p *v1.Pod
		p, err = cs.CoreV1().Pods(st.Namespace).Get(rctx, st.Name, metav1.GetOptions{})
		if err == nil {
			return p.Spec.NodeName != c.cfg.NodeName || !wantsCheckpoint(p)
		}
	case "DaemonSet":
		ds, e := cs.AppsV1().DaemonSets(st.Namespace).Get(rctx, st.OwnerName, metav1.GetOptions{})
		err = e
		if err == nil {
			tmpl = &ds.Spec.Template
		}
	case "Deployment":
		d, e := cs.AppsV1().Deployments(st.Namespace).Get(rctx, st.OwnerName, metav1.GetOptions{})
		err = e
		if err == nil {
			tmpl = &d.Spec.Template
		}
	case "ReplicaSet":
		r, e := cs.AppsV1().ReplicaSets(st.Namespace).Get(rctx, st.OwnerName, metav1.GetOptions{})
		err = e
		if err == nil {
			tmpl = &r.Spec.Template
		}
	case "StatefulSet":
		s, e := cs.AppsV1().StatefulSets(st.Namespace).Get(rctx, st.OwnerName, metav1.GetOptions{})
		err = e
		if err == nil {
			tmpl = &s.Spec.Template
		}
	default:
		return false // an owner kind bootlet cannot read: keep
	}
	if apierrors.IsNotFound(err) {
		return true
	}
	if err != nil || tmpl == nil {
		return false
	}
	return tmpl.Annotations[AnnotationCheckpoint] != "true"
}

// observeKubelet asks the kubelet's /pods which checkpointed components
// have a Running and Ready pod on this node; nil when it was not asked or
// did not answer.
func (c *Checkpointer) observeKubelet(ctx context.Context) map[string]bool {
	if c.cfg.KubeletPodsURL == "" || c.kubelet == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, c.cfg.KubeletPodsURL, nil)
	if err != nil {
		return nil
	}
	resp, err := c.kubelet.Do(req)
	if err != nil {
		klog.V(4).InfoS("Checkpointer: kubelet /pods not answering", "err", err)
		return nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		klog.V(4).InfoS("Checkpointer: kubelet /pods failed", "status", resp.StatusCode, "err", err)
		return nil
	}
	var list v1.PodList
	if err := json.Unmarshal(data, &list); err != nil {
		klog.V(2).InfoS("Checkpointer: kubelet /pods is not a pod list", "err", err)
		return nil
	}
	out := map[string]bool{}
	for i := range list.Items {
		p := &list.Items[i]
		// Another node's kubelet on this port (a test's, a second
		// cluster's) says nothing about this node.
		if p.Spec.NodeName != c.cfg.NodeName || !wantsCheckpoint(p) {
			continue
		}
		ns, name, _, _ := componentOf(p)
		out[ns+"/"+name] = out[ns+"/"+name] || podRunningReady(p)
	}
	return out
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
		if key := checkpointOf(p); key != "" {
			out[key] = p
		}
	}
	return out
}

// activatedAt is when the checkpointer activated the pod: its annotation
// (the checkpointer's clock), else its creation time.
func activatedAt(p *v1.Pod) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, p.Annotations[AnnotationCheckpointActivated]); err == nil {
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
// pod that uses them.
func (c *Checkpointer) activate(ck *Checkpoint) bool {
	if ck == nil {
		return false
	}
	secrets, cms := CheckpointObjects(ck)
	for _, s := range secrets {
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
	pod.Annotations[AnnotationCheckpointActivated] = c.cfg.Now().UTC().Format(time.RFC3339Nano)
	created, err := c.cfg.Registry.CreatePod(pod, false)
	if apierrors.IsAlreadyExists(err) {
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

func (c *Checkpointer) withdraw(p *v1.Pod) {
	if p == nil {
		return
	}
	if _, err := c.cfg.Registry.DeletePod(p.Namespace, p.Name, nil); err != nil && !apierrors.IsNotFound(err) {
		klog.ErrorS(err, "Checkpointer: withdrawing a checkpoint pod failed", "pod", klog.KObj(p))
		return
	}
	klog.InfoS("Withdrew pod checkpoint", "pod", klog.KObj(p), "component", p.Annotations[AnnotationCheckpointOf])
	c.event(v1.EventTypeNormal, "CheckpointWithdrawn", fmt.Sprintf("self-hosted %s is Ready: checkpoint pod %s withdrawn", p.Annotations[AnnotationCheckpointOf], p.Name))
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
// bootlet's registry once no checkpoint pod uses them.
func (c *Checkpointer) cleanupObjects(key string, ck *Checkpoint) {
	if ck == nil {
		return
	}
	secrets, cms := CheckpointObjects(ck)
	for _, s := range secrets {
		if _, err := c.cfg.Registry.GetSecret(s.Namespace, s.Name); err == nil {
			if err := c.cfg.Registry.DeleteSecret(s.Namespace, s.Name); err != nil && !apierrors.IsNotFound(err) {
				klog.ErrorS(err, "Checkpointer: deleting a Secret failed", "component", key, "secret", klog.KObj(s))
			}
		}
	}
	for _, m := range cms {
		if _, err := c.cfg.Registry.GetConfigMap(m.Namespace, m.Name); err == nil {
			if err := c.cfg.Registry.DeleteConfigMap(m.Namespace, m.Name); err != nil && !apierrors.IsNotFound(err) {
				klog.ErrorS(err, "Checkpointer: deleting a ConfigMap failed", "component", key, "configMap", klog.KObj(m))
			}
		}
	}
}
