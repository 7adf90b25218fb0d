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
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
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
	kinds    map[string]*kindOps
	metrics  *apiMetrics
	// PKI and TCPAddress are set when the daemon listens on TCP; the unix
	// socket then mints client certificates for it (/bootlet/v1/kubeconfig).
	PKI        *PKI
	TCPAddress string
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
	s := &Server{Registry: r, mux: http.NewServeMux()}
	s.initKinds()
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
	checks := append([]readyCheck{{"recovery", func() error {
		if !s.ready.Load() {
			return errors.New("recovery in progress")
		}
		return nil
	}}}, s.checks...)
	for _, c := range checks {
		if err := c.check(); err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.name, err)
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
	s.mux.ServeHTTP(rec, r)
	s.metrics.observe(r, rec.code, time.Since(start))
	klog.V(4).InfoS("HTTP", "verb", r.Method, "path", r.URL.Path, "code", rec.code, "latency", time.Since(start))
}

// ServeUnix listens on a unix socket with the given mode (0600 by default).
func (s *Server) ServeUnix(ctx context.Context, path string, mode os.FileMode, gid int) error {
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
	srv := &http.Server{Handler: s.localHandler(), ReadHeaderTimeout: 10 * time.Second}
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
			{Name: "events", SingularName: "event", Namespaced: true, Kind: "Event", Verbs: metav1.Verbs{"get", "list"}, ShortNames: []string{"ev"}},
			{Name: "namespaces", SingularName: "namespace", Namespaced: false, Kind: "Namespace", Verbs: metav1.Verbs{"get", "list"}, ShortNames: []string{"ns"}},
		},
	}
}

// route is a parsed /api/v1 path.
type route struct {
	namespace, resource, name, sub string
}

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
	q := req.URL.Query()
	dryRun := false
	for _, d := range q["dryRun"] {
		if d != "All" {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("unsupported dryRun value %q (only All)", d)))
			return
		}
		dryRun = true
	}
	var (
		obj  runtime.Object
		code = http.StatusOK
		err  error
	)
	tr, err := s.transformerFor(req)
	if err != nil {
		writeError(w, err)
		return
	}
	switch {
	case rt.sub == "" && rt.name != "" && req.Method == http.MethodPatch && s.kinds[rt.resource] != nil:
		obj, code, err = s.patchObject(w, req, rt, s.kinds[rt.resource], dryRun)
		obj = typedObj(obj)
		rt.resource = "" // handled
	}
	switch rt.resource {
	case "":
	case "pods":
		obj, code, err = s.servePods(w, req, rt, dryRun)
	case "secrets":
		obj, code, err = s.serveSecrets(w, req, rt, dryRun)
	case "configmaps":
		obj, code, err = s.serveConfigMaps(w, req, rt, dryRun)
	case "events":
		obj, err = s.serveEvents(w, req, rt)
	case "namespaces":
		obj, err = s.serveNamespaces(req, rt)
	default:
		err = apierrors.NewNotFound(schema.GroupResource{Resource: rt.resource}, rt.name)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if obj != nil {
		out, err := tr.transform(obj)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, code, out)
	}
}

func isWatch(req *http.Request) bool {
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

func methodNotAllowed(req *http.Request) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{Resource: req.URL.Path}, req.Method)
}

