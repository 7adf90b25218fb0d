package podapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/printers"
	printersinternal "k8s.io/kubernetes/pkg/printers/internalversion"
	printerstorage "k8s.io/kubernetes/pkg/printers/storage"
)

// tableConvertor is the apiserver's server-side printing (the columns of
// `kubectl get`), built from the same internal printers.
var (
	internalGV  = schema.GroupVersion{Version: runtime.APIVersionInternal}
	versionedGV = v1.SchemeGroupVersion
)

var tableConvertor = printerstorage.TableConvertor{TableGenerator: printers.NewTableGenerator().With(printersinternal.AddHandlers)}

// transformer turns responses into what the client's Accept asks for: the
// object as JSON, or a meta.k8s.io Table (kubectl get).
type transformer struct {
	table   bool
	tableGV string
	opts    metav1.TableOptions
}

func (s *Server) transformerFor(req *http.Request) (*transformer, error) {
	t := &transformer{}
	for _, part := range strings.Split(req.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		if params["as"] == "Table" && params["g"] == "meta.k8s.io" && (params["v"] == "v1" || params["v"] == "v1beta1") &&
			(mt == "application/json" || mt == "*/*") {
			t.table, t.tableGV = true, "meta.k8s.io/"+params["v"]
			break
		}
		if params["as"] == "" && (mt == "application/json" || mt == "*/*" || mt == "application/*") {
			break
		}
	}
	if t.table {
		q := req.URL.Query()
		t.opts.IncludeObject = metav1.IncludeObjectPolicy(q.Get("includeObject"))
		switch t.opts.IncludeObject {
		case "", metav1.IncludeMetadata, metav1.IncludeNone, metav1.IncludeObject:
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("unrecognized includeObject value: %q", t.opts.IncludeObject))
		}
	}
	return t, nil
}

func (t *transformer) contentType() string { return "application/json" }

// transform converts a typed v1 object (or list) into the response.
func (t *transformer) transform(obj runtime.Object) (runtime.Object, error) {
	if !t.table || obj == nil {
		return obj, nil
	}
	if _, ok := obj.(*metav1.Status); ok {
		return obj, nil
	}
	internal, err := legacyscheme.Scheme.UnsafeConvertToVersion(obj.DeepCopyObject(), internalGV)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	table, err := tableConvertor.ConvertToTable(context.Background(), internal, &t.opts)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	table.APIVersion, table.Kind = t.tableGV, "Table"
	for i := range table.Rows {
		row := &table.Rows[i]
		switch t.opts.IncludeObject {
		case metav1.IncludeNone:
			row.Object.Object = nil
		case metav1.IncludeObject:
			v, err := legacyscheme.Scheme.UnsafeConvertToVersion(row.Object.Object, versionedGV)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			setTypeMeta(v)
			row.Object.Object = v
		default:
			m, err := meta.Accessor(row.Object.Object)
			if err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			partial := meta.AsPartialObjectMetadata(m)
			partial.APIVersion, partial.Kind = t.tableGV, "PartialObjectMetadata"
			row.Object.Object = partial
		}
	}
	return table, nil
}

// setTypeMeta sets apiVersion/kind of a core/v1 object from the scheme.
func setTypeMeta(obj runtime.Object) {
	gvks, _, err := legacyscheme.Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) == 0 {
		return
	}
	for _, gvk := range gvks {
		if gvk.Version == "v1" {
			obj.GetObjectKind().SetGroupVersionKind(gvk)
			return
		}
	}
}

// watchEncoder writes metav1.WatchEvent frames, one JSON object per line.
type watchEncoder struct {
	w  io.Writer
	tr *transformer
}

func newWatchEncoder(w io.Writer, tr *transformer) *watchEncoder {
	return &watchEncoder{w: w, tr: tr}
}

func (e *watchEncoder) encode(typ watch.EventType, obj runtime.Object) error {
	obj = obj.DeepCopyObject()
	setTypeMeta(obj)
	out, err := e.tr.transform(obj)
	if err != nil {
		return err
	}
	if e.tr.table {
		e.tr.opts.NoHeaders = true // column definitions only in the first event
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return err
	}
	frame, err := json.Marshal(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw}})
	if err != nil {
		return err
	}
	_, err = e.w.Write(append(frame, '\n'))
	return err
}
