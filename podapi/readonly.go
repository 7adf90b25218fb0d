package podapi

import (
	"context"
	"net/http"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"

	"github.com/bootlet/bootlet/podapi/authn"
	"github.com/bootlet/bootlet/podapi/authz"
)

// The read-only socket (--read-only-socket) is for local monitoring: its
// peers may get, list and watch (Secrets excepted) and read logs, as the
// reader group may over TLS. Nothing else is served there: no write, no
// exec, attach or port-forward, no minting of credentials. Its group is
// not root-equivalent, unlike the main socket's.

// ServeReadOnlyUnix serves the read-only API on a unix socket owned by
// root:gid with mode. Root and members of gid get in, as readers.
func (s *Server) ServeReadOnlyUnix(ctx context.Context, path string, mode os.FileMode, gid int) error {
	return serveUnix(ctx, path, mode, gid, s.readOnlySocketIdentity(gid, readOnly(s)))
}

// readOnlyRefusal is the reason in the 403 Status for anything but a read.
const readOnlyRefusal = "the read-only socket serves only get, list, watch and logs"

// readOnly refuses every request that is not a read of the API with a
// Forbidden Status, whatever the authorizer would decide: the socket's
// promise does not depend on how the reader groups are configured.
func readOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ri, err := authz.RequestInfo(req)
		if err != nil {
			writeError(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		if authz.IsWrite(ri) || strings.HasPrefix(req.URL.Path, "/bootlet/") || (ri.IsResourceRequest && ri.Subresource != "" && ri.Subresource != "log" && ri.Subresource != "status") {
			u := authn.UserFrom(req.Context())
			writeError(w, responsewriters.ForbiddenStatusError(authz.Attributes(u, ri), readOnlyRefusal))
			audit(u, ri, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// readOnlySocketIdentity lets root and members of socketGID in as readers:
// the first of the configured reader groups.
func (s *Server) readOnlySocketIdentity(socketGID int, next http.Handler) http.Handler {
	reader := func() string { return firstOr(s.Authz.ReaderGroups, authz.DefaultReaderGroup) }
	return peerIdentity(socketGID, reader, "only root and the --read-only-socket-group may use the read-only socket", next)
}
