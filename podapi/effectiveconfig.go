package podapi

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// EffectiveConfigPath serves Server.EffectiveConfig on the unix socket
// only: it names the node's paths (the root dir, the asset dir, the
// kubeconfigs), which the CLI verbs that work on them take as their
// defaults. It holds no secret, but the socket's users are who run those
// verbs.
const EffectiveConfigPath = "/bootlet/v1/config"

var configResource = schema.GroupResource{Group: "bootlet.dev", Resource: "bootletconfigurations"}

func (s *Server) serveEffectiveConfig(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet {
		writeError(w, methodNotAllowed(req))
		return
	}
	if s.EffectiveConfig == nil {
		writeError(w, apierrors.NewNotFound(configResource, "effective"))
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(s.EffectiveConfig)
}
