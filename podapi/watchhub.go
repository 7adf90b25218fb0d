package podapi

// The watch hub: the bounded history of changes every Store publishes to,
// and the fan-out to open watches.

import (
	"fmt"
	"sort"
	"strconv"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
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
	key      objKey         // set for initial events, for their order
}

// watchHub keeps a bounded history of events and fans them out. emit is
// called with the registry's readers' lock (core.mu) held for writing, so
// the order is the RV order and a subscription taken under that lock
// misses nothing.
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

// startWatch subscribes to res and returns the initial events: the current
// state as ADDED (rv "" or "0", or sendInitialEvents), or the history after
// rv. The subscription is taken under the registry lock, so it misses
// nothing between the initial events and the stream.
func (r *Registry) startWatch(res resource, rvParam string, initial bool) (*watcher, []watchEvent, uint64, error) {
	r.c.mu.RLock()
	defer r.c.mu.RUnlock()
	h := r.c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []watchEvent
	n, err := parseRV(rvParam)
	if err != nil {
		return nil, nil, 0, err
	}
	if n > r.c.rv {
		return nil, nil, 0, tooNew(n, r.c.rv)
	}
	if n == 0 || initial {
		for k, o := range res.snapshot() {
			out = append(out, watchEvent{rv: rvOf(o), typ: watch.Added, resource: res.name(), obj: o, key: k})
		}
		sortEvents(out)
	} else {
		if n < h.floor {
			return nil, nil, 0, tooOld(n, h.floor)
		}
		for _, ev := range h.history {
			if ev.rv > n && ev.resource == res.name() {
				out = append(out, ev)
			}
		}
	}
	w := &watcher{resource: res.name(), ch: make(chan watchEvent, 1024)}
	h.subs[w] = struct{}{}
	return w, out, r.c.rv, nil
}

// parseRV parses a resourceVersion parameter; "" and "0" are 0 (any).
func parseRV(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", s))
	}
	return n, nil
}

func tooNew(n, rv uint64) error {
	return apierrors.NewResourceExpired(fmt.Sprintf("resourceVersion %d is newer than the server's %d: relist", n, rv))
}

func rvOf(o runtime.Object) uint64 {
	n, _ := strconv.ParseUint(objectMeta(o).GetResourceVersion(), 10, 64)
	return n
}

func sortEvents(evs []watchEvent) {
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].key.ns != evs[j].key.ns {
			return evs[i].key.ns < evs[j].key.ns
		}
		return evs[i].key.name < evs[j].key.name
	})
}

// watchFilter decides what a watcher sees, as the apiserver's cacher does:
// an object that stops matching is DELETED, one that starts matching ADDED.
type watchFilter struct {
	res       resource
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
	return f.labels.Matches(labels.Set(m.GetLabels())) && f.fields.Matches(f.res.objectFields(obj))
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

// snapshotAt returns res's objects as they were at rv, rebuilt from the
// current state by undoing the history after rv (read only, not copies).
// ok=false when the history no longer reaches back to rv. Call with the
// registry's mu held.
func (r *Registry) snapshotAt(res resource, rv uint64) (items map[objKey]runtime.Object, ok bool) {
	h := r.c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if rv < h.floor {
		return nil, false
	}
	items = res.snapshot()
	for i := len(h.history) - 1; i >= 0 && h.history[i].rv > rv; i-- {
		ev := h.history[i]
		if ev.resource != res.name() {
			continue
		}
		k := keyOf(objectMeta(ev.obj))
		if ev.typ == watch.Added {
			delete(items, k)
		} else {
			items[k] = ev.prev
		}
	}
	return items, true
}

func (h *watchHub) floorRV() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.floor
}
