package checkpointer

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/ownprocess"
)

// The checkpointer's I/O (docs/checkpointer.md): each tick it
// asks the apiserver whether it is ready, lists this node's pods in the
// namespaces it serves, checks each annotated pod's controller against the
// ownership rule book (owner.go), reads the Secrets and
// ConfigMaps of the checkpointed ones, asks the container runtime for the
// local view while the apiserver is unreachable (never the kubelet's API),
// reads the stored checkpoints and the checkpoint pods in bootlet's
// registry, and runs Decide for each component. It
// keeps no cache of the apiserver: every decision uses what this tick read,
// because a cached view can still show a pod Ready, or a checkpoint
// unneeded, after the apiserver says otherwise. A checkpoint runs as a pod of bootlet's
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
	// UngatedSteps reads the upgrade steps not through their gate (default:
	// the ClusterVersion through Client; tests replace it).
	UngatedSteps func(ctx context.Context, cs kubernetes.Interface) ([]UngatedStep, error)
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
	// Verdicts is the apiserver port's router, which the default
	// ServesReadiness asks first (nil: no router on this node).
	Verdicts ownprocess.Verdicts
	// Handover, before a checkpoint pod (outgoing) is withdrawn, moves its
	// port's clients to the self-hosted pod that takes over (incoming),
	// bounded (package node's port hand-over, package reuseport). nil: none.
	Handover func(ctx context.Context, incoming, outgoing types.UID)
	Store    *checkpoint.Store
	Registry Registry
	Events   NodeEventSink
	Timing   Timing
	// Period between ticks (default 1 s); a watch event wakes it earlier.
	Period time.Duration
	// Resync bounds how long a settled checkpointer ticks on /readyz alone
	// (default DefaultResync; negative: every tick reads everything). See
	// quietTick.
	Resync time.Duration
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
	mem              map[string]Memory
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
	// kubeconfig is the file the clients are built from (nil until the
	// first connect), and stopWatches ends the watches of those clients.
	kubeconfig   *kubeclient.Reloading
	stopWatches  context.CancelFunc
	ownReadiness bool
	// saidNoUpgrades: the identity may not read the ClusterVersion, logged.
	saidNoUpgrades bool
	// settled: the last full read left nothing to do and nothing waiting
	// (settledComponent for every component), at lastFullRead.
	settled      bool
	lastFullRead time.Time
	// podsChanged: a watch event (or a watch's start or end, which may
	// have missed events) since the last full read began. The watch
	// goroutines set it; the loop clears it.
	podsChanged atomic.Bool

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
	if cfg.Resync == 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Readyz == nil {
		cfg.Readyz = apiserverReadyz
	}
	if cfg.UngatedSteps == nil {
		cfg.UngatedSteps = readUngatedSteps
	}
	if cfg.Timing == (Timing{}) {
		cfg.Timing = DefaultTiming
	}
	if len(cfg.Namespaces) == 0 {
		cfg.Namespaces = DefaultNamespaces
	}
	return &Checkpointer{cfg: cfg, client: cfg.Client, wake: make(chan struct{}, 1),
		unreachableSince: cfg.Now(), mem: map[string]Memory{}, why: map[string]string{}, rejected: map[string]string{},
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

// KubeconfigRecheck is how often the checkpointer compares its kubeconfig
// file with the one its clients were built from (connect).
const KubeconfigRecheck = 10 * time.Second

// connect builds the apiserver client from the kubeconfig (once it loads,
// kubeclient.Reloading) and starts the watch that wakes the loop on
// changes. The file is compared every KubeconfigRecheck and, when its
// bytes changed, the clients and their watches are built anew: a renewed
// client certificate is used from then on, rather than requests, /readyz
// included, being refused once the old one expired, which would look like
// an unreachable apiserver.
func (c *Checkpointer) connect(ctx context.Context) kubernetes.Interface {
	if c.cfg.Client == nil && c.cfg.Kubeconfig != "" {
		c.reload()
	}
	if c.client != nil && !c.watching {
		c.watching = true
		wcs := c.watchClient
		if wcs == nil {
			wcs = c.client
		}
		wctx, stop := context.WithCancel(ctx)
		c.stopWatches = stop
		for _, ns := range c.cfg.Namespaces {
			go c.watchLoop(wctx, wcs, ns)
		}
	}
	return c.client
}

// reload replaces the clients, their watches and the default readiness
// check when the kubeconfig loads for the first time or changed.
func (c *Checkpointer) reload() {
	if c.kubeconfig == nil {
		c.kubeconfig = &kubeclient.Reloading{Path: c.cfg.Kubeconfig, UserAgent: "bootlet-checkpointer",
			Timeout: 2 * time.Second, Recheck: KubeconfigRecheck, Now: c.cfg.Now}
	}
	_, err := c.kubeconfig.LoadWith(func(cfg *rest.Config) error {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			klog.ErrorS(err, "Checkpointer cannot build an apiserver client", "kubeconfig", c.cfg.Kubeconfig)
			return err
		}
		c.use(cfg, cs)
		return nil
	})
	if err != nil && c.client == nil {
		klog.V(4).InfoS("Checkpointer kubeconfig not loadable yet", "path", c.cfg.Kubeconfig, "err", err)
	}
}

