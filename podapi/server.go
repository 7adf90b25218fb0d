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
	"k8s.io/client-go/kubernetes/scheme"
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
	s.mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	s.mux.HandleFunc("/readyz", s.serveReadyz)
	s.mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, Version) })
	s.mux.HandleFunc("/api", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: ""}}})
	})
	s.mux.HandleFunc("/apis", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}})
	})
	s.mux.HandleFunc("/api/v1", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, resourceList()) })
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
	s.mux.ServeHTTP(w, r)
	klog.V(4).InfoS("HTTP", "verb", r.Method, "path", r.URL.Path, "latency", time.Since(start))
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
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
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
	rw := metav1.Verbs{"create", "delete", "get", "list", "update"}
	return &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{
			{Name: "pods", SingularName: "pod", Namespaced: true, Kind: "Pod", Verbs: rw, ShortNames: []string{"po"}, Categories: []string{"all"}},
			{Name: "pods/log", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get"}},
			{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get"}},
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
	switch rt.resource {
	case "pods":
		obj, code, err = s.servePods(w, req, rt, dryRun)
	case "secrets":
		obj, code, err = s.serveSecrets(req, rt, dryRun)
	case "configmaps":
		obj, code, err = s.serveConfigMaps(req, rt, dryRun)
	case "events":
		obj, err = s.serveEvents(req, rt)
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
		writeJSON(w, code, obj)
	}
}

func methodNotAllowed(req *http.Request) error {
	return apierrors.NewMethodNotSupported(schema.GroupResource{Resource: req.URL.Path}, req.Method)
}

// decode reads a body into into, with the apiserver's size limit, content
// type check and kind/version check.
func decode(req *http.Request, into runtime.Object, gvk schema.GroupVersionKind) error {
	ct := req.Header.Get("Content-Type")
	if i := strings.Index(ct, ";"); i >= 0 {
		ct = ct[:i]
	}
	switch strings.TrimSpace(ct) {
	case "", "application/json", "application/yaml", "application/vnd.kubernetes.protobuf":
	default:
		return unsupportedMediaType(ct)
	}
	if strings.TrimSpace(ct) == "application/vnd.kubernetes.protobuf" {
		return unsupportedMediaType(ct)
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, MaxBodyBytes+1))
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if len(body) > MaxBodyBytes {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", MaxBodyBytes))
	}
	got, gotGVK, err := scheme.Codecs.UniversalDeserializer().Decode(body, &gvk, into)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("the body of the request could not be decoded: %v", err))
	}
	if *gotGVK != gvk || got != into {
		return apierrors.NewBadRequest(fmt.Sprintf("the body of the request was in an unknown format or is not a %s (got %s)", gvk.Kind, gotGVK.String()))
	}
	return nil
}

