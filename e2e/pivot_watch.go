//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfields "k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"
)

// EndpointsWatch watches default/kubernetes (the Endpoints and its
// EndpointSlices) from before the objects exist until it is stopped. From
// the moment each kind first lists an address, it records every moment it
// listed none (or was deleted).
type EndpointsWatch struct {
	mu       sync.Mutex
	firstEP  time.Time // first time the Endpoints listed an address
	firstEPS time.Time // same for the EndpointSlices
	events   int
	empties  []string
	errs     []string
	slices   map[string]int // slice name → ready addresses
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// WatchKubernetesEndpoints starts the watches with the client of kubeconfig.
func WatchKubernetesEndpoints(t testing.TB, kubeconfig string) *EndpointsWatch {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 0 // watches
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &EndpointsWatch{slices: map[string]int{}, cancel: cancel}
	ep := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "endpoints", metav1.NamespaceDefault,
		k8sfields.OneTermEqualSelector("metadata.name", "kubernetes"))
	eps := cache.NewFilteredListWatchFromClient(cs.DiscoveryV1().RESTClient(), "endpointslices", metav1.NamespaceDefault,
		func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=kubernetes" })
	for _, lw := range []*cache.ListWatch{ep, eps} {
		listThenWatch(ctx, t, lw, &w.wg, w.observe, func(problem string) {
			w.mu.Lock()
			w.errs = append(w.errs, problem)
			w.mu.Unlock()
		})
	}
	t.Cleanup(w.Stop)
	return w
}

// listThenWatch lists lw, hands each listed object to observe as Added,
// then watches from the list's resourceVersion with a RetryWatcher (which
// outlives an apiserver's restart or hand-over) and hands on every event
// until ctx ends, in a goroutine wg counts. problem hears of a watch error
// event and of a watch that ended before ctx.
func listThenWatch(ctx context.Context, t testing.TB, lw *cache.ListWatch, wg *sync.WaitGroup, observe func(watch.EventType, interface{}), problem func(string)) {
	t.Helper()
	list, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list for a watch: %v", err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range items {
		observe(watch.Added, obj)
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.(metav1.ListInterface).GetResourceVersion(), lw)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					if ctx.Err() == nil {
						problem("a watch ended")
					}
					return
				}
				if ev.Type == watch.Error {
					problem(fmt.Sprintf("watch error: %v", ev.Object))
					continue
				}
				observe(ev.Type, ev.Object)
			}
		}
	}()
}

func (w *EndpointsWatch) observe(t watch.EventType, obj interface{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	now := time.Now()
	switch o := obj.(type) {
	//lint:ignore SA1019 the apiserver still writes default/kubernetes as Endpoints
	case *v1.Endpoints:
		n := 0
		for _, s := range o.Subsets {
			n += len(s.Addresses)
		}
		if t == watch.Deleted {
			n = 0
		}
		if n > 0 && w.firstEP.IsZero() {
			w.firstEP = now
		}
		if n == 0 && !w.firstEP.IsZero() {
			w.empties = append(w.empties, fmt.Sprintf("%s Endpoints default/kubernetes %s with no address", now.Format("15:04:05.000"), t))
		}
	case *discoveryv1.EndpointSlice:
		n := 0
		for _, e := range o.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				n += len(e.Addresses)
			}
		}
		if t == watch.Deleted {
			delete(w.slices, o.Name)
		} else {
			w.slices[o.Name] = n
		}
		total := 0
		for _, c := range w.slices {
			total += c
		}
		if total > 0 && w.firstEPS.IsZero() {
			w.firstEPS = now
		}
		if total == 0 && !w.firstEPS.IsZero() {
			w.empties = append(w.empties, fmt.Sprintf("%s EndpointSlices of default/kubernetes list no ready address (%s %s)", now.Format("15:04:05.000"), t, o.Name))
		}
	}
}

// Stop ends the watches.
func (w *EndpointsWatch) Stop() {
	w.cancel()
	w.wg.Wait()
}

// Report returns the first time each kind listed an address, the moments
// either listed none after that, and watch errors.
func (w *EndpointsWatch) Report() (firstEP, firstEPS time.Time, events int, empties, errs []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.firstEP, w.firstEPS, w.events, append([]string(nil), w.empties...), append([]string(nil), w.errs...)
}

// PodTimeline watches kube-system's pods from its start until it is
// stopped and records, with the watcher's clock, when each pod was first
// seen, bound to a node, Running, Ready, and marked for deletion: the
// self-hosted side of the pivot's breakdown
// (docs/design/pivot.md, "Why the pivot takes about half a minute"). The
// watch survives the apiserver hand-over (a retry watcher resumes from the
// last resource version).
type PodTimeline struct {
	mu     sync.Mutex
	pods   map[string]*podTimes
	order  []string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type podTimes struct {
	seen, bound, running, ready, deleting time.Time
}

// WatchPodTimeline starts the watch with the client of kubeconfig.
func WatchPodTimeline(t testing.TB, kubeconfig string) *PodTimeline {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &PodTimeline{pods: map[string]*podTimes{}, cancel: cancel}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", metav1.NamespaceSystem, k8sfields.Everything())
	listThenWatch(ctx, t, lw, &w.wg, func(_ watch.EventType, obj interface{}) {
		if p, isPod := obj.(*v1.Pod); isPod {
			w.observe(p)
		}
	}, func(string) {})
	t.Cleanup(w.Stop)
	return w
}

func (w *PodTimeline) observe(p *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	pt, ok := w.pods[p.Name]
	if !ok {
		pt = &podTimes{seen: now}
		w.pods[p.Name] = pt
		w.order = append(w.order, p.Name)
	}
	set := func(at *time.Time, cond bool) {
		if cond && at.IsZero() {
			*at = now
		}
	}
	set(&pt.bound, p.Spec.NodeName != "")
	set(&pt.running, Running(p))
	set(&pt.ready, Ready(p))
	set(&pt.deleting, p.DeletionTimestamp != nil)
}

// Stop ends the watch.
func (w *PodTimeline) Stop() {
	w.cancel()
	w.wg.Wait()
}

// Report is one line per pod seen, each moment relative to from.
func (w *PodTimeline) Report(from time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	rel := func(at time.Time) string {
		if at.IsZero() {
			return "-"
		}
		return "+" + at.Sub(from).Round(time.Millisecond).String()
	}
	var out []string
	for _, n := range w.order {
		pt := w.pods[n]
		out = append(out, fmt.Sprintf("%s created %s bound %s running %s ready %s deleting %s", n, rel(pt.seen), rel(pt.bound), rel(pt.running), rel(pt.ready), rel(pt.deleting)))
	}
	return out
}