func deleteOptions(req *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	if req.ContentLength != 0 && req.Body != nil {
		body, err := io.ReadAll(io.LimitReader(req.Body, MaxBodyBytes))
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		if len(strings.TrimSpace(string(body))) > 0 {
			if err := json.Unmarshal(body, opts); err != nil {
				return nil, apierrors.NewBadRequest("invalid DeleteOptions: " + err.Error())
			}
		}
	}
	if g := req.URL.Query().Get("gracePeriodSeconds"); g != "" {
		var n int64
		if _, err := fmt.Sscan(g, &n); err != nil {
			return nil, apierrors.NewBadRequest("invalid gracePeriodSeconds")
		}
		opts.GracePeriodSeconds = &n
	}
	return opts, nil
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

func (s *Server) servePods(w http.ResponseWriter, req *http.Request, rt route, dryRun bool) (runtime.Object, int, error) {
	reg := s.Registry
	switch {
	case rt.name == "" && req.Method == http.MethodGet && isWatch(req):
		return nil, 0, s.serveWatch(w, req, rt, func() []runtime.Object {
			pods, _ := reg.listPodsLocked(rt.namespace)
			out := make([]runtime.Object, len(pods))
			for i := range pods {
				out[i] = &pods[i]
			}
			return out
		}, func() runtime.Object { return &v1.Pod{} })
	case rt.name == "" && req.Method == http.MethodGet:
		ls, fs, err := selectors(req)
		if err != nil {
			return nil, 0, err
		}
		pods, rv := reg.ListPods(rt.namespace)
		list := &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: []v1.Pod{}}
		for _, p := range pods {
			if ls.Matches(labels.Set(p.Labels)) && fs.Matches(podFields(&p)) {
				p.TypeMeta = metav1.TypeMeta{}
				list.Items = append(list.Items, p)
			}
		}
		return list, http.StatusOK, nil
	case rt.name == "" && req.Method == http.MethodPost:
		out, code, err := s.writeObject(w, req, rt, s.kinds["pods"], true, dryRun)
		return typedObj(out), code, err
	case rt.name == "":
		return nil, 0, methodNotAllowed(req)
	case rt.sub == "log" && req.Method == http.MethodGet:
		opts, err := podLogOptions(req)
		if err != nil {
			return nil, 0, err
		}
		if _, err := reg.GetPod(rt.namespace, rt.name); err != nil {
			return nil, 0, err
		}
		w.Header().Set("Content-Type", "text/plain")
		fw := &flushWriter{w: w}
		if err := reg.PodLogs(req.Context(), rt.namespace, rt.name, opts, fw); err != nil {
			if !fw.wrote {
				return nil, 0, err
			}
			klog.V(2).InfoS("Log stream ended", "pod", rt.namespace+"/"+rt.name, "err", err)
		}
		return nil, 0, nil
	case rt.sub == "status" && req.Method == http.MethodGet, rt.sub == "" && req.Method == http.MethodGet:
		p, err := reg.GetPod(rt.namespace, rt.name)
		return typed(p), http.StatusOK, err
	case rt.sub == "" && req.Method == http.MethodPut:
		out, code, err := s.writeObject(w, req, rt, s.kinds["pods"], false, dryRun)
		return typedObj(out), code, err
	case rt.sub == "" && req.Method == http.MethodDelete:
		opts, err := deleteOptions(req)
		if err != nil {
			return nil, 0, err
		}
		out, err := reg.DeletePod(rt.namespace, rt.name, opts, dryRun)
		return typed(out), http.StatusOK, err
	}
	return nil, 0, methodNotAllowed(req)
}

func podFields(p *v1.Pod) fields.Set {
	return fields.Set{
		"metadata.name": p.Name, "metadata.namespace": p.Namespace, "spec.nodeName": p.Spec.NodeName,
		"spec.restartPolicy": string(p.Spec.RestartPolicy), "status.phase": string(p.Status.Phase), "status.podIP": p.Status.PodIP,
	}
}

func podLogOptions(req *http.Request) (*v1.PodLogOptions, error) {
	opts := &v1.PodLogOptions{}
	// client-go's scheme has no url.Values conversions for core/v1 query
	// options; legacyscheme carries the generated ones, as the apiserver's.
	if err := legacyscheme.ParameterCodec.DecodeParameters(req.URL.Query(), v1.SchemeGroupVersion, opts); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return opts, nil
}

type flushWriter struct {
	w     http.ResponseWriter
	wrote bool
}

func (f *flushWriter) Write(p []byte) (int, error) {
	if !f.wrote {
		f.wrote = true
		f.w.WriteHeader(http.StatusOK)
	}
	n, err := f.w.Write(p)
	if fl, ok := f.w.(http.Flusher); ok {
		fl.Flush()
	}
	return n, err
}

