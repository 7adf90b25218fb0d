package podapi

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"
)

// Authentication and authorization, as the apiserver does them with x509
// client certificates: the certificate's CN is the user and its O fields
// are the groups. The admin group may do everything; the reader group may
// get, list and watch everything but Secrets, and read logs; anyone else
// is refused with 403. Over the unix socket, root and the --socket-group
// are admins (SO_PEERCRED); nobody else gets in.

// Default groups.
const (
	DefaultAdminGroup  = user.SystemPrivilegedGroup // system:masters
	DefaultReaderGroup = "bootlet:readers"
)

// AuthzConfig names the groups.
type AuthzConfig struct {
	AdminGroups  []string
	ReaderGroups []string
}

var requestInfoFactory = &apirequest.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// streamingSubresources run commands or open ports in a pod: writes, even
// as GET (websocket upgrades are GETs), as the apiserver's RBAC treats them
// (pods/exec needs create).
var streamingSubresources = sets.NewString("exec", "attach", "portforward", "proxy")

// isWrite reports whether a request changes something (and is audited).
func isWrite(ri *apirequest.RequestInfo) bool {
	if !ri.IsResourceRequest {
		return ri.Verb != "get" && ri.Verb != "head"
	}
	if streamingSubresources.Has(ri.Subresource) {
		return true
	}
	switch ri.Verb {
	case "get", "list", "watch":
		return false
	}
	return true
}

// publicPaths are what every authenticated user may read, as the
// apiserver's system:discovery and system:public-info-viewer roles allow.
func publicPath(p string) bool {
	switch p {
	case "/healthz", "/livez", "/readyz", "/version", "/api", "/apis", "/openapi/v2", "/openapi/v3":
		return true
	}
	return strings.HasPrefix(p, "/api/") && !strings.Contains(strings.TrimPrefix(p, "/api/"), "/") ||
		strings.HasPrefix(p, "/openapi/v3/")
}

// readerAuthorizer allows the reader groups to read.
type readerAuthorizer struct{ groups sets.Set[string] }

