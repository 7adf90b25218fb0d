package podapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/podapi/apitls"
	"github.com/bootlet/bootlet/podapi/authn"
	"github.com/bootlet/bootlet/podapi/authz"
)

// MaxBodyBytes is the apiserver's request body limit (3 MiB).
const MaxBodyBytes = 3 << 20

// Version is what /version reports.
var Version = version.Info{Major: "1", Minor: "36", GitVersion: "v1.36.3-bootlet", Platform: "linux/amd64"}

// Server serves the API.
type Server struct {
	Registry *Registry
	ready    atomic.Bool
	mux      *http.ServeMux
	checks   []readyCheck
	metrics  *apiMetrics
	// subresources maps "resource/subresource" to its handler; see
	// dispatch, the one place requests are routed.
	subresources map[string]subresourceHandler
	// PKI and TCPAddress are set when the daemon listens on TCP; the unix
	// socket then mints client certificates for it (/bootlet/v1/kubeconfig).
	PKI        *apitls.PKI
	TCPAddress string
	// MaxMintValidity caps minted certificates (mint.go; 0: the default).
	MaxMintValidity time.Duration
	// EffectiveConfig is the daemon's configuration as it runs (a
	// BootletConfiguration file, every field), served on the unix socket at
	// /bootlet/v1/config so that the CLI on the node takes its paths from
	// it instead of assuming the defaults (effectiveconfig.go).
	EffectiveConfig []byte
	// Authz names the admin and reader groups; set it with SetAuthz.
	Authz authz.Config
	authz authorizer.Authorizer
	// nodeStatus adds the daemon's view to the Node (SetNodeStatus, node.go).
	nodeStatus func(*v1.Node)
	limiter    *limiter // limits.go
	// podSecurity is the opt-in Pod Security admission (podsecurity.go).
	podSecurity *podSecurity
}

// SetAuthz sets the admin and reader groups (before serving).
func (s *Server) SetAuthz(c authz.Config) {
	s.Authz = c
	s.authz = authz.New(c)
}

type readyCheck struct {
	name  string
	check func() error
}

// AddReadyCheck adds a condition /readyz reports (e.g. the runtime's health).
// Call before serving.
func (s *Server) AddReadyCheck(name string, check func() error) {
	s.checks = append(s.checks, readyCheck{name, check})
}

// NewServer builds the handler tree.
func NewServer(r *Registry) *Server {
	s := &Server{Registry: r, mux: http.NewServeMux(), limiter: newLimiter(DefaultLimits)}
	s.SetAuthz(authz.Config{AdminGroups: []string{authz.DefaultAdminGroup}, ReaderGroups: []string{authz.DefaultReaderGroup}})
	s.subresources = map[string]subresourceHandler{
		"pods/log":    s.serveLog,
		"pods/status": s.serveStatus,
	}
	s.metrics = newAPIMetrics(r)
	s.mux.Handle("/metrics", s.metrics.handler())
	s.installDiscovery()
	s.mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	s.mux.HandleFunc("/readyz", s.serveReadyz)
	s.mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, Version) })
	s.mux.HandleFunc("/api/v1/", s.serveV1)
	return s
}

// serveReadyz answers like the apiserver's /readyz: "ok", or 503 with one
// [+]/[-] line per check; ?verbose lists the checks when healthy too.
func (s *Server) serveReadyz(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	failed := false
	for _, c := range s.readyChecks() {
		if c.err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.name, c.err)
		} else {
			fmt.Fprintf(&b, "[+]%s ok\n", c.name)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	switch {
	case failed:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, b.String()+"readyz check failed\n")
	case r.URL.Query().Has("verbose"):
		_, _ = io.WriteString(w, b.String()+"readyz check passed\n")
	default:
		_, _ = io.WriteString(w, "ok")
	}
}

type readyResult struct {
	name string
	err  error
}

// readyChecks runs /readyz's checks: recovery first, then those added.
func (s *Server) readyChecks() []readyResult {
	checks := append([]readyCheck{{"recovery", func() error {
		if !s.ready.Load() {
			return errors.New("recovery in progress")
		}
		return nil
	}}}, s.checks...)
	out := make([]readyResult, len(checks))
	for i, c := range checks {
		out[i] = readyResult{c.name, c.check()}
	}
	return out
}

// failedReadyChecks are the failing checks as "name: error".
func (s *Server) failedReadyChecks() []string {
	var out []string
	for _, c := range s.readyChecks() {
		if c.err != nil {
			out = append(out, c.name+": "+c.err.Error())
		}
	}
	return out
}

// SetReady flips /readyz once recovery is done.
func (s *Server) SetReady() { s.ready.Store(true) }

