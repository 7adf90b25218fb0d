package manifests

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// internalCRD is the CRD as the apiserver validates it.
func internalCRD(t *testing.T) *apiextensions.CustomResourceDefinition {
	t.Helper()
	var out apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(ClusterVersionCRD(), &out, nil); err != nil {
		t.Fatal(err)
	}
	return &out
}

// TestClusterVersionCRDIsValid runs the apiextensions apiserver's own
// validation of a CRD on it: what a create would refuse.
func TestClusterVersionCRDIsValid(t *testing.T) {
	crd := internalCRD(t)
	// The registry's PrepareForCreate records the storage version before
	// it validates.
	crd.Status.StoredVersions = []string{crd.Spec.Versions[0].Name}
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), crd); len(errs) > 0 {
		t.Fatalf("the apiserver would refuse the CRD: %v", errs.ToAggregate())
	}
}

// TestClusterVersionObjects validates objects against the CRD's schema and
// its CEL rule as the apiserver does on a create: bad input is refused
// naming the field.
func TestClusterVersionObjects(t *testing.T) {
	crd := internalCRD(t)
	// The internal CRD keeps a schema all versions share at the top.
	props := crd.Spec.Validation.OpenAPIV3Schema
	schemaValidator, _, err := validation.NewSchemaValidator(props)
	if err != nil {
		t.Fatal(err)
	}
	structural, err := schema.NewStructural(props)
	if err != nil {
		t.Fatal(err)
	}
	celValidator := cel.NewValidator(structural, true, celconfig.PerCallLimit)
	obj := func(name, spec string) map[string]any {
		u := map[string]any{"apiVersion": "bootlet.dev/v1alpha1", "kind": "ClusterVersion", "metadata": map[string]any{"name": name}}
		if spec != "" {
			var s map[string]any
			if err := runtimeDecode(spec, &s); err != nil {
				t.Fatal(err)
			}
			u["spec"] = s
		}
		return u
	}
	tests := []struct {
		name string
		obj  map[string]any
		want string // "" valid; else the field path in the error
	}{
		{"a release", obj("cluster", `{"desiredVersion":"v1.37.2"}`), ""},
		{"a release and a retry", obj("cluster", `{"desiredVersion":"v1.37.2","retry":3}`), ""},
		{"latest", obj("cluster", `{"desiredVersion":"latest"}`), "spec.desiredVersion"},
		{"no v", obj("cluster", `{"desiredVersion":"1.37.2"}`), "spec.desiredVersion"},
		{"a minor alone", obj("cluster", `{"desiredVersion":"v1.37"}`), "spec.desiredVersion"},
		{"no desired version", obj("cluster", `{}`), "spec.desiredVersion"},
		{"no spec", obj("cluster", ""), "spec"},
		{"a negative retry", obj("cluster", `{"desiredVersion":"v1.37.2","retry":-1}`), "spec.retry"},
		{"another name", obj("prod", `{"desiredVersion":"v1.37.2"}`), `named "cluster"`},
	}
	for _, tt := range tests {
		errs := validation.ValidateCustomResource(nil, tt.obj, schemaValidator)
		celErrs, _ := celValidator.Validate(context.Background(), field.NewPath(""), structural, tt.obj, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
		switch {
		case tt.want == "" && len(errs) > 0:
			t.Errorf("%s: refused: %v", tt.name, errs.ToAggregate())
		case tt.want != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tt.want)):
			t.Errorf("%s: %v, want an error naming %s", tt.name, errs.ToAggregate(), tt.want)
		}
	}
}

// runtimeDecode decodes JSON as the apiserver does for a custom
// resource (integers as int64).
func runtimeDecode(s string, into *map[string]any) error {
	return utiljson.Unmarshal([]byte(s), into)
}