func (r readerAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetUser() == nil || !r.groups.HasAny(a.GetUser().GetGroups()...) {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if !a.IsResourceRequest() {
		if a.GetVerb() == "get" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "", nil
	}
	if !a.IsReadOnly() || streamingSubresources.Has(a.GetSubresource()) {
		return authorizer.DecisionNoOpinion, "readers may only get, list and watch", nil
	}
	if a.GetResource() == "secrets" {
		return authorizer.DecisionNoOpinion, "readers may not read Secret data", nil
	}
	switch a.GetSubresource() {
	case "", "log", "status":
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// publicAuthorizer allows discovery, health and version to everyone
// authenticated.
type publicAuthorizer struct{}

func (publicAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if !a.IsResourceRequest() && a.GetVerb() == "get" && publicPath(a.GetPath()) {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// privilegedGroups allows everything to a user in one of the groups. It is
// authorizerfactory.NewPrivilegedGroups (k8s.io/apiserver v0.36.3,
// pkg/authorization/authorizerfactory/builtin.go), copied because that
// package also holds the CEL-based authorizers: linking it brings cel-go and
// about 75 packages into the daemon (docs/architecture.md, Footprint).
// auth_parity_test.go checks it decides as the original does.
type privilegedGroups []string

func (g privilegedGroups) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetUser() == nil {
		//lint:ignore ST1005 the original's message, kept identical
		return authorizer.DecisionNoOpinion, "Error", errors.New("no user on request.")
	}
	for _, have := range a.GetUser().GetGroups() {
		for _, want := range g {
			if want == have {
				return authorizer.DecisionAllow, "", nil
			}
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func newAuthorizer(c AuthzConfig) authorizer.Authorizer {
	return union.New(privilegedGroups(c.AdminGroups), readerAuthorizer{sets.New(c.ReaderGroups...)}, publicAuthorizer{})
}

func attributesFor(u user.Info, ri *apirequest.RequestInfo) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{
		User: u, Verb: ri.Verb, Namespace: ri.Namespace, APIGroup: ri.APIGroup, APIVersion: ri.APIVersion,
		Resource: ri.Resource, Subresource: ri.Subresource, Name: ri.Name,
		ResourceRequest: ri.IsResourceRequest, Path: ri.Path,
	}
}

type userKey struct{}

// WithUser returns a context carrying an authenticated user (the unix
// socket's peer); ServeHTTP authorizes it.
func WithUser(ctx context.Context, u user.Info) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// authenticate returns the request's user: set by the unix socket, or from
// the verified client certificate.
func (s *Server) authenticate(req *http.Request) (user.Info, error) {
	if u, ok := req.Context().Value(userKey{}).(user.Info); ok {
		return u, nil
	}
	if req.TLS == nil || s.PKI == nil {
		return nil, nil
	}
	a := x509request.New(x509.VerifyOptions{Roots: s.PKI.ClientCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, x509request.CommonNameUserConversion)
	resp, ok, err := a.AuthenticateRequest(req)
	if err != nil || !ok {
		return nil, err
	}
	return resp.User, nil
}

// guard authenticates and authorizes a request. It returns the user and
// request info for the audit line, or writes the refusal.
func (s *Server) guard(w http.ResponseWriter, req *http.Request) (user.Info, *apirequest.RequestInfo, bool) {
	ri, err := requestInfoFactory.NewRequestInfo(req)
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
	attrs := attributesFor(u, ri)
	if streamingSubresources.Has(ri.Subresource) {
		attrs.Verb = "create" // a websocket upgrade is a GET, but runs a command
	}
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
	if ri == nil || !isWrite(ri) {
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

type peerKey struct{}

// peerCred records the socket peer's credentials (SO_PEERCRED) on its
// connection's context.
func peerCred(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	_ = raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if err != nil || cred == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, cred)
}

// socketPeerAllowed is the unix socket's rule: root, or a member (primary
// or supplementary) of the socket group (gid < 0: none).
func socketPeerAllowed(uid, primaryGID uint32, groups []uint32, socketGID int) bool {
	if uid == 0 {
		return true
	}
	if socketGID < 0 {
		return false
	}
	if primaryGID == uint32(socketGID) {
		return true
	}
	for _, g := range groups {
		if g == uint32(socketGID) {
			return true
		}
	}
	return false
}

// supplementaryGroups reads a process's groups from /proc.
func supplementaryGroups(pid int32) []uint32 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil
	}
	var out []uint32
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
			for _, f := range strings.Fields(rest) {
				if n, err := strconv.ParseUint(f, 10, 32); err == nil {
					out = append(out, uint32(n))
				}
			}
		}
	}
	return out
}

// firstOr is the first of groups, or def when there is none.
func firstOr(groups []string, def string) string {
	if len(groups) > 0 {
		return groups[0]
	}
	return def
}

// socketIdentity lets root and the socket group (socketGID) in as admins.
func (s *Server) socketIdentity(socketGID int, next http.Handler) http.Handler {
	admin := func() string { return firstOr(s.Authz.AdminGroups, DefaultAdminGroup) }
	return peerIdentity(socketGID, admin, "only root and the --socket-group may use the socket", next)
}

// peerIdentity lets a unix socket's peer in when it is root or in
// socketGID (SO_PEERCRED), as user system:unix:uid=N in group(); anyone
// else gets a 403 that says refused.
func peerIdentity(socketGID int, group func() string, refused string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		cred, _ := req.Context().Value(peerKey{}).(*unix.Ucred)
		name := "system:anonymous"
		if cred != nil {
			name = fmt.Sprintf("system:unix:uid=%d", cred.Uid)
		}
		if cred == nil || !socketPeerAllowed(cred.Uid, cred.Gid, supplementaryGroups(cred.Pid), socketGID) {
			writeError(w, responsewriters.ForbiddenStatusError(authorizer.AttributesRecord{User: &user.DefaultInfo{Name: name},
				Verb: strings.ToLower(req.Method), Path: req.URL.Path}, refused))
			return
		}
		u := &user.DefaultInfo{Name: name, Groups: []string{group(), user.AllAuthenticated}}
		next.ServeHTTP(w, req.WithContext(WithUser(req.Context(), u)))
	})
}