// use makes cs, built from cfg, the checkpointer's client: the watches of
// the previous client end (connect starts new ones), and the default
// readiness check takes cfg's TLS settings.
func (c *Checkpointer) use(cfg *rest.Config, cs kubernetes.Interface) {
	if c.client != nil {
		klog.InfoS("Checkpointer kubeconfig changed; reconnecting with it", "path", c.cfg.Kubeconfig)
		if c.stopWatches != nil {
			c.stopWatches()
		}
		c.watchClient, c.watching, c.stopWatches = nil, false, nil
		if c.ownReadiness {
			c.cfg.ServesReadiness, c.ownReadiness = nil, false
		}
	}
	c.client = cs
	// The watch lasts minutes: its client has no request timeout.
	wcfg := rest.CopyConfig(cfg)
	wcfg.Timeout = 0
	if wcs, err := kubernetes.NewForConfig(wcfg); err == nil {
		c.watchClient = wcs
	}
	if c.cfg.ServesReadiness == nil {
		tlsCfg := rest.CopyConfig(cfg)
		c.cfg.ServesReadiness = func(ctx context.Context, pod *v1.Pod) (bool, string) {
			return ownprocess.ServesReadinessVia(ctx, c.cfg.Verdicts, tlsCfg, pod)
		}
		c.ownReadiness = true
	}
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
			// What changed between the last full read and this watch's
			// list is in no event of it.
			c.podsChanged.Store(true)
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					break
				}
				c.kick()
			}
			w.Stop()
		}
		// Events may have gone unseen between two watches.
		c.podsChanged.Store(true)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (c *Checkpointer) kick() {
	c.podsChanged.Store(true)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Tick is one pass: observe every component, decide each once (Decide,
// pure), then act. A second look waits for the next tick. Run calls it
// every Period (and on watch events); tests call it directly.
func (c *Checkpointer) Tick(ctx context.Context) {
	if c.quietTick(ctx) {
		return
	}
	c.podsChanged.Store(false)
	obs := c.observe(ctx)
	decisions := make(map[string]Decision, len(obs.keys))
	settled := obs.world.Reachable && obs.world.Fresh
	for _, key := range obs.keys {
		decisions[key] = Decide(obs.world, obs.components[key].facts, c.mem[key], c.cfg.Timing)
		settled = settled && settledComponent(obs.components[key].facts, decisions[key])
	}
	c.settled, c.lastFullRead = settled, obs.world.Now
	c.act(ctx, obs, decisions)
}

// DefaultResync is Config.Resync's default.
const DefaultResync = 10 * time.Second

// quietTick is a tick that reads /readyz alone, and true when that is
// all this tick needs: the last full read settled every component, no
// watch event came since, it is younger than Resync, and the apiserver
// still answers /readyz. A full read costs each master's apiserver a pod
// list and a read of every owner, Secret and ConfigMap of its
// control-plane pods, every second, and the three apiservers of a
// cluster serve them on the same CPUs as everything else. While
// reachable and with nothing active, Decide depends on the facts alone,
// not on the clock, so a read that would find the same facts decides
// nothing new. The pods change through the watch; what changes without a
// pod event (an owner's annotation, a Secret's renewed certificate, a
// Node's labels while no pod of it runs here) waits at most Resync.
func (c *Checkpointer) quietTick(ctx context.Context) bool {
	if !c.settled || c.cfg.Resync < 0 || c.podsChanged.Load() || c.cfg.Now().Sub(c.lastFullRead) >= c.cfg.Resync {
		return false
	}
	cs := c.connect(ctx)
	if cs == nil || !c.watching {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return c.cfg.Readyz(rctx, cs) == nil
}

// settledComponent: the decision does nothing, and the same facts would
// decide the same at any later time. Reachable with nothing active, only
// rule 0 and rule 1 apply, and they read no clock; a candidate not
// stored (its version not through its gate, another controller's, or
// one the registry refused) may be waiting for what no pod event shows,
// so it keeps the full reads.
func settledComponent(f Facts, d Decision) bool {
	return len(d.Actions) == 0 && !f.Active && !f.Disallowed && !f.OwnerGone &&
		(f.Candidate == "" || f.Candidate == f.Stored) && f.CandidateUngated == "" && !f.CandidateConflicts
}
