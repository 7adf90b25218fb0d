package podapi

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
)

// serveUpdate is PUT on an object: a full replacement under optimistic
// concurrency.
func (s *Server) serveUpdate(w http.ResponseWriter, req *http.Request, rt route, res resource, dryRun bool) (runtime.Object, int, error) {
	obj, manager, err := decodeWrite(w, req, rt, res)
	if err != nil {
		return nil, 0, err
	}
	if objectMeta(obj).GetName() != rt.name {
		return nil, 0, apierrors.NewBadRequest("the name of the object does not match the name on the URL")
	}
	live, err := res.getObject(rt.namespace, rt.name)
	if err != nil {
		return nil, 0, err
	}
	obj = res.fieldManager().UpdateNoErrors(live, obj, manager)
	out, err := res.updateObject(obj, dryRun)
	return out, http.StatusOK, err
}
