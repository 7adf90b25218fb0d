package pivot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/ownprocess"
	btypes "github.com/bootlet/bootlet/types"
)

// The pivot to self-hosted: the I/O around Decide (pivot_plan.go).

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
	// node-role.kubernetes.io/control-plane, as bootkube's start did. Empty:
	// a provisioning system does both, and bootlet only hands over.
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
}

const (
	pivotResync       = time.Second
	pivotFieldManager = "bootlet"
)

// Run runs the pivot until every component's bootstrap pod is gone
// from bootlet's registry, or ctx ends. It waits for the apiserver, creates
// the self-hosted objects when configured to, then watches this node's
// self-hosted pods and withdraws each bootstrap pod once its self-hosted pod
// has taken over (Decide).
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
		if !waitNodeLabelled(ctx, kube, cfg.NodeName) {
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

// round gathers the facts, decides, and withdraws. It reports whether the
// pivot is done.
func (p *pivot) round(ctx context.Context) bool {
	facts := Facts{}
	var apiserverPod *v1.Pod
	for _, c := range p.cfg.Components {
		cf := ComponentFacts{Component: c}
		bp, err := p.cfg.Pods.GetPod(c.Bootstrap.Namespace, c.Bootstrap.Name)
		if err == nil {
			cf.Bootstrap = bootstrapFacts(bp)
			if c.APIServer {
				apiserverPod = bp
			}
		} else if !apierrors.IsNotFound(err) {
			klog.ErrorS(err, "Pivot: reading the bootstrap pod failed", "pod", c.Bootstrap.String())
			return false
		}
		sel, err := labels.Parse(c.Selector)
		if err != nil {
			klog.ErrorS(err, "Pivot: bad selector", "component", c.Name)
			return false
		}
		shs, err := p.pods.Pods(metav1.NamespaceSystem).List(sel)
		if err != nil {
			klog.ErrorS(err, "Pivot: listing self-hosted pods failed", "component", c.Name)
			return false
		}
		sort.Slice(shs, func(i, j int) bool { return shs[i].Name < shs[j].Name })
		for _, sp := range shs {
			cf.SelfHosted = append(cf.SelfHosted, selfHostedFacts(sp))
		}
		if cand := servingCandidate(cf); cand != nil {
			for _, sp := range shs {
				if sp.UID == cand.UID {
					ok, why := p.servesReadyz(ctx, sp)
					cand.ServesReadyz = ok
					if !ok {
						klog.V(2).InfoS("Pivot: the self-hosted apiserver's own process does not answer /readyz yet", "pod", sp.Name, "why", why)
					}
				}
			}
		}
		facts.Components = append(facts.Components, cf)
	}
	if apiserverPod != nil {
		facts.EndpointsListNode = p.endpointsListNode(ctx, advertiseAddress(apiserverPod))
	}
	steps := Decide(facts)
	for _, s := range steps {
		if p.last[s.Component] != s.Reason {
			p.last[s.Component] = s.Reason
			klog.InfoS("Pivot", "component", s.Component, "withdraw", s.Withdraw, "done", s.Done, "reason", s.Reason)
		}
		if !s.Withdraw {
			continue
		}
		c := componentNamed(p.cfg.Components, s.Component)
		p.withdraw(c, facts, s)
	}
	return Done(steps)
}

func componentNamed(cs []Component, name string) Component {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return Component{}
}

// withdraw deletes the bootstrap pod from bootlet's registry, with a UID
// precondition so a pod re-created meanwhile is left alone. The registry's
// release path withdraws the static copy and the kubelet stops the pod
// gracefully (SIGTERM, the pod's grace period).
func (p *pivot) withdraw(c Component, f Facts, s Step) {
	var uid types.UID
	for _, cf := range f.Components {
		if cf.Component.Name == c.Name && cf.Bootstrap != nil {
			uid = cf.Bootstrap.UID
		}
	}
	pod, err := p.cfg.Pods.DeletePod(c.Bootstrap.Namespace, c.Bootstrap.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil {
		klog.ErrorS(err, "Pivot: withdrawing the bootstrap pod failed", "pod", c.Bootstrap.String())
		return
	}
	klog.InfoS("Pivot: withdrew the bootstrap pod", "pod", c.Bootstrap.String(), "selfHosted", s.Pod, "reason", s.Reason)
	if p.cfg.Events != nil && pod != nil {
		p.cfg.Events.Event(pod, v1.EventTypeNormal, "PivotedToSelfHosted", fmt.Sprintf("%s: %s; bootstrap pod withdrawn", c.Name, s.Reason))
	}
}

// endpointsListNode reports whether both default/kubernetes objects, the
// Endpoints and the EndpointSlice the apiserver's reconciler keeps with it,
// list ip.
func (p *pivot) endpointsListNode(ctx context.Context, ip string) bool {
	if ip == "" {
		return false
	}
	ep, err := p.kube.CoreV1().Endpoints(metav1.NamespaceDefault).Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil || !endpointsList(ep, ip) {
		return false
	}
	slices, err := p.kube.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kubernetes"})
	if err != nil {
		return false
	}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if a == ip {
					return true
				}
			}
		}
	}
	return false
}