func (s *Server) serveSecrets(w http.ResponseWriter, req *http.Request, rt route, dryRun bool) (runtime.Object, int, error) {
	reg := s.Registry
	switch {
	case rt.sub != "":
		return nil, 0, apierrors.NewNotFound(secretsGR, rt.name+"/"+rt.sub)
	case rt.name == "" && req.Method == http.MethodGet && isWatch(req):
		return nil, 0, s.serveWatch(w, req, rt, func() []runtime.Object {
			items, _ := reg.listSecretsLocked(rt.namespace)
			out := make([]runtime.Object, len(items))
			for i := range items {
				out[i] = &items[i]
			}
			return out
		}, func() runtime.Object { return &v1.Secret{} })
	case rt.name == "" && req.Method == http.MethodGet:
		ls, fs, err := selectors(req)
		if err != nil {
			return nil, 0, err
		}
		items, rv := reg.ListSecrets(rt.namespace)
		list := &v1.SecretList{TypeMeta: metav1.TypeMeta{Kind: "SecretList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: []v1.Secret{}}
		for _, it := range items {
			if ls.Matches(labels.Set(it.Labels)) && fs.Matches(objectFields(&it)) {
				list.Items = append(list.Items, it)
			}
		}
		return list, http.StatusOK, nil
	case req.Method == http.MethodPost && rt.name == "", req.Method == http.MethodPut && rt.name != "":
		out, code, err := s.writeObject(w, req, rt, s.kinds["secrets"], req.Method == http.MethodPost, dryRun)
		return typedObj(out), code, err
	case rt.name != "" && req.Method == http.MethodGet:
		o, err := reg.GetSecret(rt.namespace, rt.name)
		return typedSecret(o), http.StatusOK, err
	case rt.name != "" && req.Method == http.MethodDelete:
		opts, err := deleteOptions(req)
		if err != nil {
			return nil, 0, err
		}
		o, err := reg.DeleteSecret(rt.namespace, rt.name, opts, dryRun)
		return typedSecret(o), http.StatusOK, err
	}
	return nil, 0, methodNotAllowed(req)
}

func (s *Server) serveConfigMaps(w http.ResponseWriter, req *http.Request, rt route, dryRun bool) (runtime.Object, int, error) {
	reg := s.Registry
	switch {
	case rt.sub != "":
		return nil, 0, apierrors.NewNotFound(configMapsGR, rt.name+"/"+rt.sub)
	case rt.name == "" && req.Method == http.MethodGet && isWatch(req):
		return nil, 0, s.serveWatch(w, req, rt, func() []runtime.Object {
			items, _ := reg.listConfigMapsLocked(rt.namespace)
			out := make([]runtime.Object, len(items))
			for i := range items {
				out[i] = &items[i]
			}
			return out
		}, func() runtime.Object { return &v1.ConfigMap{} })
	case rt.name == "" && req.Method == http.MethodGet:
		ls, fs, err := selectors(req)
		if err != nil {
			return nil, 0, err
		}
		items, rv := reg.ListConfigMaps(rt.namespace)
		list := &v1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: []v1.ConfigMap{}}
		for _, it := range items {
			if ls.Matches(labels.Set(it.Labels)) && fs.Matches(objectFields(&it)) {
				list.Items = append(list.Items, it)
			}
		}
		return list, http.StatusOK, nil
	case req.Method == http.MethodPost && rt.name == "", req.Method == http.MethodPut && rt.name != "":
		out, code, err := s.writeObject(w, req, rt, s.kinds["configmaps"], req.Method == http.MethodPost, dryRun)
		return typedObj(out), code, err
	case rt.name != "" && req.Method == http.MethodGet:
		o, err := reg.GetConfigMap(rt.namespace, rt.name)
		return typedConfigMap(o), http.StatusOK, err
	case rt.name != "" && req.Method == http.MethodDelete:
		opts, err := deleteOptions(req)
		if err != nil {
			return nil, 0, err
		}
		o, err := reg.DeleteConfigMap(rt.namespace, rt.name, opts, dryRun)
		return typedConfigMap(o), http.StatusOK, err
	}
	return nil, 0, methodNotAllowed(req)
}

func (s *Server) serveEvents(w http.ResponseWriter, req *http.Request, rt route) (runtime.Object, error) {
	if req.Method != http.MethodGet {
		return nil, methodNotAllowed(req)
	}
	ls, fs, err := selectors(req)
	if err != nil {
		return nil, err
	}
	list := &v1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}, Items: []v1.Event{}}
	for _, e := range s.Registry.Events.List(rt.namespace) {
		if rt.name != "" {
			if e.Name == rt.name {
				e.TypeMeta = metav1.TypeMeta{Kind: "Event", APIVersion: "v1"}
				return &e, nil
			}
			continue
		}
		if ls.Matches(labels.Set(e.Labels)) && fs.Matches(eventFields(&e)) {
			list.Items = append(list.Items, e)
		}
	}
	if rt.name != "" {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "events"}, rt.name)
	}
	if isWatch(req) {
		// Events have no resourceVersion history: a watch gets the current
		// ones and then ends, and the client lists again.
		return nil, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "events"}, "watch")
	}
	return list, nil
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
				items[i].TypeMeta = metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}
				return &items[i], nil
			}
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, rt.name)
	}
	return &v1.NamespaceList{TypeMeta: metav1.TypeMeta{Kind: "NamespaceList", APIVersion: "v1"}, Items: items}, nil
}

func typedObj(o runtime.Object) runtime.Object {
	if o == nil {
		return nil
	}
	setTypeMeta(o)
	return o
}

func typed(p *v1.Pod) runtime.Object {
	if p == nil {
		return nil
	}
	p.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	return p
}

func typedSecret(o *v1.Secret) runtime.Object {
	if o == nil {
		return nil
	}
	o.TypeMeta = metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"}
	return o
}

func typedConfigMap(o *v1.ConfigMap) runtime.Object {
	if o == nil {
		return nil
	}
	o.TypeMeta = metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"}
	return o
}

func writeJSON(w http.ResponseWriter, code int, obj interface{}) {
	w.Header().Set("Content-Type", "application/json")
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
