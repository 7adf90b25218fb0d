package servinggate

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/internal/kubeclient"
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

	client     kubernetes.Interface
	kubeconfig *kubeclient.Reloading // nil until the first connect
	serves     func(ctx context.Context, pod *v1.Pod) (bool, string)

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

// userAgent and requestTimeout are the apiserver client's.
const (
	userAgent      = "bootlet-serving-gate"
	requestTimeout = 2 * time.Second
)

// connect builds the client from the kubeconfig once it loads, and again
// when the file changed (kubeclient.Reloading, compared every
// kubeconfigRecheck): a renewed client certificate is used from then on.
func (g *Gate) connect() kubernetes.Interface {
	if g.cfg.Client != nil {
		return g.cfg.Client
	}
	if g.cfg.Kubeconfig == "" {
		if g.client == nil && g.cfg.REST != nil {
			cfg := rest.CopyConfig(g.cfg.REST)
			cfg.Timeout, cfg.UserAgent = requestTimeout, userAgent
			if err := g.use(cfg); err != nil {
				klog.ErrorS(err, "Serving gate: cannot build an apiserver client")
			}
		}
		return g.client
	}
	if g.kubeconfig == nil {
		g.kubeconfig = &kubeclient.Reloading{Path: g.cfg.Kubeconfig, UserAgent: userAgent, Timeout: requestTimeout, Recheck: kubeconfigRecheck}
	}
	_, err := g.kubeconfig.LoadWith(func(cfg *rest.Config) error {
		if err := g.use(cfg); err != nil {
			klog.ErrorS(err, "Serving gate: cannot build an apiserver client")
			return err
		}
		return nil
	})
	if err != nil && g.client == nil {
		klog.V(4).InfoS("Serving gate: kubeconfig not loadable yet", "path", g.cfg.Kubeconfig, "err", err)
	}
	return g.client
}

// use makes a client of cfg the gate's, and cfg's TLS settings the default
// own-process check's.
func (g *Gate) use(cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if g.client != nil {
		klog.InfoS("Serving gate: kubeconfig changed; reconnecting with it", "path", g.cfg.Kubeconfig)
	}
	g.client = cs
	if g.cfg.Serves == nil {
		tls := rest.CopyConfig(cfg)
		g.serves = func(ctx context.Context, pod *v1.Pod) (bool, string) {
			return ownprocess.ServesReadinessVia(ctx, g.cfg.Verdicts, tls, pod)
		}
	}
	return nil
}
