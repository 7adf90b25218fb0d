package podapi

import (
	"fmt"
	"math/rand"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// The watch verb (GET ...?watch=true): one metav1.WatchEvent per line,
// resumable from any resourceVersion the hub still holds (watchhub.go).

// BookmarkInterval is how often a watch with allowWatchBookmarks gets a
// BOOKMARK (the apiserver sends one about every minute).
var BookmarkInterval = 10 * time.Second

// serveWatch streams one metav1.WatchEvent JSON object per line.
func (s *Server) serveWatch(w http.ResponseWriter, req *http.Request, rt route, res resource) error {
	q := req.URL.Query()
	ls, fs, err := selectors(req)
	if err != nil {
		return err
	}
	filter := watchFilter{res: res, namespace: rt.namespace, labels: ls, fields: fs}
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
	wt, initEvents, startRV, err := s.Registry.startWatch(res, q.Get("resourceVersion"), initial)
	if err != nil {
		return err
	}
	defer s.Registry.c.hub.unsubscribe(wt)
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
		b := res.newObject()
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
			if rv, ok := s.Registry.c.hub.idleRV(wt); ok && rv > sentRV {
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