// waitAPIServer polls the apiserver's /readyz until it answers ok; false
// when ctx ends first.
func waitAPIServer(ctx context.Context, kube kubernetes.Interface) bool {
	logged := false
	return retryDoubling(ctx, 500*time.Millisecond, 5*time.Second, func() error {
		body, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) != "ok" {
			err = fmt.Errorf("/readyz answered %q", body)
		}
		return err
	}, func(err error, _ time.Duration) {
		if !logged {
			klog.InfoS("Pivot: waiting for the apiserver", "err", err)
			logged = true
		}
	})
}

// retryUntil runs f until it succeeds (logging each failure) or ctx ends.
func retryUntil(ctx context.Context, what string, f func() error) bool {
	return retryDoubling(ctx, time.Second, 2*time.Second, f, func(err error, next time.Duration) {
		klog.ErrorS(err, what+" failed; retrying", "in", next)
	})
}

// retryDoubling runs f until it succeeds (true) or ctx ends (false),
// telling failed of each failure and waiting delay, doubled while under
// limit.
func retryDoubling(ctx context.Context, delay, limit time.Duration, f func() error, failed func(err error, next time.Duration)) bool {
	for {
		err := f()
		if err == nil {
			return true
		}
		failed(err, delay)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
		if delay < limit {
			delay *= 2
		}
	}
}

// createSelfHosted creates every object of the YAML files in dir (sorted by
// file name, in file order) that does not exist yet. An existing object is
// left as it is: it may have been upgraded since (kubectl set image), and a
// restarted bootlet must not roll it back.
func createSelfHosted(ctx context.Context, rc *rest.Config, kube kubernetes.Interface, dir string) error {
	objs, err := readObjects(dir)
	if err != nil {
		return err
	}
	if len(objs) == 0 {
		return fmt.Errorf("--self-hosted-assets %s holds no objects", dir)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	created, existed, err := createObjects(ctx, dyn, mapper, objs)
	if err != nil {
		return err
	}
	klog.InfoS("Self-hosted objects in place", "dir", dir, "created", created, "alreadyExisted", existed)
	return nil
}

// createObjects creates each object that does not exist yet, in order, and
// stops at the first other error, naming the object.
func createObjects(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, objs []*unstructured.Unstructured) (created, existed int, err error) {
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return created, existed, fmt.Errorf("%s %s: %w", gvk.Kind, klog.KObj(o), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := o.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = dyn.Resource(m.Resource).Namespace(ns)
		}
		_, err = ri.Create(ctx, o, metav1.CreateOptions{FieldManager: pivotFieldManager})
		switch {
		case err == nil:
			created++
			klog.InfoS("Created a self-hosted object", "kind", gvk.Kind, "object", klog.KObj(o))
		case apierrors.IsAlreadyExists(err):
			existed++
		default:
			return created, existed, fmt.Errorf("creating %s %s: %w", gvk.Kind, klog.KObj(o), err)
		}
	}
	return created, existed, nil
}

// readObjects decodes every document of dir's *.yaml and *.json files.
func readObjects(dir string) ([]*unstructured.Unstructured, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml") || strings.HasSuffix(name, ".json")) {
			continue
		}
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
		for i := 0; ; i++ {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				f.Close()
				return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
				f.Close()
				return nil, fmt.Errorf("%s: document %d: apiVersion, kind and metadata.name are required", name, i)
			}
			out = append(out, u)
		}
		f.Close()
	}
	return out, nil
}

// waitNodeLabelled labels this node once the kubelet has registered it,
// polling every second (logging the wait once); false when ctx ends first.
func waitNodeLabelled(ctx context.Context, kube kubernetes.Interface, node string) bool {
	waiting := false
	for {
		err := labelControlPlane(ctx, kube, node)
		switch {
		case err == nil:
			return true
		case apierrors.IsNotFound(err):
			if !waiting {
				klog.InfoS("Pivot: waiting for the kubelet to register this node", "node", node)
				waiting = true
			}
		default:
			klog.ErrorS(err, "Labelling this node as a control-plane node failed; retrying", "node", node)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
}

// labelControlPlane labels this node's Node object node-role.kubernetes.io/control-plane="", the
// label the self-hosted pods select, as kubeadm's mark-control-plane phase
// does. The kubelet may not set node-role labels on itself.
func labelControlPlane(ctx context.Context, kube kubernetes.Interface, node string) error {
	n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if _, ok := n.Labels[btypes.LabelControlPlane]; ok {
		return nil
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:""}}}`, btypes.LabelControlPlane)
	if _, err := kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: pivotFieldManager}); err != nil {
		return err
	}
	klog.InfoS("Labelled this node as a control-plane node", "node", node, "label", btypes.LabelControlPlane)
	return nil
}

// servesReadyz reports whether a process of pod (a self-hosted apiserver on
// this node) itself answers its readiness endpoint with 200, and why not.
func (p *pivot) servesReadyz(ctx context.Context, pod *v1.Pod) (bool, string) {
	return ownprocess.ServesReadiness(ctx, p.rest, pod)
}
