package podapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"
)

// kindOps is what the generic write paths (create, update, patch, apply)
// need from the registry for one resource.
type kindOps struct {
	gvk      schema.GroupVersionKind
	gr       schema.GroupResource
	newObj   func() runtime.Object
	get      func(ns, name string) (runtime.Object, error)
	create   func(obj runtime.Object, dryRun bool) (runtime.Object, error)
	update   func(obj runtime.Object, dryRun bool) (runtime.Object, error)
	fm       func() *managedfields.FieldManager // built on first use (lazyFieldManager)
	patchFor runtime.Object                     // the Go struct strategic merge patch reads its directives from
}

// typeConverter parses the OpenAPI schema of every built-in type (~85 ms of
// CPU): built on the first write, not at process start, which every CLI call
// and every daemon start (reboot recovery) would otherwise pay.
var typeConverter = sync.OnceValue(func() managedfields.TypeConverter { return applyconfigurations.NewTypeConverter(scheme.Scheme) })

// lazyFieldManager defers newFieldManager to the first write of the kind.
func lazyFieldManager(gvk schema.GroupVersionKind, reset map[fieldpath.APIVersion]fieldpath.Filter) func() *managedfields.FieldManager {
	return sync.OnceValue(func() *managedfields.FieldManager { return newFieldManager(gvk, reset) })
}

func newFieldManager(gvk schema.GroupVersionKind, reset map[fieldpath.APIVersion]fieldpath.Filter) *managedfields.FieldManager {
	s := legacyscheme.Scheme
	fm, err := managedfields.NewDefaultFieldManager(typeConverter(), runtime.UnsafeObjectConvertor(s), s, s, gvk, gvk.GroupVersion(), "", reset)
	if err != nil {
		panic(fmt.Sprintf("field manager for %s: %v", gvk, err))
	}
	return fm
}

