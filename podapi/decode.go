package podapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/managedfields"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// What the write verbs share: request bodies decoded under the
// fieldValidation directive, the field manager, content types.

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
