package manifests

import (
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/apis/admissionregistration"
	admissionv1 "k8s.io/kubernetes/pkg/apis/admissionregistration/v1"
	admissionvalidation "k8s.io/kubernetes/pkg/apis/admissionregistration/validation"
)

// TestNodeGuardPolicy evaluates the policy's CEL (cel-go, as the
// apiserver does, with untyped objects) on the updates the identity makes
// and on the ones it must not; the e2e test TestClusterJoinWorker has the
// apiserver refuse a promoted worker's identity.
func TestNodeGuardPolicy(t *testing.T) {
	objs := nodeGuardPolicy()
	policy, ok := objs[0].(*admissionregistrationv1.ValidatingAdmissionPolicy)
	if !ok {
		t.Fatalf("first object %T, want a ValidatingAdmissionPolicy", objs[0])
	}
	binding, ok := objs[1].(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	if !ok || binding.Spec.PolicyName != policy.Name || len(binding.Spec.ValidationActions) != 1 || binding.Spec.ValidationActions[0] != admissionregistrationv1.Deny {
		t.Fatalf("second object %+v, want a binding of %s that denies", objs[1], policy.Name)
	}
	// The apiserver's own defaulting and validation (its CEL compiled
	// too), as a create of the objects meets them.
	admissionv1.SetObjectDefaults_ValidatingAdmissionPolicy(policy)
	var internal admissionregistration.ValidatingAdmissionPolicy
	if err := admissionv1.Convert_v1_ValidatingAdmissionPolicy_To_admissionregistration_ValidatingAdmissionPolicy(policy, &internal, nil); err != nil {
		t.Fatal(err)
	}
	if errs := admissionvalidation.ValidateValidatingAdmissionPolicy(&internal); len(errs) > 0 {
		t.Errorf("the policy is invalid: %v", errs.ToAggregate())
	}
	admissionv1.SetObjectDefaults_ValidatingAdmissionPolicyBinding(binding)
	var internalBinding admissionregistration.ValidatingAdmissionPolicyBinding
	if err := admissionv1.Convert_v1_ValidatingAdmissionPolicyBinding_To_admissionregistration_ValidatingAdmissionPolicyBinding(binding, &internalBinding, nil); err != nil {
		t.Fatal(err)
	}
	if errs := admissionvalidation.ValidateValidatingAdmissionPolicyBinding(&internalBinding); len(errs) > 0 {
		t.Errorf("the binding is invalid: %v", errs.ToAggregate())
	}
	if fp := policy.Spec.FailurePolicy; fp == nil || *fp != admissionregistrationv1.Fail {
		t.Errorf("failure policy %v, want Fail: an error evaluating it must not let a label through", fp)
	}
	if len(policy.Spec.Validations) != 1 || policy.Spec.Validations[0].Reason == nil || *policy.Spec.Validations[0].Reason != metav1.StatusReasonForbidden {
		t.Fatalf("validations %+v, want one, Forbidden", policy.Spec.Validations)
	}
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType), cel.Variable("request", cel.DynType))
	if err != nil {
		t.Fatal(err)
	}
	eval := func(expr string, vars map[string]any) bool {
		t.Helper()
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", expr, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.Eval(vars)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return out.Value().(bool)
	}
	for _, tc := range []struct {
		user string
		want bool
	}{{CheckpointerUser, true}, {"system:node:worker-1", false}, {"kubernetes-admin", false}} {
		if got := eval(policy.Spec.MatchConditions[0].Expression, map[string]any{"request": map[string]any{"userInfo": map[string]any{"username": tc.user}}}); got != tc.want {
			t.Errorf("the policy applies to %s: %v, want %v", tc.user, got, tc.want)
		}
	}
	node := func(labels map[string]any, more map[string]any) map[string]any {
		meta := map[string]any{"name": "worker-1"}
		if labels != nil {
			meta["labels"] = labels
		}
		for k, v := range more {
			meta[k] = v
		}
		return map[string]any{"metadata": meta}
	}
	worker := map[string]any{"kubernetes.io/hostname": "worker-1"}
	master := map[string]any{"kubernetes.io/hostname": "worker-1", "node-role.kubernetes.io/control-plane": ""}
	for _, tc := range []struct {
		name     string
		old, new map[string]any
		allowed  bool
	}{
		{"an annotation of the masters' agent", node(master, nil), node(master, map[string]any{"annotations": map[string]any{"bootlet.dev/x": "1"}}), true},
		{"the control-plane taint (labels as they were)", node(worker, nil), node(worker, map[string]any{"taints": []any{}}), true},
		{"a node without labels stays so", node(nil, nil), node(nil, nil), true},
		{"a node labelled a master", node(worker, nil), node(master, nil), false},
		{"a master's label taken away", node(master, nil), node(worker, nil), false},
		{"a leader label", node(master, nil), node(map[string]any{"kubernetes.io/hostname": "worker-1", "node-role.kubernetes.io/control-plane": "", "node-restriction.kubernetes.io/bootlet-masters-leader": ""}, nil), false},
		{"a label's value changed", node(worker, nil), node(map[string]any{"kubernetes.io/hostname": "x"}, nil), false},
		{"labels given to a node without", node(nil, nil), node(worker, nil), false},
		{"every label removed", node(worker, nil), node(nil, nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := eval(policy.Spec.Validations[0].Expression, map[string]any{"object": tc.new, "oldObject": tc.old}); got != tc.allowed {
				t.Errorf("allowed %v, want %v", got, tc.allowed)
			}
		})
	}
}