func (s *Server) initKinds() {
	r := s.Registry
	podGVK := v1.SchemeGroupVersion.WithKind("Pod")
	// As the apiserver's pod strategy: status is not written through the main resource.
	podReset := map[fieldpath.APIVersion]fieldpath.Filter{"v1": fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status")))}
	s.kinds = map[string]*kindOps{
		"pods": {
			gvk: podGVK, gr: podsGR, newObj: func() runtime.Object { return &v1.Pod{} }, patchFor: &v1.Pod{},
			get: func(ns, name string) (runtime.Object, error) { return nilIfErr(r.GetPod(ns, name)) },
			create: func(o runtime.Object, dry bool) (runtime.Object, error) {
				return nilIfErr(r.CreatePod(o.(*v1.Pod), dry))
			},
			update: func(o runtime.Object, dry bool) (runtime.Object, error) {
				return nilIfErr(r.UpdatePod(o.(*v1.Pod), dry))
			},
			fm: lazyFieldManager(podGVK, podReset),
		},
		"secrets": {
			gvk: v1.SchemeGroupVersion.WithKind("Secret"), gr: secretsGR, newObj: func() runtime.Object { return &v1.Secret{} }, patchFor: &v1.Secret{},
			get: func(ns, name string) (runtime.Object, error) { return nilIfErr(r.GetSecret(ns, name)) },
			create: func(o runtime.Object, dry bool) (runtime.Object, error) {
				return nilIfErr(r.PutSecret(o.(*v1.Secret), true, dry))
			},
			update: func(o runtime.Object, dry bool) (runtime.Object, error) {
				return nilIfErr(r.PutSecret(o.(*v1.Secret), false, dry))
			},
			fm: lazyFieldManager(v1.SchemeGroupVersion.WithKind("Secret"), nil),
		},
		"configmaps": {
			gvk: v1.SchemeGroupVersion.WithKind("ConfigMap"), gr: configMapsGR, newObj: func() runtime.Object { return &v1.ConfigMap{} }, patchFor: &v1.ConfigMap{},
			get: func(ns, name string) (runtime.Object, error) { return nilIfErr(r.GetConfigMap(ns, name)) },
			create: func(o runtime.Object, dry bool) (runtime.Object, error) {
				return nilIfErr(r.PutConfigMap(o.(*v1.ConfigMap), true, dry))
			},
			update: func(o runtime.Object, dry bool) (runtime.Object, error) {
				return nilIfErr(r.PutConfigMap(o.(*v1.ConfigMap), false, dry))
			},
			fm: lazyFieldManager(v1.SchemeGroupVersion.WithKind("ConfigMap"), nil),
		},
	}
}

// nilIfErr keeps a typed nil pointer from becoming a non-nil interface.
func nilIfErr[T runtime.Object](o T, err error) (runtime.Object, error) {
	if err != nil {
		return nil, err
	}
	return o, nil
}

// ---- decoding with fieldValidation

var (
	strictJSON         = serjson.NewSerializerWithOptions(serjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, serjson.SerializerOptions{Strict: true})
	strictYAML         = serjson.NewSerializerWithOptions(serjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, serjson.SerializerOptions{Yaml: true, Strict: true})
	protobufSerializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	protobufMagic      = []byte{0x6b, 0x38, 0x73, 0x00}
)

// fieldValidation returns the request's directive (Warn by default, as the
// apiserver since 1.27).
func fieldValidation(req *http.Request) (string, error) {
	v := req.URL.Query().Get("fieldValidation")
	switch v {
	case "":
		return metav1.FieldValidationWarn, nil
	case metav1.FieldValidationIgnore, metav1.FieldValidationWarn, metav1.FieldValidationStrict:
		return v, nil
	}
	return "", apierrors.NewBadRequest(fmt.Sprintf("fieldValidation must be one of Ignore, Warn or Strict, not %q", v))
}

// decodeBytes decodes body into into, checking kind/version and applying
// the fieldValidation directive to unknown and duplicate fields: Strict
// fails with 400, Warn adds a Warning header, Ignore drops them.
func decodeBytes(w http.ResponseWriter, req *http.Request, body []byte, into runtime.Object, gvk schema.GroupVersionKind) error {
	directive, err := fieldValidation(req)
	if err != nil {
		return err
	}
	var ser runtime.Decoder = strictJSON
	switch {
	case bytes.HasPrefix(body, protobufMagic):
		ser = protobufSerializer // kubectl and client-go send built-in types as protobuf
	case !utilyaml.IsJSONBuffer(body):
		ser = strictYAML
	}
	got, gotGVK, err := ser.Decode(body, &gvk, into)
	var strictErrs []error
	if err != nil {
		if se, ok := runtime.AsStrictDecodingError(err); ok {
			strictErrs = se.Errors()
			err = nil
		}
	}
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("the body of the request could not be decoded: %v", err))
	}
	if *gotGVK != gvk || got != into {
		return apierrors.NewBadRequest(fmt.Sprintf("the body of the request was in an unknown format or is not a %s (got %s)", gvk.Kind, gotGVK.String()))
	}
	if len(strictErrs) > 0 {
		switch directive {
		case metav1.FieldValidationStrict:
			msgs := make([]string, len(strictErrs))
			for i, e := range strictErrs {
				msgs[i] = e.Error()
			}
			return apierrors.NewBadRequest("strict decoding error: " + strings.Join(msgs, ", "))
		case metav1.FieldValidationWarn:
			for _, e := range strictErrs {
				addWarning(w, e.Error())
			}
		}
	}
	return nil
}

func addWarning(w http.ResponseWriter, msg string) {
	if w != nil {
		w.Header().Add("Warning", "299 - "+strconv.Quote(msg))
	}
}

func readBody(req *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(req.Body, MaxBodyBytes+1))
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if len(body) > MaxBodyBytes {
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", MaxBodyBytes))
	}
	return body, nil
}

// managerName is the fieldManager query parameter, else the User-Agent's
// product, as the apiserver does.
func managerName(req *http.Request) (string, error) {
	if m := req.URL.Query().Get("fieldManager"); m != "" {
		if len(m) > 128 {
			return "", apierrors.NewBadRequest("fieldManager: Too long: may not be more than 128 bytes")
		}
		return m, nil
	}
	var b strings.Builder
	for _, r := range strings.Split(req.UserAgent(), "/")[0] {
		if unicode.IsPrint(r) && b.Len() < 128 {
			b.WriteRune(r)
		}
	}
	return b.String(), nil
}

