package podapi

import (
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/podapi/authn"
	"github.com/bootlet/bootlet/podapi/authz"
)

// Authentication and authorization at the API's edge, as the apiserver
// does them with x509 client certificates: package authn says who the user
// is (the certificate's CN and O, or the unix socket's peer), package authz
// what the user may do; this file asks both for every request, writes the
// refusal as a Status and audits every write. Over the unix socket, root
// and the --socket-group are admins (SO_PEERCRED); nobody else gets in.

// authenticate returns the request's user: set by the unix socket, or from
// the verified client certificate.
func (s *Server) authenticate(req *http.Request) (user.Info, error) {
	if u := authn.UserFrom(req.Context()); u != nil {
		return u, nil
	}
	if s.PKI == nil {
		return nil, nil
	}
	return authn.ClientCertificate(req, s.PKI.ClientCAs)
}

// guard authenticates and authorizes a request. It returns the user and
// request info for the audit line, or writes the refusal.
func (s *Server) guard(w http.ResponseWriter, req *http.Request) (user.Info, *apirequest.RequestInfo, bool) {
	ri, err := authz.RequestInfo(req)
	if err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return nil, nil, false
	}
	u, err := s.authenticate(req)
	if err != nil || u == nil {
		msg := "Unauthorized"
		if err != nil {
			msg = err.Error()
		}
		writeError(w, apierrors.NewUnauthorized(msg))
		return nil, ri, false
	}
	attrs := authz.Attributes(u, ri)
	dec, reason, err := s.authz.Authorize(req.Context(), attrs)
	if dec != authorizer.DecisionAllow {
		if err != nil {
			reason = err.Error()
		}
		writeError(w, responsewriters.ForbiddenStatusError(attrs, reason))
		return u, ri, false
	}
	return u, ri, true
}

// audit logs one structured line per write: who, verb, object, result.
func audit(u user.Info, ri *apirequest.RequestInfo, code int) {
	if ri == nil || !authz.IsWrite(ri) {
		return
	}
	name, groups := "", []string(nil)
	if u != nil {
		name, groups = u.GetName(), u.GetGroups()
	}
	klog.InfoS("Audit", "user", name, "groups", groups, "verb", ri.Verb, "resource", ri.Resource, "subresource", ri.Subresource,
		"namespace", ri.Namespace, "name", ri.Name, "path", ri.Path, "code", code)
}

// ---- the unix socket

// firstOr is the first of groups, or def when there is none.
func firstOr(groups []string, def string) string {
	if len(groups) > 0 {
		return groups[0]
	}
	return def
}

// socketIdentity lets root and the socket group (socketGID) in as admins.
func (s *Server) socketIdentity(socketGID int, next http.Handler) http.Handler {
	admin := func() string { return firstOr(s.Authz.AdminGroups, authz.DefaultAdminGroup) }
	return peerIdentity(socketGID, admin, "only root and the --socket-group may use the socket", next)
}

// peerIdentity lets a unix socket's peer in when it is root or in
// socketGID (SO_PEERCRED), as user system:unix:uid=N in group(); anyone
// else gets a 403 that says refused.
func peerIdentity(socketGID int, group func() string, refused string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		name, ok := authn.SocketPeer(req.Context(), socketGID)
		if !ok {
			writeError(w, responsewriters.ForbiddenStatusError(authorizer.AttributesRecord{User: &user.DefaultInfo{Name: name},
				Verb: strings.ToLower(req.Method), Path: req.URL.Path}, refused))
			return
		}
		u := &user.DefaultInfo{Name: name, Groups: []string{group(), user.AllAuthenticated}}
		next.ServeHTTP(w, req.WithContext(authn.WithUser(req.Context(), u)))
	})
}
