package podapi

import (
	"fmt"
	"math/rand"
	"net/http"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// WatchHistory is how many events the registry keeps for watches that
// resume from a resourceVersion; older ones get 410 Gone.
var WatchHistory = 1000

// watchEvent is one change of one object, in resourceVersion order.
type watchEvent struct {
	rv       uint64
	typ      watch.EventType
	resource string
	obj      runtime.Object // new state; for DELETED the last state with the deletion's RV
	prev     runtime.Object // state before, nil for ADDED
}

// watchHub keeps a bounded history of events and fans them out. emit is
// called with the registry lock held, so the order is the RV order and a
// subscription taken under the registry lock misses nothing.
type watchHub struct {
	mu      sync.Mutex
	history []watchEvent
	floor   uint64 // every event with rv > floor is in history
	last    uint64 // rv of the newest event
	subs    map[*watcher]struct{}
}

type watcher struct {
	resource string
	ch       chan watchEvent
}

func newWatchHub(rv uint64) *watchHub {
	return &watchHub{floor: rv, last: rv, subs: map[*watcher]struct{}{}}
}

func resourceOf(obj runtime.Object) string {
	switch obj.(type) {
	case *v1.Pod:
		return "pods"
	case *v1.Secret:
		return "secrets"
	case *v1.ConfigMap:
		return "configmaps"
	}
	return ""
}

// emit records a change. Call with r.mu held for writing, after the object's
// resourceVersion is set.
func (r *Registry) emit(typ watch.EventType, prev, obj runtime.Object) {
	if r.hub == nil {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	ev := watchEvent{rv: rv, typ: typ, resource: resourceOf(obj), obj: obj.DeepCopyObject()}
	if prev != nil {
		ev.prev = prev.DeepCopyObject()
	}
	r.hub.publish(ev)
	observeWrite(ev)
}

func (h *watchHub) publish(ev watchEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.history = append(h.history, ev)
	if n := len(h.history) - WatchHistory; n > 0 {
		h.floor = h.history[n-1].rv
		h.history = append([]watchEvent(nil), h.history[n:]...)
	}
	h.last = ev.rv
	for w := range h.subs {
		if w.resource != ev.resource {
			continue
		}
		select {
		case w.ch <- ev:
		default:
			// Too slow: end its stream; the client resumes from its last
			// resourceVersion, as with the apiserver's watch cache.
			delete(h.subs, w)
			close(w.ch)
		}
	}
}

func (h *watchHub) unsubscribe(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[w]; ok {
		delete(h.subs, w)
		close(w.ch)
	}
}

// idleRV is the RV a bookmark may carry: when w has consumed everything.
func (h *watchHub) idleRV(w *watcher) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(w.ch) > 0 {
		return 0, false
	}
	return h.last, true
}

func tooOld(rv, floor uint64) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, floor+1))
}

// startWatch subscribes to resource and returns the initial events: the
// current state as ADDED (rv "" or "0", or sendInitialEvents), or the
// history after rv. list must return the current objects.
func (r *Registry) startWatch(resource, rvParam string, initial bool, list func() []runtime.Object) (*watcher, []watchEvent, uint64, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h := r.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []watchEvent
	if rvParam == "" || rvParam == "0" || initial {
		if rvParam != "" && rvParam != "0" {
			n, err := strconv.ParseUint(rvParam, 10, 64)
			if err != nil {
				return nil, nil, 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", rvParam))
			}
			if n > r.rv {
				return nil, nil, 0, apierrors.NewResourceExpired(fmt.Sprintf("resourceVersion %d is newer than the server's %d (the daemon restarted): relist", n, r.rv))
			}
		}
		for _, o := range list() {
			m, _ := meta.Accessor(o)
			rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
			out = append(out, watchEvent{rv: rv, typ: watch.Added, resource: resource, obj: o})
		}
	} else {
		n, err := strconv.ParseUint(rvParam, 10, 64)
		if err != nil {
			return nil, nil, 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", rvParam))
		}
		if n < h.floor {
			return nil, nil, 0, tooOld(n, h.floor)
		}
		if n > r.rv {
			return nil, nil, 0, apierrors.NewResourceExpired(fmt.Sprintf("resourceVersion %d is newer than the server's %d (the daemon restarted): relist", n, r.rv))
		}
		for _, ev := range h.history {
			if ev.rv > n && ev.resource == resource {
				out = append(out, ev)
			}
		}
	}
	w := &watcher{resource: resource, ch: make(chan watchEvent, 1024)}
	h.subs[w] = struct{}{}
	return w, out, r.rv, nil
}

// watchFilter decides what a watcher sees, as the apiserver's cacher does:
// an object that stops matching is DELETED, one that starts matching ADDED.
type watchFilter struct {
	namespace string
	labels    labels.Selector
	fields    fields.Selector
}

func (f watchFilter) matches(obj runtime.Object) bool {
	if obj == nil {
		return false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	if f.namespace != "" && m.GetNamespace() != f.namespace {
		return false
	}
	return f.labels.Matches(labels.Set(m.GetLabels())) && f.fields.Matches(objectFields(obj))
}

func (f watchFilter) translate(ev watchEvent) (watch.EventType, bool) {
	now := f.matches(ev.obj)
	switch ev.typ {
	case watch.Added:
		return watch.Added, now
	case watch.Deleted:
		return watch.Deleted, now || f.matches(ev.prev)
	}
	before := f.matches(ev.prev)
	switch {
	case before && now:
		return watch.Modified, true
	case now:
		return watch.Added, true
	case before:
		return watch.Deleted, true
	}
	return "", false
}

// objectFields is the field set field selectors see, per kind.
func objectFields(obj runtime.Object) fields.Set {
	switch o := obj.(type) {
	case *v1.Pod:
		return podFields(o)
	case *v1.Secret:
		return fields.Set{"metadata.name": o.Name, "metadata.namespace": o.Namespace, "type": string(o.Type)}
	case *v1.ConfigMap:
		return fields.Set{"metadata.name": o.Name, "metadata.namespace": o.Namespace}
	case *v1.Event:
		return eventFields(o)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return fields.Set{}
	}
	return fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}
}

