package podapi

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/core/helper"
	k8sv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/apis/core/validation"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"

	// Register the core group into legacyscheme with its defaulters, as the
	// kubelet's config sources do.
	_ "k8s.io/kubernetes/pkg/apis/core/install"

	btypes "github.com/bootlet/bootlet/types"
)

// Pod defaulting and validation belong to the API, as the apiserver's pod
// strategy does: the runner (package runner) only ever receives valid pods.

// DefaultPod applies exactly the defaulting the kubelet applies to a static
// pod file (pkg/kubelet/config/common.go): legacyscheme defaults, the
// namespace, nodeName, the NoExecute toleration and the config hash, then the
// apiserver's create validation. The pod keeps the name the client gave; see
// RuntimePod for the NAME-NODENAME form the runtime sees.
//
// A client-supplied UID is honoured if it has the apiserver's canonical
// UUID form (validateUID); otherwise a random one is assigned, and it is
// written into the returned pod so every later presentation (CRI objects,
// a static pod file at handoff) carries the same UID.
func DefaultPod(in *v1.Pod, nodeName string) (*v1.Pod, error) {
	// The kubelet decodes files with legacyscheme's UniversalDecoder, which
	// runs the v1 defaulters and converts to internal; this is the same for
	// an already-typed object.
	v1pod := in.DeepCopy()
	legacyscheme.Scheme.Default(v1pod)
	internal := &api.Pod{}
	if err := k8sv1.Convert_v1_Pod_To_core_Pod(v1pod, internal, nil); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("pod cannot be converted: %v", err))
	}

	if internal.UID == "" {
		internal.UID = uuid.NewUUID()
	}
	if internal.Namespace == "" {
		internal.Namespace = metav1.NamespaceDefault
	}
	internal.Spec.NodeName = nodeName
	if internal.Annotations == nil {
		internal.Annotations = map[string]string{}
	}
	internal.Annotations[kubetypes.ConfigHashAnnotationKey] = string(internal.UID)
	internal.Annotations[btypes.AnnotationManagedBy] = btypes.ManagedByValue
	helper.AddOrUpdateTolerationInPod(internal, &api.Toleration{Operator: "Exists", Effect: api.TaintEffectNoExecute})
	internal.Status = api.PodStatus{Phase: api.PodPending}

	if errs := ValidatePod(internal); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, in.Name, errs)
	}
	out := &v1.Pod{}
	if err := k8sv1.Convert_core_Pod_To_v1_Pod(internal, out, nil); err != nil {
		return nil, err
	}
	out.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	return out, nil
}

// ValidatePod is the apiserver's pod create validation plus what a node
// without an apiserver cannot serve, and the UID's form (the apiserver
// makes UIDs; bootlet takes them from clients).
func ValidatePod(pod *api.Pod) field.ErrorList {
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&pod.Spec, nil, &pod.ObjectMeta, nil)
	errs := validateUID(pod.UID, uidPath)
	errs = append(errs, validation.ValidatePodCreate(pod, opts)...)
	spec := field.NewPath("spec")
	for i, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == api.ContainerRestartPolicyAlways {
			errs = append(errs, field.NotSupported(spec.Child("initContainers").Index(i).Child("restartPolicy"), "Always", []string{"(unset)"}))
		}
	}
	if len(pod.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(spec.Child("ephemeralContainers"), "ephemeral containers are not supported by bootlet"))
	}
	if pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.HostUsers != nil && !*pod.Spec.SecurityContext.HostUsers {
		errs = append(errs, field.Forbidden(spec.Child("securityContext", "hostUsers"), "user namespaces are not supported by bootlet"))
	}
	for i, v := range pod.Spec.Volumes {
		p := spec.Child("volumes").Index(i)
		switch {
		case v.HostPath != nil, v.EmptyDir != nil, v.Secret != nil, v.ConfigMap != nil, v.DownwardAPI != nil, v.Projected != nil:
		default:
			errs = append(errs, field.Forbidden(p, "only hostPath, emptyDir, secret, configMap, downwardAPI and projected volumes can be served without an apiserver"))
		}
		if v.Projected != nil {
			for j, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil || s.ClusterTrustBundle != nil || s.PodCertificate != nil {
					errs = append(errs, field.Forbidden(p.Child("projected", "sources").Index(j), "serviceAccountToken, clusterTrustBundle and podCertificate sources need an apiserver"))
				}
			}
		}
	}
	return errs
}