// ---- create and update (POST, PUT)

func (s *Server) writeObject(w http.ResponseWriter, req *http.Request, rt route, k *kindOps, create, dryRun bool) (runtime.Object, int, error) {
	if err := checkContentType(req); err != nil {
		return nil, 0, err
	}
	body, err := readBody(req)
	if err != nil {
		return nil, 0, err
	}
	obj := k.newObj()
	if err := decodeBytes(w, req, body, obj, k.gvk); err != nil {
		return nil, 0, err
	}
	m, _ := meta.Accessor(obj)
	if m.GetNamespace() == "" {
		m.SetNamespace(rt.namespace)
	}
	if m.GetNamespace() != rt.namespace {
		return nil, 0, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	manager, err := managerName(req)
	if err != nil {
		return nil, 0, err
	}
	if create {
		obj = k.fm().UpdateNoErrors(k.newObj(), obj, manager)
		out, err := k.create(obj, dryRun)
		return out, http.StatusCreated, err
	}
	if m.GetName() != rt.name {
		return nil, 0, apierrors.NewBadRequest("the name of the object does not match the name on the URL")
	}
	live, err := k.get(rt.namespace, rt.name)
	if err != nil {
		return nil, 0, err
	}
	obj = k.fm().UpdateNoErrors(live, obj, manager)
	out, err := k.update(obj, dryRun)
	return out, http.StatusOK, err
}

func checkContentType(req *http.Request) error {
	ct := req.Header.Get("Content-Type")
	if i := strings.Index(ct, ";"); i >= 0 {
		ct = ct[:i]
	}
	switch strings.TrimSpace(ct) {
	case "", "application/json", "application/yaml", "application/vnd.kubernetes.protobuf":
		return nil
	}
	return unsupportedMediaType(ct)
}

// ---- PATCH

const maxPatchRetries = 5

func (s *Server) patchObject(w http.ResponseWriter, req *http.Request, rt route, k *kindOps, dryRun bool) (runtime.Object, int, error) {
	ct := req.Header.Get("Content-Type")
	if i := strings.Index(ct, ";"); i >= 0 {
		ct = ct[:i]
	}
	pt := types.PatchType(strings.TrimSpace(ct))
	switch pt {
	case types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType:
	default:
		return nil, 0, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType, Reason: metav1.StatusReasonUnsupportedMediaType,
			Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s, %s, %s",
				types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType, types.ApplyYAMLPatchType),
		}}
	}
	body, err := readBody(req)
	if err != nil {
		return nil, 0, err
	}
	manager, err := managerName(req)
	if err != nil {
		return nil, 0, err
	}
	force := false
	if f := req.URL.Query().Get("force"); f != "" {
		if pt != types.ApplyYAMLPatchType {
			return nil, 0, apierrors.NewBadRequest("force may not be specified for non-apply patch")
		}
		force = f == "true"
	}
	if pt == types.ApplyYAMLPatchType {
		if req.URL.Query().Get("fieldManager") == "" {
			return nil, 0, apierrors.NewBadRequest("PATCH requests with apply content type must set fieldManager")
		}
		return s.applyObject(w, req, rt, k, body, manager, force, dryRun)
	}
	var lastErr error
	for attempt := 0; attempt < maxPatchRetries; attempt++ {
		live, err := k.get(rt.namespace, rt.name)
		if err != nil {
			return nil, 0, err
		}
		setTypeMeta(live)
		liveJSON, err := json.Marshal(live)
		if err != nil {
			return nil, 0, apierrors.NewInternalError(err)
		}
		var patched []byte
		switch pt {
		case types.JSONPatchType:
			p, err := jsonpatch.DecodePatch(body)
			if err != nil {
				return nil, 0, apierrors.NewBadRequest(err.Error())
			}
			if patched, err = p.Apply(liveJSON); err != nil {
				return nil, 0, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", k.gr, rt.name, err.Error(), 0, false)
			}
		case types.MergePatchType:
			if patched, err = jsonpatch.MergePatch(liveJSON, body); err != nil {
				return nil, 0, apierrors.NewBadRequest(err.Error())
			}
		case types.StrategicMergePatchType:
			if patched, err = strategicpatch.StrategicMergePatch(liveJSON, body, k.patchFor); err != nil {
				return nil, 0, apierrors.NewBadRequest(err.Error())
			}
		}
		obj := k.newObj()
		if err := decodeBytes(w, req, patched, obj, k.gvk); err != nil {
			return nil, 0, err
		}
		m, _ := meta.Accessor(obj)
		if m.GetName() != rt.name || m.GetNamespace() != rt.namespace {
			return nil, 0, apierrors.NewBadRequest("metadata.name and metadata.namespace may not be changed by a patch")
		}
		obj = k.fm().UpdateNoErrors(live, obj, manager)
		out, err := k.update(obj, dryRun)
		if apierrors.IsConflict(err) && patchPinsNothing(pt, body) {
			lastErr = err
			continue // raced with another writer: re-apply on the new state, as the apiserver does
		}
		return out, http.StatusOK, err
	}
	return nil, 0, lastErr
}