// ServeHTTP implements http.Handler; a panic becomes a 500 Status, never a
// dead daemon.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if p := recover(); p != nil {
			klog.ErrorS(fmt.Errorf("%v", p), "Panic serving request", "path", r.URL.Path)
			writeError(w, apierrors.NewInternalError(fmt.Errorf("internal error")))
		}
	}()
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
	u, ri, ok := s.guard(rec, r)
	if ok {
		if r, release, ok := s.admit(w, rec, r, u, ri); ok {
			func() {
				defer release()
				// Handlers that decide by user (Pod Security admission) find it here.
				s.mux.ServeHTTP(rec, r.WithContext(authn.WithUser(r.Context(), u)))
			}()
		}
	}
	audit(u, ri, rec.code)
	s.metrics.observe(r, rec.code, time.Since(start))
	klog.V(4).InfoS("HTTP", "verb", r.Method, "path", r.URL.Path, "code", rec.code, "latency", time.Since(start))
}

// ServeUnix listens on a unix socket with the given mode (0600 by default).
// Root and members of gid are admins: the socket's group is root-equivalent
// (it may run privileged pods and mint admin credentials).
func (s *Server) ServeUnix(ctx context.Context, path string, mode os.FileMode, gid int) error {
	return serveUnix(ctx, path, mode, gid, s.socketIdentity(gid, s.localHandler()))
}

// serveUnix serves handler on a unix socket owned by root:gid with mode,
// recording each connection's peer credentials.
func serveUnix(ctx context.Context, path string, mode os.FileMode, gid int, handler http.Handler) error {
	_ = os.Remove(path)
	if err := os.MkdirAll(dirOf(path), 0o755); err != nil {
		return err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	if gid >= 0 {
		if err := os.Chown(path, 0, gid); err != nil {
			return err
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: ReadHeaderTimeout, IdleTimeout: IdleTimeout, ConnContext: authn.PeerCred}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func dirOf(p string) string {
	if i := strings.LastIndex(p, "/"); i > 0 {
		return p[:i]
	}
	return "."
}

func resourceList() *metav1.APIResourceList {
	rw := metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}
	return &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{
			{Name: "pods", SingularName: "pod", Namespaced: true, Kind: "Pod", Verbs: rw, ShortNames: []string{"po"}, Categories: []string{"all"}},
			{Name: "pods/log", SingularName: "pod", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get"}},
			{Name: "pods/attach", SingularName: "pod", Namespaced: true, Kind: "PodAttachOptions", Verbs: metav1.Verbs{"create", "get"}},
			{Name: "pods/exec", SingularName: "pod", Namespaced: true, Kind: "PodExecOptions", Verbs: metav1.Verbs{"create", "get"}},
			{Name: "pods/portforward", SingularName: "pod", Namespaced: true, Kind: "PodPortForwardOptions", Verbs: metav1.Verbs{"create", "get"}},
			{Name: "pods/status", SingularName: "pod", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get"}},
			{Name: "secrets", SingularName: "secret", Namespaced: true, Kind: "Secret", Verbs: rw},
			{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap", Verbs: rw, ShortNames: []string{"cm"}},
			{Name: "events", SingularName: "event", Namespaced: true, Kind: "Event", Verbs: metav1.Verbs{"get", "list", "watch"}, ShortNames: []string{"ev"}},
			{Name: "namespaces", SingularName: "namespace", Namespaced: false, Kind: "Namespace", Verbs: metav1.Verbs{"get", "list"}, ShortNames: []string{"ns"}},
			{Name: "nodes", SingularName: "node", Namespaced: false, Kind: "Node", Verbs: metav1.Verbs{"get", "list"}, ShortNames: []string{"no"}},
		},
	}
}

// route is a parsed /api/v1 path.
type route struct {
	namespace, resource, name, sub string
}

// parseRoute splits an /api/v1 path (the metrics labels use it too).
func parseRoute(p string) (route, bool) {
	parts := strings.Split(strings.Trim(strings.TrimPrefix(p, "/api/v1"), "/"), "/")
	var r route
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) > 2 {
		r.namespace = parts[1]
		parts = parts[2:]
	} else if len(parts) >= 1 && parts[0] == "namespaces" {
		r.resource = "namespaces"
		if len(parts) == 2 {
			r.name = parts[1]
		}
		return r, len(parts) <= 2
	}
	if len(parts) == 0 || len(parts) > 3 {
		return r, false
	}
	r.resource = parts[0]
	if len(parts) > 1 {
		r.name = parts[1]
	}
	if len(parts) > 2 {
		r.sub = parts[2]
	}
	return r, true
}

// subresourceHandler serves one "resource/subresource" (pods/log, ...).
type subresourceHandler func(w http.ResponseWriter, req *http.Request, rt route) (runtime.Object, int, error)

func (s *Server) serveV1(w http.ResponseWriter, req *http.Request) {
	rt, ok := parseRoute(req.URL.Path)
	if !ok {
		writeError(w, apierrors.NewNotFound(schema.GroupResource{}, req.URL.Path))
		return
	}
	if IsStreamSubresource(rt.resource, rt.sub) { // exec, attach, portforward (stream.go)
		s.serveStream(w, req, rt)
		return
	}
	dryRun := false
	for _, d := range req.URL.Query()["dryRun"] {
		if d != "All" {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("unsupported dryRun value %q (only All)", d)))
			return
		}
		dryRun = true
	}
	tr, err := s.transformerFor(req)
	if err != nil {
		writeError(w, err)
		return
	}
	obj, code, err := s.dispatch(w, req, rt, dryRun)
	if err != nil {
		writeError(w, err)
		return
	}
	if obj != nil {
		setTypeMeta(obj)
		out, err := tr.transform(obj)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, code, out)
	}
}