// checkNamespace defaults the object's namespace to the URL's and rejects a
// mismatch, as the apiserver does.
func checkNamespace(m *metav1.ObjectMeta, urlNS string) error {
	if m.Namespace == "" {
		m.Namespace = urlNS
	}
	if m.Namespace != urlNS {
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
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
		p := &v1.Pod{}
		if err := decode(req, p, v1.SchemeGroupVersion.WithKind("Pod")); err != nil {
			return nil, 0, err
		}
		if err := checkNamespace(&p.ObjectMeta, rt.namespace); err != nil {
			return nil, 0, err
		}
		out, err := reg.CreatePod(p, dryRun)
		return typed(out), http.StatusCreated, err
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
		p := &v1.Pod{}
		if err := decode(req, p, v1.SchemeGroupVersion.WithKind("Pod")); err != nil {
			return nil, 0, err
		}
		if err := checkNamespace(&p.ObjectMeta, rt.namespace); err != nil {
			return nil, 0, err
		}
		if p.Name != rt.name {
			return nil, 0, apierrors.NewBadRequest("the name of the object does not match the name on the URL")
		}
		out, err := reg.UpdatePod(p, dryRun)
		return typed(out), http.StatusOK, err
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

func (s *Server) serveSecrets(req *http.Request, rt route, dryRun bool) (runtime.Object, int, error) {
	reg := s.Registry
	switch {
	case rt.sub != "":
		return nil, 0, apierrors.NewNotFound(secretsGR, rt.name+"/"+rt.sub)
	case rt.name == "" && req.Method == http.MethodGet:
		ls, _, err := selectors(req)
		if err != nil {
			return nil, 0, err
		}
		items, rv := reg.ListSecrets(rt.namespace)
		list := &v1.SecretList{TypeMeta: metav1.TypeMeta{Kind: "SecretList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: []v1.Secret{}}
		for _, it := range items {
			if ls.Matches(labels.Set(it.Labels)) {
				list.Items = append(list.Items, it)
			}
		}
		return list, http.StatusOK, nil
	case req.Method == http.MethodPost && rt.name == "", req.Method == http.MethodPut && rt.name != "":
		o := &v1.Secret{}
		if err := decode(req, o, v1.SchemeGroupVersion.WithKind("Secret")); err != nil {
			return nil, 0, err
		}
		if err := checkNamespace(&o.ObjectMeta, rt.namespace); err != nil {
			return nil, 0, err
		}
		create := req.Method == http.MethodPost
		if !create && o.Name != rt.name {
			return nil, 0, apierrors.NewBadRequest("the name of the object does not match the name on the URL")
		}
		out, err := reg.PutSecret(o, create, dryRun)
		code := http.StatusOK
		if create {
			code = http.StatusCreated
		}
		return typedSecret(out), code, err
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

func (s *Server) serveConfigMaps(req *http.Request, rt route, dryRun bool) (runtime.Object, int, error) {
	reg := s.Registry
	switch {
	case rt.sub != "":
		return nil, 0, apierrors.NewNotFound(configMapsGR, rt.name+"/"+rt.sub)
	case rt.name == "" && req.Method == http.MethodGet:
		ls, _, err := selectors(req)
		if err != nil {
			return nil, 0, err
		}
		items, rv := reg.ListConfigMaps(rt.namespace)
		list := &v1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: []v1.ConfigMap{}}
		for _, it := range items {
			if ls.Matches(labels.Set(it.Labels)) {
				list.Items = append(list.Items, it)
			}
		}
		return list, http.StatusOK, nil
	case req.Method == http.MethodPost && rt.name == "", req.Method == http.MethodPut && rt.name != "":
		o := &v1.ConfigMap{}
		if err := decode(req, o, v1.SchemeGroupVersion.WithKind("ConfigMap")); err != nil {
			return nil, 0, err
		}
		if err := checkNamespace(&o.ObjectMeta, rt.namespace); err != nil {
			return nil, 0, err
		}
		create := req.Method == http.MethodPost
		if !create && o.Name != rt.name {
			return nil, 0, apierrors.NewBadRequest("the name of the object does not match the name on the URL")
		}
		out, err := reg.PutConfigMap(o, create, dryRun)
		code := http.StatusOK
		if create {
			code = http.StatusCreated
		}
		return typedConfigMap(out), code, err
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

func (s *Server) serveEvents(req *http.Request, rt route) (runtime.Object, error) {
	if req.Method != http.MethodGet || rt.name != "" {
		return nil, methodNotAllowed(req)
	}
	_, fs, err := selectors(req)
	if err != nil {
		return nil, err
	}
	list := &v1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}, Items: []v1.Event{}}
	for _, e := range s.Registry.Events.List(rt.namespace) {
		f := fields.Set{
			"involvedObject.name": e.InvolvedObject.Name, "involvedObject.namespace": e.InvolvedObject.Namespace,
			"involvedObject.uid": string(e.InvolvedObject.UID), "involvedObject.kind": e.InvolvedObject.Kind,
			"reason": e.Reason, "type": e.Type, "metadata.namespace": e.Namespace,
		}
		if fs.Matches(f) {
			list.Items = append(list.Items, e)
		}
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
