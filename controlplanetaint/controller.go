package controlplanetaint

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/util/taints"

	"github.com/bootlet/bootlet/internal/kubeclient"
)

// Event reasons on the control-plane Nodes.
const (
	ReasonTainted     = "ControlPlaneTainted"
	ReasonSchedulable = "ControlPlaneSchedulable"
)

// Config configures the controller.
type Config struct {
	// Kubeconfig of an identity that may list, watch and update Nodes and
	// create events (render's checkpointer identity on a master).
	Kubeconfig string
	// Client replaces Kubeconfig (tests).
	Client kubernetes.Interface
	// Resync is the period of a full round besides the watch's events
	// (default 30 s).
	Resync time.Duration
}

// Controller keeps the masters' taint in line with Decide.
type Controller struct {
	cfg Config
	// said is the last Decision.Why told to each master, so an event is
	// recorded once per change, not every round.
	said map[string]string
}

// New is a controller of cfg.
func New(cfg Config) *Controller {
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	return &Controller{cfg: cfg, said: map[string]string{}}
}

// Run keeps the taints until ctx ends. Every master may run it: writes
// carry the Node's resourceVersion, so concurrent writers conflict and
// the loser sees the result next round.
func (c *Controller) Run(ctx context.Context) {
	klog.InfoS("Control-plane taint controller started")
	kubeclient.Run(ctx, c.cfg.Client, c.cfg.Kubeconfig, "bootlet-control-plane-taint", func(err error) {
		klog.V(4).InfoS("Control-plane taint: kubeconfig not loadable yet", "path", c.cfg.Kubeconfig, "err", err)
	}, c.run)
}

func (c *Controller) run(ctx context.Context, cs kubernetes.Interface) {
	factory := informers.NewSharedInformerFactory(cs, 0)
	nodes := factory.Core().V1().Nodes()
	poke := kubeclient.NewWake()
	wake := poke.Poke
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: wake, UpdateFunc: func(_, n any) { wake(n) }, DeleteFunc: wake}); err != nil {
		klog.ErrorS(err, "Control-plane taint: cannot watch nodes")
		return
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "bootlet-control-plane-taint"})

	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), nodes.Informer().HasSynced) {
		return
	}
	kubeclient.Rounds(ctx, poke, c.cfg.Resync, func() { c.round(ctx, cs, nodes.Lister(), recorder) })
}

func (c *Controller) round(ctx context.Context, cs kubernetes.Interface, lister corelisters.NodeLister, recorder record.EventRecorder) {
	all, err := lister.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "Control-plane taint: listing nodes")
		return
	}
	view := make([]Node, 0, len(all))
	byName := map[string]*v1.Node{}
	for _, n := range all {
		view = append(view, FromNode(n))
		byName[n.Name] = n
	}
	d := Decide(view)
	for _, a := range d.Actions {
		n, ok := byName[a.Node]
		if !ok {
			continue
		}
		if err := c.apply(ctx, cs, n, a.Op); err != nil {
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				klog.ErrorS(err, "Control-plane taint: updating node", "node", a.Node, "op", a.Op)
			}
			continue
		}
		klog.InfoS("Control-plane taint: updated node", "node", a.Node, "tainted", a.Op == AddTaint, "why", d.Why)
	}
	reason := ReasonTainted
	if d.Schedulable {
		reason = ReasonSchedulable
	}
	for _, n := range view {
		if !n.ControlPlane || c.said[n.Name] == d.Why {
			continue
		}
		c.said[n.Name] = d.Why
		if d.Schedulable {
			klog.InfoS("Control-plane nodes stay schedulable", "node", n.Name, "why", d.Why)
		}
		recorder.Event(&v1.ObjectReference{Kind: "Node", Name: n.Name, UID: types.UID(n.Name)}, v1.EventTypeNormal, reason, d.Why)
	}
}

// apply adds or removes the taint and the annotation that marks it
// bootlet's, in one update.
func (c *Controller) apply(ctx context.Context, cs kubernetes.Interface, n *v1.Node, op Op) error {
	var (
		updated *v1.Node
		changed bool
		err     error
	)
	switch op {
	case AddTaint:
		updated, changed, err = taints.AddOrUpdateTaint(n, &Taint)
	case RemoveTaint:
		updated, changed, err = taints.RemoveTaint(n, &Taint)
	}
	if err != nil || !changed {
		return err
	}
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	if op == AddTaint {
		updated.Annotations[AnnotationManaged] = "true"
	} else {
		delete(updated.Annotations, AnnotationManaged)
	}
	_, err = cs.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{})
	return err
}
