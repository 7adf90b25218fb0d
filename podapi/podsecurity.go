package podapi

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/bootlet/bootlet/podapi/authn"
)

// Pod Security admission, opt in (--pod-security-level): a pod created
// through the API by a user outside the exempt groups must meet the Pod
// Security Standards level, checked by the upstream evaluator as the
// apiserver's PodSecurity admission does, and is refused with the same 403
// otherwise. Exempt by default: system:masters, the group root and the
// main socket's group act in; they may run privileged control-plane pods.
// Updates need no check: a pod's security fields are immutable (the
// update validation refuses changing them). Pods bootlet creates itself
// (--manifests-dir, checkpoints) are not API writes and are not checked.

// DefaultPodSecurityExemptGroups is --pod-security-exempt-group's default.
var DefaultPodSecurityExemptGroups = []string{user.SystemPrivilegedGroup}

// podSecurity is the configured policy.
type podSecurity struct {
	level     psaapi.LevelVersion
	exempt    sets.Set[string]
	evaluator policy.Evaluator
}

// SetPodSecurity turns Pod Security admission on at level (privileged,
// baseline or restricted; "" turns it off) for every user in none of the
// exempt groups. Call before serving.
func (s *Server) SetPodSecurity(level string, exemptGroups []string) error {
	if level == "" {
		s.podSecurity = nil
		return nil
	}
	l, err := psaapi.ParseLevel(level)
	if err != nil {
		return fmt.Errorf("--pod-security-level: %w", err)
	}
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return err
	}
	s.podSecurity = &podSecurity{
		level:     psaapi.LevelVersion{Level: l, Version: psaapi.LatestVersion()},
		exempt:    sets.New(exemptGroups...),
		evaluator: ev,
	}
	return nil
}

// admitPod applies Pod Security admission to a pod being created by the
// request's user: nil, or a 403 Forbidden Status worded as the apiserver's.
func (s *Server) admitPod(ctx context.Context, obj runtime.Object) error {
	ps := s.podSecurity
	pod, ok := obj.(*v1.Pod)
	if ps == nil || !ok {
		return nil
	}
	if u := authn.UserFrom(ctx); u != nil && ps.exempt.HasAny(u.GetGroups()...) {
		return nil
	}
	res := policy.AggregateCheckResults(ps.evaluator.EvaluatePod(ps.level, &pod.ObjectMeta, &pod.Spec))
	if res.Allowed {
		return nil
	}
	return apierrors.NewForbidden(podsGR, pod.Name, fmt.Errorf("violates PodSecurity %q: %s", ps.level.String(), res.ForbiddenDetail()))
}
