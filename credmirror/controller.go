package credmirror

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/internal/kubeclient"
	btypes "github.com/bootlet/bootlet/types"
)

// Config configures the controller.
type Config struct {
	// Kubeconfig of an identity that may get, list and watch Secrets in
	// kube-system (render's checkpointer identity, on masters only).
	Kubeconfig string
	// Client replaces Kubeconfig (tests).
	Client kubernetes.Interface
	// Resync is the period of a full round besides the watch's events
	// (default 1 min): a directory removed by hand comes back.
	Resync time.Duration
}

// Controller mirrors the credential Secrets onto this master's disk.
type Controller struct{ cfg Config }

// New is a controller of cfg.
func New(cfg Config) *Controller {
	if cfg.Resync <= 0 {
		cfg.Resync = time.Minute
	}
	return &Controller{cfg: cfg}
}

// Run keeps every credential directory in line with its Secret until ctx
// ends. Every master runs it for its own disk; there is nothing to elect.
func (c *Controller) Run(ctx context.Context) {
	klog.InfoS("Credential mirror started")
	kubeclient.Run(ctx, c.cfg.Client, c.cfg.Kubeconfig, "bootlet-credential-mirror", func(err error) {
		klog.V(4).InfoS("Credential mirror: kubeconfig not loadable yet", "path", c.cfg.Kubeconfig, "err", err)
	}, c.run)
}

func (c *Controller) run(ctx context.Context, cs kubernetes.Interface) {
	// A plain informer of the labelled Secrets only, as the pivot's: the
	// typed factory would link every API group's informers into the daemon.
	secrets := cs.CoreV1().Secrets(metav1.NamespaceSystem)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = btypes.LabelCredentials
			return secrets.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = btypes.LabelCredentials
			return secrets.Watch(ctx, o)
		},
	}
	informer := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, cs), &v1.Secret{}, 0, cache.Indexers{})
	poke := kubeclient.NewWake()
	wake := poke.Poke
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: wake, UpdateFunc: func(_, n any) { wake(n) }}); err != nil {
		klog.ErrorS(err, "Credential mirror: cannot watch Secrets")
		return
	}
	go informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		return
	}
	kubeclient.Rounds(ctx, poke, c.cfg.Resync, func() { round(informer.GetStore().List()) })
}

// round mirrors every credential Secret among objs. A Secret that is
// deleted keeps its directory: a component may still run from it, and the
// checkpoint that brings it back after a reboot mounts it.
func round(objs []any) {
	for _, o := range objs {
		s, ok := o.(*v1.Secret)
		if !ok {
			continue
		}
		t, ok, err := TargetOf(s)
		if !ok {
			continue
		}
		if err != nil {
			klog.ErrorS(err, "Credential mirror: not mirroring a Secret with an invalid target", "secret", klog.KObj(s))
			continue
		}
		changed, err := Mirror(s, t)
		if err != nil {
			klog.ErrorS(err, "Credential mirror: writing failed; retrying next round", "secret", klog.KObj(s), "dir", t.Dir)
			continue
		}
		if changed {
			klog.InfoS("Credentials mirrored", "secret", klog.KObj(s), "resourceVersion", s.ResourceVersion, "dir", t.Dir)
		}
	}
}