// patchPinsNothing reports whether a patch leaves resourceVersion alone, so
// a conflict is a race to retry rather than a stale precondition.
func patchPinsNothing(pt types.PatchType, body []byte) bool {
	return !strings.Contains(string(body), "resourceVersion")
}

// applyObject is server-side apply: the applied configuration is merged by
// the field manager, which records ownership and refuses conflicting
// changes unless forced.
func (s *Server) applyObject(w http.ResponseWriter, req *http.Request, rt route, k *kindOps, body []byte, manager string, force, dryRun bool) (runtime.Object, int, error) {
	directive, err := fieldValidation(req)
	if err != nil {
		return nil, 0, err
	}
	js, err := yaml.YAMLToJSONStrict(body)
	if err != nil {
		if directive == metav1.FieldValidationStrict {
			return nil, 0, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
		}
		if js, err = yaml.YAMLToJSON(body); err != nil {
			return nil, 0, apierrors.NewBadRequest(fmt.Sprintf("error decoding YAML: %v", err))
		}
	}
	applied := &unstructured.Unstructured{}
	if err := applied.UnmarshalJSON(js); err != nil {
		return nil, 0, apierrors.NewBadRequest(fmt.Sprintf("error decoding the applied configuration: %v", err))
	}
	if applied.GroupVersionKind() != k.gvk {
		return nil, 0, apierrors.NewBadRequest(fmt.Sprintf("the applied configuration is a %s, not a %s", applied.GroupVersionKind(), k.gvk))
	}
	if applied.GetName() == "" {
		applied.SetName(rt.name)
	}
	if applied.GetNamespace() == "" {
		applied.SetNamespace(rt.namespace)
	}
	if applied.GetName() != rt.name || applied.GetNamespace() != rt.namespace {
		return nil, 0, apierrors.NewBadRequest("the name and namespace of the applied configuration must match the URL")
	}
	// Unknown fields: reported like a create would report them.
	if err := decodeBytes(w, req, js, k.newObj(), k.gvk); err != nil {
		return nil, 0, err
	}
	var lastErr error
	for attempt := 0; attempt < maxPatchRetries; attempt++ {
		live, err := k.get(rt.namespace, rt.name)
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return nil, 0, err
		}
		if create {
			live = k.newObj()
		}
		out, err := k.fm().Apply(live, applied.DeepCopy(), manager, force)
		if err != nil {
			if _, ok := err.(apierrors.APIStatus); ok {
				return nil, 0, err
			}
			return nil, 0, apierrors.NewBadRequest(err.Error())
		}
		if create {
			obj, err := k.create(out, dryRun)
			if apierrors.IsAlreadyExists(err) {
				lastErr = apierrors.NewConflict(k.gr, rt.name, err)
				continue
			}
			return obj, http.StatusCreated, err
		}
		obj, err := k.update(out, dryRun)
		if apierrors.IsConflict(err) && applied.GetResourceVersion() == "" {
			lastErr = err
			continue
		}
		return obj, http.StatusOK, err
	}
	return nil, 0, lastErr
}
