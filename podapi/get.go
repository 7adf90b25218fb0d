package podapi

import (
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
)

// serveGet is GET on an object.
func (s *Server) serveGet(rt route, res resource) (runtime.Object, int, error) {
	out, err := res.getObject(rt.namespace, rt.name)
	return out, http.StatusOK, err
}
