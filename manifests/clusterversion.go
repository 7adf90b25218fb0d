package manifests

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientsetscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	btypes "github.com/bootlet/bootlet/types"
)

// releasePattern is a Kubernetes release as the desired version names
// it: v, major, minor and patch, nothing else (no "latest", no ranges).
const releasePattern = `^v[0-9]+\.[0-9]+\.[0-9]+$`

// The self-hosted files are written and read with client-go's scheme,
// which has no CustomResourceDefinition until it is added.
func init() { utilruntime.Must(apiextensionsv1.AddToScheme(clientsetscheme.Scheme)) }

// ClusterVersionFile is the CRD's file under self-hosted/: the pivot
// creates it with the other self-hosted objects, so every cluster has the
// kind before anyone asks for a version, and etcd's backups keep it.
const ClusterVersionFile = "bootlet-clusterversion-crd.yaml"

// ClusterVersionCRD is the CustomResourceDefinition of the upgrade's
// desired-version object (types.ClusterVersion): cluster-scoped, one
// object named "cluster", its spec validated by the apiserver (a version
// that is not one is refused with a Status naming the field, and nothing
// is stored), its status a subresource (the controller's writes never
// touch what a person asked for), and printer columns for kubectl get.
func ClusterVersionCRD() *apiextensionsv1.CustomResourceDefinition {
	str := func(desc string) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "string", Description: desc}
	}
	versions := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"kubernetes": str("the Kubernetes version"), "etcd": str("etcd's"), "coreDNS": str("CoreDNS's"),
	}}
	step := apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"component", "from", "to"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"component": str("the component"), "node": str("its node; none for a cluster-wide add-on"),
		"from": str("the version it ran"), "to": str("the version it moves to"),
		"began":   {Type: "string", Format: "date-time", Description: "when the step began: its gate's timeout runs from there"},
		"drained": {Type: "string", Format: "date-time", Description: "a kubelet's step: when the node was drained, after which its agent replaces the kubelet"},
	}}
	condition := apiextensionsv1.JSONSchemaProps{Type: "object", Required: []string{"type", "status", "lastTransitionTime", "reason", "message"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"type": str("Progressing, Available or Failing"), "status": {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"True"`)}, {Raw: []byte(`"False"`)}, {Raw: []byte(`"Unknown"`)}}},
			"observedGeneration": {Type: "integer", Format: "int64"}, "lastTransitionTime": {Type: "string", Format: "date-time"},
			"reason": str("a CamelCase word"), "message": str("what a person can act on"),
		}}
	spec := apiextensionsv1.JSONSchemaProps{
		Type:     "object",
		Required: []string{"desiredVersion"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"desiredVersion": {Type: "string", Pattern: releasePattern, Description: "the Kubernetes release to run, e.g. v1.37.2; one minor up from what runs"},
			"retry":          {Type: "integer", Format: "int64", Minimum: ptr.To(0.0), Description: "bump to try the same desired version again after the upgrade stopped"},
			"etcdUpgrade":    {Type: "boolean", Description: "false keeps etcd at the version it runs (kubeadm's --etcd-upgrade=false); default true"},
		},
	}
	status := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"observedGeneration": {Type: "integer", Format: "int64"},
		"current":            versions,
		"components": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Required: []string{"component", "version"},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"component": str(""), "node": str(""), "version": str("")}}}},
		"step":              str("the step under way"),
		"inFlight":          step,
		"rollingBack":       step,
		"stoppedGeneration": {Type: "integer", Format: "int64"},
		"conditions": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &condition},
			XListType: ptr.To("map"), XListMapKeys: []string{"type"}},
		"history": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Required: []string{"version", "state", "startedTime"},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"version": str(""), "state": {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"Partial"`)}, {Raw: []byte(`"Completed"`)}, {Raw: []byte(`"RolledBack"`)}}},
				"startedTime": {Type: "string", Format: "date-time"}, "completionTime": {Type: "string", Format: "date-time"}, "message": str(""),
			}}}},
	}}
	cond := func(t string) string { return `.status.conditions[?(@.type=="` + t + `")].status` }
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: btypes.ClusterVersionResource + "." + btypes.ClusterVersionGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: btypes.ClusterVersionGroup,
			Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: btypes.ClusterVersionResource, Singular: "clusterversion", Kind: btypes.ClusterVersionKind, ListKind: btypes.ClusterVersionKind + "List",
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: btypes.ClusterVersionVersion, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:     "object",
					Required: []string{"spec"},
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": {Type: "string"}, "kind": {Type: "string"}, "metadata": {Type: "object"},
						"spec": spec, "status": status,
					},
					// One object, named "cluster": the cluster has one version.
					XValidations: apiextensionsv1.ValidationRules{{
						Rule:    `self.metadata.name == "` + btypes.ClusterVersionName + `"`,
						Message: `the one ClusterVersion is named "` + btypes.ClusterVersionName + `"`,
					}},
				}},
				AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
					{Name: "Desired", Type: "string", JSONPath: ".spec.desiredVersion"},
					{Name: "Current", Type: "string", JSONPath: ".status.current.kubernetes"},
					{Name: "Progressing", Type: "string", JSONPath: cond("Progressing")},
					{Name: "Available", Type: "string", JSONPath: cond("Available")},
					{Name: "Failing", Type: "string", JSONPath: cond("Failing")},
					{Name: "Step", Type: "string", JSONPath: ".status.step", Priority: 1},
					{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
				},
			}},
		},
	}
}
