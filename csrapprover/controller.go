package csrapprover

import (
	"context"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/internal/kubeclient"
)

// Config configures the controller.
type Config struct {
	// Kubeconfig of an identity that may approve kubelet client requests
	// and list Nodes (render's checkpointer identity on a master).
	Kubeconfig string
	// BootstrapGroup is the token group whose requests it decides.
	BootstrapGroup string
	// Client replaces Kubeconfig (tests).
	Client kubernetes.Interface
	// Resync is the period of a full round besides the watch's events
	// (default 30 s).
	Resync time.Duration
}

// Controller approves or denies bootstrap node client requests.
type Controller struct{ cfg Config }

// New is a controller of cfg.
func New(cfg Config) *Controller {
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	return &Controller{cfg: cfg}
}

// Run decides every pending request until ctx ends. Several masters may
// run it at once: a verdict is written with the request's resourceVersion,
// so the second writer gets a conflict and sees the verdict next round.
func (c *Controller) Run(ctx context.Context) {
	klog.InfoS("CSR approver started", "group", c.cfg.BootstrapGroup)
	kubeclient.Run(ctx, c.cfg.Client, c.cfg.Kubeconfig, "bootlet-csr-approver", func(err error) {
		klog.V(4).InfoS("CSR approver: kubeconfig not loadable yet", "path", c.cfg.Kubeconfig, "err", err)
	}, c.run)
}

func (c *Controller) run(ctx context.Context, cs kubernetes.Interface) {
	factory := informers.NewSharedInformerFactory(cs, 0)
	csrs := factory.Certificates().V1().CertificateSigningRequests()
	nodes := factory.Core().V1().Nodes()
	poke := kubeclient.NewWake()
	wake := poke.Poke
	handler := cache.ResourceEventHandlerFuncs{AddFunc: wake, UpdateFunc: func(_, n any) { wake(n) }, DeleteFunc: wake}
	if _, err := csrs.Informer().AddEventHandler(handler); err != nil {
		klog.ErrorS(err, "CSR approver: cannot watch requests")
		return
	}
	if _, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: wake}); err != nil {
		klog.ErrorS(err, "CSR approver: cannot watch nodes")
		return
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), csrs.Informer().HasSynced, nodes.Informer().HasSynced) {
		return
	}
	kubeclient.Rounds(ctx, poke, c.cfg.Resync, func() { c.round(ctx, cs, csrs.Lister(), nodes.Lister()) })
}

// round decides every undecided request the informer holds.
func (c *Controller) round(ctx context.Context, cs kubernetes.Interface, csrs certlisters.CertificateSigningRequestLister, nodes corelisters.NodeLister) {
	all, err := csrs.List(labels.Everything())
	if err != nil {
		klog.ErrorS(err, "CSR approver: listing requests")
		return
	}
	claimed := map[string]string{}
	for _, r := range all {
		if n := NodeNameOf(r, c.cfg.BootstrapGroup); n != "" {
			claimed[n] = r.Name
		}
	}
	facts := Facts{
		BootstrapGroup: c.cfg.BootstrapGroup,
		NodeExists: func(name string) bool {
			_, err := nodes.Get(name)
			return err == nil
		},
		ClaimedBy: func(name, except string) string {
			if other := claimed[name]; other != except {
				return other
			}
			return ""
		},
	}
	for _, r := range all {
		d := Decide(r, facts)
		if d.Verdict == Ignore {
			continue
		}
		if err := c.write(ctx, cs, r, d); err != nil {
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				klog.ErrorS(err, "CSR approver: writing the verdict", "csr", r.Name, "verdict", d.Verdict)
			}
			continue
		}
		if d.Verdict == Approve {
			claimed[d.NodeName] = r.Name
		}
		klog.InfoS("CSR approver: decided", "csr", r.Name, "requester", r.Spec.Username, "node", d.NodeName, "verdict", d.Verdict, "reason", d.Reason, "message", d.Message)
	}
}

// write adds the verdict's condition through the approval subresource.
func (c *Controller) write(ctx context.Context, cs kubernetes.Interface, r *certificatesv1.CertificateSigningRequest, d Decision) error {
	r = r.DeepCopy()
	typ := certificatesv1.CertificateApproved
	if d.Verdict == Deny {
		typ = certificatesv1.CertificateDenied
	}
	r.Status.Conditions = append(r.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: typ, Status: v1.ConditionTrue, Reason: d.Reason, Message: d.Message, LastUpdateTime: metav1.Now(),
	})
	_, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, r.Name, r, metav1.UpdateOptions{})
	return err
}