// dispatch is the one place a request finds its handler: subresources by
// "resource/subresource" in s.subresources (pods/log, pods/status, and the
// streaming ones), then one handler per verb (get.go, list.go, watch.go,
// create.go, update.go, patch.go, delete.go) for every kind the registry
// holds.
func (s *Server) dispatch(w http.ResponseWriter, req *http.Request, rt route, dryRun bool) (runtime.Object, int, error) {
	if rt.resource == "namespaces" {
		obj, err := s.serveNamespaces(req, rt)
		return obj, http.StatusOK, err
	}
	if rt.resource == "nodes" && rt.namespace == "" {
		obj, err := s.serveNodes(req, rt)
		return obj, http.StatusOK, err
	}
	res, ok := s.Registry.resources[rt.resource]
	if !ok {
		return nil, 0, apierrors.NewNotFound(schema.GroupResource{Resource: rt.resource}, rt.name)
	}
	if rt.sub != "" {
		h, ok := s.subresources[rt.resource+"/"+rt.sub]
		if !ok || rt.name == "" {
			return nil, 0, apierrors.NewNotFound(schema.GroupResource{Resource: rt.resource}, rt.name+"/"+rt.sub)
		}
		return h(w, req, rt)
	}
	write := req.Method != http.MethodGet
	if write && !res.isWritable() {
		return nil, 0, methodNotAllowed(req)
	}
	switch {
	case req.Method == http.MethodGet && rt.name == "" && isWatch(req):
		return nil, 0, s.serveWatch(w, req, rt, res)
	case req.Method == http.MethodGet && rt.name == "":
		return s.serveList(req, rt, res)
	case req.Method == http.MethodGet:
		return s.serveGet(rt, res)
	case req.Method == http.MethodPost && rt.name == "":
		return s.serveCreate(w, req, rt, res, dryRun)
	case req.Method == http.MethodPut && rt.name != "":
		return s.serveUpdate(w, req, rt, res, dryRun)
	case req.Method == http.MethodPatch && rt.name != "":
		return s.servePatch(w, req, rt, res, dryRun)
	case req.Method == http.MethodDelete && rt.name != "":
		return s.serveDelete(req, rt, res, dryRun)
	}
	return nil, 0, methodNotAllowed(req)
}

func isWatch(req *http.Request) bool {
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

func methodNotAllowed(req *http.Request) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{Resource: req.URL.Path}, req.Method)
}

func selectors(req *http.Request) (labels.Selector, fields.Selector, error) {
	q := req.URL.Query()
	ls, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	return ls, fs, nil
}

func (s *Server) serveNamespaces(req *http.Request, rt route) (runtime.Object, error) {
	if req.Method != http.MethodGet {
		return nil, methodNotAllowed(req)
	}
	var items []v1.Namespace
	for _, ns := range s.Registry.Namespaces() {
		items = append(items, v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}, Status: v1.NamespaceStatus{Phase: v1.NamespaceActive}})
	}
	if rt.name != "" {
		for i := range items {
			if items[i].Name == rt.name {
				return &items[i], nil
			}
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, rt.name)
	}
	return &v1.NamespaceList{Items: items}, nil
}

func writeJSON(w http.ResponseWriter, code int, obj interface{}) {
	w.Header().Set("Content-Type", "application/json")
	writeJSONBody(w, code, obj)
}

// writeJSONBody writes obj as JSON under the Content-Type already set.
func writeJSONBody(w http.ResponseWriter, code int, obj interface{}) {
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(obj); err != nil {
		utilruntime.HandleError(err)
	}
}

// writeError writes a metav1.Status shaped like the apiserver's.
func writeError(w http.ResponseWriter, err error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	st.Status = metav1.StatusFailure
	code := int(st.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, &st)
}

func unsupportedMediaType(ct string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got %q)", ct),
	}}
}
