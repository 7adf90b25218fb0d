package pivot

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/ownprocess"
)

// The pivot to self-hosted: the I/O around Decide (decide.go).

// BootstrapPods is bootlet's registry as the pivot sees it.
type BootstrapPods interface {
	GetPod(ns, name string) (*v1.Pod, error)
	// DeletePod deletes a pod gracefully; a kubelet-static pod is released
	// (its static copy withdrawn, the kubelet stops it).
	DeletePod(ns, name string, opts *metav1.DeleteOptions) (*v1.Pod, error)
}

// EventSink records pod events (podapi's event log).
type EventSink interface {
	Event(pod *v1.Pod, eventType, reason, message string)
}

// Config configures the pivot controller.
type Config struct {
	NodeName string
	// APIServer is the client configuration of the apiserver (for example
	// the rendered admin.conf).
	APIServer *rest.Config
	// SelfHostedDir is render's self-hosted/ directory: bootlet creates
	// every object in it that does not exist yet, and labels this node
	// node-role.kubernetes.io/control-plane, as bootkube's start did, once
	// this node's bootstrap apiserver serves (DecideLabel). Empty: a
	// provisioning system does both, and bootlet only hands over.
	SelfHostedDir string
	Pods          BootstrapPods
	Events        EventSink
	// Components defaults to DefaultComponents.
	Components []Component
	// DoneFile is where the pivot records that it is complete
	// (RecordPath of bootlet's root dir). A bootlet that finds the
	// record at start has nothing to hand over: it neither creates the
	// self-hosted objects again nor waits for anything. Empty: no record.
	DoneFile string
	// Handover, before the bootstrap apiserver (outgoing) is withdrawn,
	// moves its port's clients to the self-hosted one (incoming), bounded
	// (package node's port hand-over, package reuseport). nil: none.
	Handover func(ctx context.Context, incoming, outgoing types.UID)
	// Verdicts is the apiserver port's router, asked first whether a
	// self-hosted apiserver's own process serves (nil: no router).
	Verdicts ownprocess.Verdicts
}

const (
	pivotResync       = time.Second
	pivotFieldManager = "bootlet"
)

// Run runs the pivot until every component's bootstrap pod is gone
// from bootlet's registry, or ctx ends. It waits for the apiserver, creates
// the self-hosted objects and labels this node when configured to (the
// label once this node's own bootstrap apiserver serves: DecideLabel), then
// watches this node's self-hosted pods and withdraws each bootstrap pod once
// its self-hosted pod has taken over (Decide).
func Run(ctx context.Context, cfg Config) error {
	if len(cfg.Components) == 0 {
		cfg.Components = DefaultComponents
	}
	rc := rest.CopyConfig(cfg.APIServer)
	rc.Timeout = 10 * time.Second
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("pivot: apiserver client: %w", err)
	}
	if cfg.DoneFile != "" {
		r, err := ReadDone(cfg.DoneFile)
		if err != nil {
			klog.ErrorS(err, "Pivot: the record of a completed pivot is unreadable; starting the pivot over", "path", cfg.DoneFile)
		} else if r != nil {
			klog.InfoS("Pivot to self-hosted already complete; not creating the self-hosted objects again", "completedAt", r.CompletedAt, "components", r.Components, "record", cfg.DoneFile)
			return nil
		}
	}
	klog.InfoS("Pivot to self-hosted enabled", "apiserver", rc.Host, "selfHostedAssets", cfg.SelfHostedDir, "components", len(cfg.Components))
	if !waitAPIServer(ctx, kube) {
		return nil
	}
	if cfg.SelfHostedDir != "" {
		if !retryUntil(ctx, "Creating the self-hosted objects", func() error { return createSelfHosted(ctx, rc, kube, cfg.SelfHostedDir) }) {
			return nil
		}
		if !waitNodeLabelled(ctx, kube, cfg.NodeName, ownAPIServer(rc, cfg.Pods, cfg.Components)) {
			return nil
		}
	}

	// A plain informer on the core client: the typed informer factory
	// would link every API group's informers into the daemon.
	lw := cache.NewFilteredListWatchFromClient(kube.CoreV1().RESTClient(), "pods", metav1.NamespaceSystem, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.NodeName).String()
	})
	informer := cache.NewSharedIndexInformer(lw, &v1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { poke() }, UpdateFunc: func(any, any) { poke() }, DeleteFunc: func(any) { poke() },
	}); err != nil {
		return fmt.Errorf("pivot: pod informer: %w", err)
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go informer.Run(pctx.Done())
	if !cache.WaitForCacheSync(pctx.Done(), informer.HasSynced) {
		return nil
	}
	p := &pivot{cfg: cfg, kube: kube, pods: corelisters.NewPodLister(informer.GetIndexer()), rest: rc, last: map[string]string{}}
	t := time.NewTicker(pivotResync)
	defer t.Stop()
	for {
		if p.round(ctx) {
			klog.InfoS("Pivot to self-hosted complete: no bootstrap pod left to hand over", "components", len(cfg.Components))
			if cfg.DoneFile != "" {
				r := DoneRecord{CompletedAt: time.Now().UTC()}
				for _, c := range cfg.Components {
					r.Components = append(r.Components, c.Name)
				}
				if err := WriteDone(cfg.DoneFile, r); err != nil {
					return fmt.Errorf("pivot: recording that it is complete: %w", err)
				}
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-t.C:
		}
	}
}

type pivot struct {
	cfg  Config
	kube kubernetes.Interface
	pods corelisters.PodLister
	rest *rest.Config
	last map[string]string // component → last reason logged
}

// round observes, decides once, and withdraws. It reports whether the
// pivot is done. What a withdrawal changes is seen at the next round.
func (p *pivot) round(ctx context.Context) bool {
	facts, ok := p.observe(ctx)
	if !ok {
		return false
	}
	steps := Decide(facts)
	p.act(ctx, facts, steps)
	return Done(steps)
}
