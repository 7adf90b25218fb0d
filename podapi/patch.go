package podapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

const maxPatchRetries = 5

// The apiserver's JSON patch limits (k8s.io/apiserver/pkg/endpoints/
// handlers/patch.go and server/config.go): at most 10000 operations, and
// "copy" operations may grow the document by at most 3 MiB in all, so a
// patch within the body limit cannot build an object of gigabytes.
const (
	MaxJSONPatchOperations = 10000
	JSONPatchMaxCopyBytes  = 3 << 20
)

func init() {
	// json-patch v4 has one process-wide limit, which the apiserver sets
	// the same way: lower it, never raise one set lower.
	for {
		cur := atomic.LoadInt64(&jsonpatch.AccumulatedCopySizeLimit)
		if (cur > 0 && cur <= JSONPatchMaxCopyBytes) || atomic.CompareAndSwapInt64(&jsonpatch.AccumulatedCopySizeLimit, cur, JSONPatchMaxCopyBytes) {
			return
		}
	}
}

// servePatch is PATCH: JSON patch, merge patch and strategic merge patch
// re-applied on a conflict with another writer, and server-side apply.
func (s *Server) servePatch(w http.ResponseWriter, req *http.Request, rt route, k resource, dryRun bool) (runtime.Object, int, error) {
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
		live, err := k.getObject(rt.namespace, rt.name)
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
			if len(p) > MaxJSONPatchOperations {
				return nil, 0, apierrors.NewRequestEntityTooLargeError(
					fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", MaxJSONPatchOperations, len(p)))
			}
			if patched, err = p.Apply(liveJSON); err != nil {
				// The apiserver's 422, with the patch's error in the message
				// (NewGenericServerResponse drops it): a client must see
				// that the copy limit was hit, or which operation failed.
				st := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{Resource: k.name()}, rt.name, err.Error(), 0, false)
				st.ErrStatus.Message += ": " + err.Error()
				return nil, 0, st
			}
		case types.MergePatchType:
			if patched, err = jsonpatch.MergePatch(liveJSON, body); err != nil {
				return nil, 0, apierrors.NewBadRequest(err.Error())
			}
		case types.StrategicMergePatchType:
			if patched, err = strategicpatch.StrategicMergePatch(liveJSON, body, k.newObject()); err != nil {
				return nil, 0, apierrors.NewBadRequest(err.Error())
			}
		}
		obj := k.newObject()
		if err := decodeBytes(w, req, patched, obj, k.gvk()); err != nil {
			return nil, 0, err
		}
		m, _ := meta.Accessor(obj)
		if m.GetName() != rt.name || m.GetNamespace() != rt.namespace {
			return nil, 0, apierrors.NewBadRequest("metadata.name and metadata.namespace may not be changed by a patch")
		}
		obj = k.fieldManager().UpdateNoErrors(live, obj, manager)
		out, err := k.updateObject(obj, dryRun)
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
func (s *Server) applyObject(w http.ResponseWriter, req *http.Request, rt route, k resource, body []byte, manager string, force, dryRun bool) (runtime.Object, int, error) {
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
	if applied.GroupVersionKind() != k.gvk() {
		return nil, 0, apierrors.NewBadRequest(fmt.Sprintf("the applied configuration is a %s, not a %s", applied.GroupVersionKind(), k.gvk()))
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
	if err := decodeBytes(w, req, js, k.newObject(), k.gvk()); err != nil {
		return nil, 0, err
	}
	var lastErr error
	for attempt := 0; attempt < maxPatchRetries; attempt++ {
		live, err := k.getObject(rt.namespace, rt.name)
		create := apierrors.IsNotFound(err)
		if err != nil && !create {
			return nil, 0, err
		}
		if create {
			live = k.newObject()
		}
		out, err := k.fieldManager().Apply(live, applied.DeepCopy(), manager, force)
		if err != nil {
			if _, ok := err.(apierrors.APIStatus); ok {
				return nil, 0, err
			}
			return nil, 0, apierrors.NewBadRequest(err.Error())
		}
		if create {
			if err := s.admitPod(req.Context(), out); err != nil {
				return nil, 0, err
			}
			obj, err := k.createObject(out, dryRun)
			if apierrors.IsAlreadyExists(err) {
				lastErr = apierrors.NewConflict(schema.GroupResource{Resource: k.name()}, rt.name, err)
				continue
			}
			return obj, http.StatusCreated, err
		}
		obj, err := k.updateObject(out, dryRun)
		if apierrors.IsConflict(err) && applied.GetResourceVersion() == "" {
			lastErr = err
			continue
		}
		return obj, http.StatusOK, err
	}
	return nil, 0, lastErr
}
