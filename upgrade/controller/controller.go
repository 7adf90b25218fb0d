package controller

import (
	"context"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/upgrade/cvclient"
)

// LeaseName is the Lease in kube-system that elects the one controller.
const LeaseName = "bootlet-upgrade"

// Config configures the controller.
type Config struct {
	// Identity names this daemon in the Lease (its node's name).
	Identity string
	// Kubeconfig of an identity that may read the cluster, write the
	// ClusterVersion's status, the Lease, and the control plane's
	// workloads (the pivot's, render's admin.conf, on a master).
	Kubeconfig string
	// Client and Dynamic replace Kubeconfig (tests).
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Interval between rounds while leading (default 3 s).
	Interval time.Duration
	// GateTimeout is how long a step's gate may fail before the step is
	// put back (default upgrade.GateTimeout).
	GateTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// AlsoLeading are other controllers that run while this one leads,
	// on the same Lease: the masters' controller, which must begin no
	// operation during an upgrade's step, and reads that from the status
	// this leader writes. Each returns when its ctx ends.
	AlsoLeading []func(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface)
}

// Controller runs the upgrade rounds while it leads.
type Controller struct {
	cfg Config
}

// New is a controller of cfg.
func New(cfg Config) *Controller {
	if cfg.Interval <= 0 {
		cfg.Interval = 3 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Identity == "" {
		cfg.Identity, _ = os.Hostname()
	}
	return &Controller{cfg: cfg}
}

// Run campaigns for the Lease until ctx ends, and runs rounds while it
// leads. A leader that loses the Lease stops acting at once and campaigns
// again: the status it wrote tells the next leader where it was.
func (c *Controller) Run(ctx context.Context) {
	klog.InfoS("Upgrade controller started", "identity", c.cfg.Identity)
	if c.cfg.Client != nil {
		c.campaign(ctx, c.cfg.Client, c.cfg.Dynamic)
		return
	}
	cvclient.Run(ctx, c.cfg.Kubeconfig, "bootlet-upgrade", c.campaign)
}

func (c *Controller) campaign(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: LeaseName, Namespace: metav1.NamespaceSystem},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.cfg.Identity},
	}
	for ctx.Err() == nil {
		// The kube-controller-manager's timings: a dead leader's steps
		// wait at most 15 s for the next one, far inside a gate's 5 min.
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   15 * time.Second,
			RenewDeadline:   10 * time.Second,
			RetryPeriod:     2 * time.Second,
			ReleaseOnCancel: true,
			Name:            LeaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					klog.InfoS("Upgrade controller: leading", "identity", c.cfg.Identity)
					var wg sync.WaitGroup
					for _, also := range c.cfg.AlsoLeading {
						wg.Go(func() { also(ctx, cs, dyn) })
					}
					c.lead(ctx, cs, dyn)
					wg.Wait()
				},
				OnStoppedLeading: func() {
					klog.InfoS("Upgrade controller: not leading", "identity", c.cfg.Identity)
				},
			},
		})
	}
}

// lead runs a round every Interval until ctx ends (the Lease lost).
func (c *Controller) lead(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) {
	r := rounds{cs: cs, dyn: dyn, now: c.cfg.Now, gateTimeout: c.cfg.GateTimeout}
	kubeclient.Rounds(ctx, kubeclient.NewWake(), c.cfg.Interval, func() { r.round(ctx) })
}
