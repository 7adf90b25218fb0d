package podapi

import (
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"
)

// installDiscovery serves /api, /api/v1, /apis and the OpenAPI documents
// (v2 and v3) kubectl reads to validate, explain and patch.
func (s *Server) installDiscovery() {
	s.mux.HandleFunc("/api", func(w http.ResponseWriter, req *http.Request) {
		if acceptsAggregated(req) {
			writeAggregated(w, legacyDiscovery())
			return
		}
		writeJSON(w, http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: ""}}})
	})
	s.mux.HandleFunc("/apis", func(w http.ResponseWriter, req *http.Request) {
		if acceptsAggregated(req) {
			writeAggregated(w, nil) // no API groups: only the legacy core group
			return
		}
		writeJSON(w, http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}})
	})
	s.mux.HandleFunc("/api/v1", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, resourceList()) })
	s.mux.HandleFunc("/openapi/v2", withDocs(func(w http.ResponseWriter, d *openAPIDoc) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(d.v2)
	}))
	s.mux.HandleFunc("/openapi/v3", withDocs(func(w http.ResponseWriter, d *openAPIDoc) {
		writeJSON(w, http.StatusOK, map[string]any{"paths": map[string]any{
			"api/v1": map[string]string{"serverRelativeURL": "/openapi/v3/api/v1?hash=" + d.v3Hash},
		}})
	}))
	s.mux.HandleFunc("/openapi/v3/api/v1", withDocs(func(w http.ResponseWriter, d *openAPIDoc) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Etag", `"`+d.v3Hash+`"`)
		_, _ = w.Write(d.v3)
	}))
}

// withDocs serves from the OpenAPI documents, built on first use.
func withDocs(serve func(http.ResponseWriter, *openAPIDoc)) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		d, err := openAPIDocs()
		if err != nil {
			writeError(w, err)
			return
		}
		serve(w, d)
	}
}

type openAPIDoc struct {
	v2, v3 []byte
	v3Hash string
}

var (
	openAPIOnce sync.Once
	openAPIData *openAPIDoc
	openAPIErr  error
)

// servedTypes are the Go types whose schemas (and everything they reference)
// the documents carry: the core/v1 objects bootlet serves.
var servedTypes = []string{
	"io.k8s.api.core.v1.Pod", "io.k8s.api.core.v1.PodList",
	"io.k8s.api.core.v1.Secret", "io.k8s.api.core.v1.SecretList",
	"io.k8s.api.core.v1.ConfigMap", "io.k8s.api.core.v1.ConfigMapList",
	"io.k8s.api.core.v1.Event", "io.k8s.api.core.v1.EventList",
	"io.k8s.api.core.v1.Namespace", "io.k8s.api.core.v1.NamespaceList",
	"io.k8s.api.core.v1.Node", "io.k8s.api.core.v1.NodeList",
	"io.k8s.apimachinery.pkg.apis.meta.v1.Status", "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent",
	"io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
	"io.k8s.apimachinery.pkg.apis.meta.v1.APIResourceList",
}

// openAPIDocs builds the documents once, from the apiserver's generated
// definitions (k8s.io/kubernetes/pkg/generated/openapi) named as the
// apiserver names them.
func openAPIDocs() (*openAPIDoc, error) {
	openAPIOnce.Do(func() {
		openAPIData, openAPIErr = buildOpenAPI()
		if openAPIErr != nil {
			klog.ErrorS(openAPIErr, "Building the OpenAPI documents failed")
		}
	})
	return openAPIData, openAPIErr
}

type servedResource struct {
	name, kind string
	namespaced bool
	verbs      []string
}

var servedResources = []servedResource{
	{"pods", "Pod", true, []string{"list", "create", "get", "update", "patch", "delete", "watch"}},
	{"secrets", "Secret", true, []string{"list", "create", "get", "update", "patch", "delete", "watch"}},
	{"configmaps", "ConfigMap", true, []string{"list", "create", "get", "update", "patch", "delete", "watch"}},
	{"events", "Event", true, []string{"list", "get"}},
}

