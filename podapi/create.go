package podapi

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// serveCreate is POST on a collection.
func (s *Server) serveCreate(w http.ResponseWriter, req *http.Request, rt route, res resource, dryRun bool) (runtime.Object, int, error) {
	obj, manager, err := decodeWrite(w, req, rt, res)
	if err != nil {
		return nil, 0, err
	}
	obj = res.fieldManager().UpdateNoErrors(res.newObject(), obj, manager)
	if err := s.admitPod(req.Context(), obj); err != nil {
		return nil, 0, err
	}
	out, err := res.createObject(obj, dryRun)
	return out, http.StatusCreated, err
}

// decodeWrite reads the body of a POST or PUT as res's kind, in the URL's
// namespace, and names its field manager.
func decodeWrite(w http.ResponseWriter, req *http.Request, rt route, res resource) (runtime.Object, string, error) {
	if err := checkContentType(req); err != nil {
		return nil, "", err
	}
	body, err := readBody(req)
	if err != nil {
		return nil, "", err
	}
	obj := res.newObject()
	if err := decodeBytes(w, req, body, obj, res.gvk()); err != nil {
		return nil, "", err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, "", apierrors.NewBadRequest(err.Error())
	}
	if m.GetNamespace() == "" {
		m.SetNamespace(rt.namespace)
	}
	if m.GetNamespace() != rt.namespace {
		return nil, "", apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	manager, err := managerName(req)
	return obj, manager, err
}
