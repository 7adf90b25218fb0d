package podapi

import (
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"
)

// listQuery is what a list request asks for.
type listQuery struct {
	labels labels.Selector
	fields fields.Selector
	limit  int64
	rv     uint64
	exact  bool
	cont   string
}

func parseListQuery(req *http.Request) (listQuery, error) {
	var lq listQuery
	var err error
	if lq.labels, lq.fields, err = selectors(req); err != nil {
		return lq, err
	}
	q := req.URL.Query()
	if l := q.Get("limit"); l != "" {
		if lq.limit, err = strconv.ParseInt(l, 10, 64); err != nil || lq.limit < 0 {
			return lq, apierrors.NewBadRequest(fmt.Sprintf("invalid limit %q", l))
		}
	}
	if lq.rv, err = parseRV(q.Get("resourceVersion")); err != nil {
		return lq, err
	}
	switch m := metav1.ResourceVersionMatch(q.Get("resourceVersionMatch")); m {
	case "", metav1.ResourceVersionMatchNotOlderThan:
	case metav1.ResourceVersionMatchExact:
		if lq.rv == 0 {
			return lq, apierrors.NewBadRequest("resourceVersionMatch=Exact requires a resourceVersion other than 0")
		}
		lq.exact = true
	default:
		return lq, apierrors.NewBadRequest(fmt.Sprintf("unsupported resourceVersionMatch %q", m))
	}
	lq.cont = q.Get("continue")
	if lq.cont != "" && (lq.rv != 0 || lq.exact) {
		return lq, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
	}
	return lq, nil
}

// serveList is GET on a collection: selectors, and limit/continue pages
// served from one consistent snapshot, as the apiserver's lists from etcd
// are: every page is the state at the first page's resourceVersion, rebuilt
// from the watch history (watchhub.go). A continue token or an Exact
// resourceVersion older than that history gets 410 Gone (Expired).
func (s *Server) serveList(req *http.Request, rt route, res resource) (runtime.Object, int, error) {
	lq, err := parseListQuery(req)
	if err != nil {
		return nil, 0, err
	}
	items, listRV, from, err := s.Registry.listSnapshot(res, lq)
	if err != nil {
		return nil, 0, err
	}
	keys := make([]objKey, 0, len(items))
	for k := range items {
		if rt.namespace == "" || k.ns == rt.namespace {
			keys = append(keys, k)
		}
	}
	sortKeys(keys)
	var page []runtime.Object
	var last objKey
	more, remaining := false, int64(0)
	for _, k := range keys {
		if k.String() < from {
			continue
		}
		o := items[k]
		m := objectMeta(o)
		if !lq.labels.Matches(labels.Set(m.GetLabels())) || !lq.fields.Matches(res.objectFields(o)) {
			continue
		}
		if lq.limit > 0 && int64(len(page)) >= lq.limit {
			more = true
			remaining++
			continue
		}
		c := o.DeepCopyObject()
		c.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{}) // items carry no kind, as the apiserver's
		page = append(page, c)
		last = k
	}
	list := res.newListObject()
	if err := meta.SetList(list, page); err != nil {
		return nil, 0, apierrors.NewInternalError(err)
	}
	lm, _ := meta.ListAccessor(list)
	lm.SetResourceVersion(strconv.FormatUint(listRV, 10))
	if more {
		token, err := storage.EncodeContinue(last.String()+"\x00", "/", int64(listRV))
		if err != nil {
			return nil, 0, apierrors.NewInternalError(err)
		}
		lm.SetContinue(token)
		if lq.labels.Empty() && lq.fields.Empty() {
			lm.SetRemainingItemCount(&remaining)
		}
	}
	return list, http.StatusOK, nil
}

// listSnapshot picks the state a list serves: the current one, or the one
// at a continue token's or an Exact resourceVersion. from is the first key
// of the page.
func (r *Registry) listSnapshot(res resource, lq listQuery) (items map[objKey]runtime.Object, rv uint64, from string, err error) {
	r.c.mu.RLock()
	defer r.c.mu.RUnlock()
	switch {
	case lq.cont != "":
		key, crv, err := storage.DecodeContinue(lq.cont, "/")
		if err != nil || crv <= 0 {
			return nil, 0, "", apierrors.NewBadRequest(fmt.Sprintf("continue key is not valid: %v", err))
		}
		items, ok := r.snapshotAt(res, uint64(crv))
		if !ok {
			return nil, 0, "", apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
		}
		return items, uint64(crv), key, nil
	case lq.rv > r.c.rv:
		return nil, 0, "", tooNew(lq.rv, r.c.rv)
	case lq.exact:
		items, ok := r.snapshotAt(res, lq.rv)
		if !ok {
			return nil, 0, "", tooOld(lq.rv, r.c.hub.floorRV())
		}
		return items, lq.rv, "", nil
	}
	return res.snapshot(), r.c.rv, "", nil
}
