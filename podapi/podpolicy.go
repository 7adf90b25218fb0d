package podapi

import (
	"fmt"
	"net/http"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bootlet/bootlet/handoff"
)

// DefaultMaxPods is the kubelet's maxPods default.
const DefaultMaxPods = 110

// PodPolicy is what the pod API refuses beyond the apiserver's validation,
// because of what the node does with a pod.
type PodPolicy struct {
	// MaxPods caps the pods bootlet's API holds (terminating ones
	// included: they still run), as the kubelet's maxPods caps the pods it
	// admits. 0: no cap.
	MaxPods int
	// RefuseSecretEnv refuses pods that take Secret values into env. Set it
	// when the handoff to the kubelet is on: the static copy of such a pod
	// would show the values in a file and in the kubelet's mirror pod.
	RefuseSecretEnv bool
}

// SetPodPolicy sets the pod policy (before serving).
func (r *Registry) SetPodPolicy(p PodPolicy) { r.policy = p }

// secretEnvErrors is the RefuseSecretEnv check: one Forbidden error (422)
// per field that takes a Secret value into env.
func (r *Registry) secretEnvErrors(p *v1.Pod) error {
	if !r.policy.RefuseSecretEnv {
		return nil
	}
	if errs := handoff.SecretEnvRefs(&p.Spec); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, p.Name, errs)
	}
	return nil
}

// checkMaxPods refuses a pod past MaxPods with a 403, shaped as the
// apiserver's quota refusals ("exceeded quota"): the request is valid, the
// node has no room for it.
func (r *Registry) checkMaxPods(name string, stored int) error {
	if r.policy.MaxPods <= 0 || stored < r.policy.MaxPods {
		return nil
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
		Details: &metav1.StatusDetails{Name: name, Kind: podsGR.Resource},
		Message: fmt.Sprintf("pods %q is forbidden: node has reached its maximum of %d pods (--max-pods)", name, r.policy.MaxPods),
	}}
}