func eventFields(e *v1.Event) fields.Set {
	return fields.Set{
		"metadata.name": e.Name, "metadata.namespace": e.Namespace,
		"involvedObject.kind": e.InvolvedObject.Kind, "involvedObject.namespace": e.InvolvedObject.Namespace,
		"involvedObject.name": e.InvolvedObject.Name, "involvedObject.uid": string(e.InvolvedObject.UID),
		"involvedObject.apiVersion": e.InvolvedObject.APIVersion, "involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath": e.InvolvedObject.FieldPath, "reason": e.Reason, "reportingComponent": e.ReportingController,
		"source": e.Source.Component, "type": e.Type,
	}
}

// BookmarkInterval is how often a watch with allowWatchBookmarks gets a
// BOOKMARK (the apiserver sends one about every minute).
var BookmarkInterval = 10 * time.Second

// serveWatch streams one metav1.WatchEvent JSON object per line.
func (s *Server) serveWatch(w http.ResponseWriter, req *http.Request, rt route, list func() []runtime.Object, blank func() runtime.Object) error {
	q := req.URL.Query()
	ls, fs, err := selectors(req)
	if err != nil {
		return err
	}
	filter := watchFilter{namespace: rt.namespace, labels: ls, fields: fs}
	if rt.name != "" { // watch on a single object (legacy path form)
		filter.fields = fields.AndSelectors(fs, fields.OneTermEqualSelector("metadata.name", rt.name))
	}
	bookmarks := q.Get("allowWatchBookmarks") == "true"
	initial := q.Get("sendInitialEvents") == "true"
	if initial && (!bookmarks || q.Get("resourceVersionMatch") != string(metav1.ResourceVersionMatchNotOlderThan)) {
		return apierrors.NewBadRequest("sendInitialEvents=true requires allowWatchBookmarks=true and resourceVersionMatch=NotOlderThan")
	}
	timeout := time.Duration(1800+rand.Intn(1800)) * time.Second
	if t := q.Get("timeoutSeconds"); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			return apierrors.NewBadRequest(fmt.Sprintf("invalid timeoutSeconds %q", t))
		}
		if n > 0 {
			timeout = time.Duration(n) * time.Second
		}
	}
	tr, err := s.transformerFor(req)
	if err != nil {
		return err
	}
	wt, initEvents, startRV, err := s.Registry.startWatch(rt.resource, q.Get("resourceVersion"), initial, list)
	if err != nil {
		return err
	}
	defer s.Registry.hub.unsubscribe(wt)
	watchesActive.Inc()
	defer watchesActive.Dec()

	w.Header().Set("Content-Type", tr.contentType())
	w.Header().Set("Cache-Control", "no-cache, private")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	enc := newWatchEncoder(w, tr)
	sentRV := startRV
	send := func(typ watch.EventType, obj runtime.Object) bool {
		if err := enc.encode(typ, obj); err != nil {
			klog.V(4).InfoS("Watch client gone", "err", err)
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	bookmark := func(rv uint64, end bool) bool {
		b := blank()
		m, _ := meta.Accessor(b)
		m.SetResourceVersion(strconv.FormatUint(rv, 10))
		if end {
			m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		}
		return send(watch.Bookmark, b)
	}
	for _, ev := range initEvents {
		if typ, ok := filter.translate(ev); ok && !send(typ, ev.obj) {
			return nil
		}
		if ev.rv > sentRV {
			sentRV = ev.rv
		}
	}
	if initial {
		if !bookmark(startRV, true) {
			return nil
		}
	} else if bookmarks {
		if !bookmark(sentRV, false) {
			return nil
		}
	} else if fl != nil {
		fl.Flush()
	}
	tick := time.NewTicker(BookmarkInterval)
	defer tick.Stop()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		select {
		case <-req.Context().Done():
			return nil
		case <-deadline.C:
			return nil
		case <-tick.C:
			if !bookmarks {
				continue
			}
			if rv, ok := s.Registry.hub.idleRV(wt); ok && rv > sentRV {
				sentRV = rv
			}
			if !bookmark(sentRV, false) {
				return nil
			}
		case ev, ok := <-wt.ch:
			if !ok {
				return nil
			}
			if ev.rv > sentRV {
				sentRV = ev.rv
			}
			if typ, ok := filter.translate(ev); ok && !send(typ, ev.obj) {
				return nil
			}
		}
	}
}

// The list functions a watch snapshots with; called with r.mu held.

func (r *Registry) listPodsLocked(ns string) ([]v1.Pod, string) {
	var out []v1.Pod
	for k, p := range r.pods {
		if ns == "" || k.ns == ns {
			out = append(out, *p.DeepCopy())
		}
	}
	return out, strconv.FormatUint(r.rv, 10)
}

func (r *Registry) listSecretsLocked(ns string) ([]v1.Secret, string) {
	var out []v1.Secret
	for k, s := range r.secrets {
		if ns == "" || k.ns == ns {
			out = append(out, *s.DeepCopy())
		}
	}
	return out, strconv.FormatUint(r.rv, 10)
}

func (r *Registry) listConfigMapsLocked(ns string) ([]v1.ConfigMap, string) {
	var out []v1.ConfigMap
	for k, c := range r.configMaps {
		if ns == "" || k.ns == ns {
			out = append(out, *c.DeepCopy())
		}
	}
	return out, strconv.FormatUint(r.rv, 10)
}