func buildOpenAPI() (*openAPIDoc, error) {
	namer := openapinamer.NewDefinitionNamer(legacyscheme.Scheme)
	info := &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes (bootlet)", Version: Version.GitVersion}}
	defs3, err := builder3.BuildOpenAPIDefinitionsForResources(&common.OpenAPIV3Config{
		Info: info, GetDefinitions: generatedopenapi.GetOpenAPIDefinitions, GetDefinitionName: namer.GetDefinitionName,
	}, servedTypes...)
	if err != nil {
		return nil, fmt.Errorf("openapi v3: %w", err)
	}
	doc3 := &spec3.OpenAPI{
		Version:    "3.0.0",
		Info:       info,
		Paths:      &spec3.Paths{Paths: map[string]*spec3.Path{}},
		Components: &spec3.Components{Schemas: defs3},
	}
	sw, err := builder.BuildOpenAPIDefinitionsForResources(&common.Config{
		Info: info, GetDefinitions: generatedopenapi.GetOpenAPIDefinitions, GetDefinitionName: namer.GetDefinitionName,
	}, servedTypes...)
	if err != nil {
		return nil, fmt.Errorf("openapi v2: %w", err)
	}
	for _, r := range servedResources {
		addPaths3(doc3, r)
		addPaths2(sw, r)
	}
	v3, err := json.Marshal(doc3)
	if err != nil {
		return nil, err
	}
	v2, err := json.Marshal(sw)
	if err != nil {
		return nil, err
	}
	sum := sha512.Sum512(v3)
	return &openAPIDoc{v2: v2, v3: v3, v3Hash: strings.ToUpper(fmt.Sprintf("%x", sum[:32]))}, nil
}

func gvkExt(kind string) spec.Extensions {
	return spec.Extensions{"x-kubernetes-group-version-kind": map[string]any{"group": "", "version": "v1", "kind": kind}}
}

func defName(kind string) string { return "io.k8s.api.core.v1." + kind }

type opParam struct{ name, in, typ string }

var (
	listParams   = []opParam{{"allowWatchBookmarks", "query", "boolean"}, {"continue", "query", "string"}, {"fieldSelector", "query", "string"}, {"labelSelector", "query", "string"}, {"limit", "query", "integer"}, {"resourceVersion", "query", "string"}, {"resourceVersionMatch", "query", "string"}, {"sendInitialEvents", "query", "boolean"}, {"timeoutSeconds", "query", "integer"}, {"watch", "query", "boolean"}}
	writeParams  = []opParam{{"dryRun", "query", "string"}, {"fieldManager", "query", "string"}, {"fieldValidation", "query", "string"}}
	patchParams  = append(append([]opParam{}, writeParams...), opParam{"force", "query", "boolean"})
	deleteParams = []opParam{{"dryRun", "query", "string"}, {"gracePeriodSeconds", "query", "integer"}, {"propagationPolicy", "query", "string"}}
)

func params3(ps []opParam, pathParams ...string) []*spec3.Parameter {
	var out []*spec3.Parameter
	for _, p := range pathParams {
		out = append(out, &spec3.Parameter{ParameterProps: spec3.ParameterProps{Name: p, In: "path", Required: true, Schema: spec.StringProperty()}})
	}
	for _, p := range ps {
		out = append(out, &spec3.Parameter{ParameterProps: spec3.ParameterProps{Name: p.name, In: p.in, Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{p.typ}}}}})
	}
	return out
}

func ref3(name string) *spec.Schema {
	return &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef("#/components/schemas/" + name)}}
}

func op3(id, action, kind string, ps []*spec3.Parameter, bodyKind string, respKind string, mediaTypes ...string) *spec3.Operation {
	op := &spec3.Operation{
		OperationProps: spec3.OperationProps{
			OperationId: id, Tags: []string{"core_v1"}, Parameters: ps,
			Responses: &spec3.Responses{ResponsesProps: spec3.ResponsesProps{StatusCodeResponses: map[int]*spec3.Response{
				200: {ResponseProps: spec3.ResponseProps{Description: "OK", Content: map[string]*spec3.MediaType{
					"application/json": {MediaTypeProps: spec3.MediaTypeProps{Schema: ref3(respKind)}},
				}}},
			}}},
		},
		VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{"x-kubernetes-action": action}},
	}
	for k, v := range gvkExt(kind) {
		op.Extensions[k] = v
	}
	if bodyKind != "" {
		if len(mediaTypes) == 0 {
			mediaTypes = []string{"*/*"}
		}
		content := map[string]*spec3.MediaType{}
		for _, mt := range mediaTypes {
			content[mt] = &spec3.MediaType{MediaTypeProps: spec3.MediaTypeProps{Schema: ref3(bodyKind)}}
		}
		op.RequestBody = &spec3.RequestBody{RequestBodyProps: spec3.RequestBodyProps{Required: true, Content: content}}
	}
	return op
}

// pathOp is one operation of the OpenAPI documents, for both versions.
type pathOp struct {
	path, method, id, action string
	params                   []opParam
	pathParams               []string
	body, resp               string
	media                    []string
}

var patchMedia = []string{"application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json"}

