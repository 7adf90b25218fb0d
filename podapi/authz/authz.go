package authz

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// Default groups.
const (
	DefaultAdminGroup  = user.SystemPrivilegedGroup // system:masters
	DefaultReaderGroup = "bootlet:readers"
)

// Config names the groups.
type Config struct {
	AdminGroups  []string
	ReaderGroups []string
}

var requestInfoFactory = &apirequest.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// RequestInfo reads req as the apiserver does for authorization: verb,
// resource, subresource, namespace and name.
func RequestInfo(req *http.Request) (*apirequest.RequestInfo, error) {
	return requestInfoFactory.NewRequestInfo(req)
}

// streamingSubresources run commands or open ports in a pod: writes, even
// as GET (websocket upgrades are GETs), as the apiserver's RBAC treats them
// (pods/exec needs create).
var streamingSubresources = sets.NewString("exec", "attach", "portforward", "proxy")

// IsStreaming reports whether a subresource runs a command or opens a port
// in a pod (exec, attach, portforward, proxy).
func IsStreaming(subresource string) bool { return streamingSubresources.Has(subresource) }

// IsWrite reports whether a request changes something (and is audited).
func IsWrite(ri *apirequest.RequestInfo) bool {
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

// Attributes is what the authorizer decides on for u's request ri. A
// streaming subresource is asked as create: a websocket upgrade is a GET,
// but runs a command.
func Attributes(u user.Info, ri *apirequest.RequestInfo) authorizer.AttributesRecord {
	a := authorizer.AttributesRecord{
		User: u, Verb: ri.Verb, Namespace: ri.Namespace, APIGroup: ri.APIGroup, APIVersion: ri.APIVersion,
		Resource: ri.Resource, Subresource: ri.Subresource, Name: ri.Name,
		ResourceRequest: ri.IsResourceRequest, Path: ri.Path,
	}
	if streamingSubresources.Has(ri.Subresource) {
		a.Verb = "create"
	}
	return a
}

// New is the authorizer of c: admins, then readers, then the public paths.
func New(c Config) authorizer.Authorizer {
	return union.New(privilegedGroups(c.AdminGroups), readerAuthorizer{sets.New(c.ReaderGroups...)}, publicAuthorizer{})
}

// publicPath: what every authenticated user may read, as the apiserver's
// system:discovery and system:public-info-viewer roles allow.
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
// about 75 packages into the daemon (docs/design/architecture.md, "Footprint").
// parity_test.go checks it decides as the original does.
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