// operations lists what bootlet serves for r, as the apiserver names it.
func operations(r servedResource) []pathOp {
	has := map[string]bool{}
	for _, v := range r.verbs {
		has[v] = true
	}
	k, kl := r.kind, defName(r.kind+"List")
	coll, item := "/api/v1/namespaces/{namespace}/"+r.name, "/api/v1/namespaces/{namespace}/"+r.name+"/{name}"
	ns, nsName := []string{"namespace"}, []string{"namespace", "name"}
	ops := []pathOp{
		{coll, "get", "listCoreV1Namespaced" + k, "list", listParams, ns, "", kl, nil},
		{item, "get", "readCoreV1Namespaced" + k, "get", nil, nsName, "", defName(k), nil},
		{"/api/v1/" + r.name, "get", "list" + k + "ForAllNamespaces", "list", listParams, nil, "", kl, nil},
	}
	if has["create"] {
		ops = append(ops, pathOp{coll, "post", "createCoreV1Namespaced" + k, "post", writeParams, ns, defName(k), defName(k), nil})
	}
	if has["update"] {
		ops = append(ops,
			pathOp{item, "put", "replaceCoreV1Namespaced" + k, "put", writeParams, nsName, defName(k), defName(k), nil},
			pathOp{item, "delete", "deleteCoreV1Namespaced" + k, "delete", deleteParams, nsName, "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", defName(k), nil},
			pathOp{item, "patch", "patchCoreV1Namespaced" + k, "patch", patchParams, nsName, "io.k8s.apimachinery.pkg.apis.meta.v1.Patch", defName(k), patchMedia})
	}
	return ops
}

// methodSlot is the field of an OpenAPI path item (v2 or v3) that holds
// the operation for method.
func methodSlot[O any](method string, get, post, put, del, patch **O) **O {
	switch method {
	case "post":
		return post
	case "put":
		return put
	case "delete":
		return del
	case "patch":
		return patch
	}
	return get
}

func addPaths3(doc *spec3.OpenAPI, r servedResource) {
	for _, o := range operations(r) {
		p := doc.Paths.Paths[o.path]
		if p == nil {
			p = &spec3.Path{}
			doc.Paths.Paths[o.path] = p
		}
		op := op3(o.id, o.action, r.kind, params3(o.params, o.pathParams...), o.body, o.resp, o.media...)
		*methodSlot(o.method, &p.Get, &p.Post, &p.Put, &p.Delete, &p.Patch) = op
	}
}

func op2(id, action, kind string, ps []opParam, pathParams []string, bodyKind, respKind string, consumes ...string) *spec.Operation {
	op := &spec.Operation{OperationProps: spec.OperationProps{ID: id, Tags: []string{"core_v1"}, Consumes: consumes, Produces: []string{"application/json"},
		Responses: &spec.Responses{ResponsesProps: spec.ResponsesProps{StatusCodeResponses: map[int]spec.Response{
			200: {ResponseProps: spec.ResponseProps{Description: "OK", Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef("#/definitions/" + respKind)}}}},
		}}}}}
	op.Extensions = spec.Extensions{"x-kubernetes-action": action}
	for k, v := range gvkExt(kind) {
		op.Extensions[k] = v
	}
	for _, p := range pathParams {
		op.Parameters = append(op.Parameters, spec.Parameter{ParamProps: spec.ParamProps{Name: p, In: "path", Required: true}, SimpleSchema: spec.SimpleSchema{Type: "string"}})
	}
	for _, p := range ps {
		op.Parameters = append(op.Parameters, spec.Parameter{ParamProps: spec.ParamProps{Name: p.name, In: p.in}, SimpleSchema: spec.SimpleSchema{Type: p.typ}})
	}
	if bodyKind != "" {
		op.Parameters = append(op.Parameters, spec.Parameter{ParamProps: spec.ParamProps{Name: "body", In: "body", Required: true,
			Schema: &spec.Schema{SchemaProps: spec.SchemaProps{Ref: spec.MustCreateRef("#/definitions/" + bodyKind)}}}})
	}
	return op
}

func addPaths2(sw *spec.Swagger, r servedResource) {
	if sw.Paths == nil {
		sw.Paths = &spec.Paths{Paths: map[string]spec.PathItem{}}
	}
	for _, o := range operations(r) {
		p := sw.Paths.Paths[o.path]
		consumes := o.media
		if o.body != "" && consumes == nil {
			consumes = []string{"*/*"}
		}
		op := op2(o.id, o.action, r.kind, o.params, o.pathParams, o.body, o.resp, consumes...)
		*methodSlot(o.method, &p.Get, &p.Post, &p.Put, &p.Delete, &p.Patch) = op
		sw.Paths.Paths[o.path] = p
	}
}
