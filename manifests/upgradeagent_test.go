package manifests

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	rbacvalidation "k8s.io/kubernetes/pkg/registry/rbac/validation"
	rbacauthorizer "k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac"

	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade/cvclient"
	"github.com/bootlet/bootlet/upgrade/nodeagent"
)

// renderedAuthorizer is the RBAC authorizer of every Role, ClusterRole and
// binding render writes under self-hosted/, as the apiserver evaluates
// them once the pivot has created them. The roles the apiserver's
// bootstrap policy creates (system:node-bootstrapper, ...) are not among
// them, so it grants less than a cluster does, never more.
func renderedAuthorizer(t *testing.T, dir string) authorizer.Authorizer {
	t.Helper()
	var roles []*rbacv1.Role
	var roleBindings []*rbacv1.RoleBinding
	var clusterRoles []*rbacv1.ClusterRole
	var clusterRoleBindings []*rbacv1.ClusterRoleBinding
	files, _ := filepath.Glob(filepath.Join(dir, SelfHostedDir, "*.yaml"))
	for _, f := range files {
		for _, o := range decodeAll(t, f) {
			switch o := o.(type) {
			case *rbacv1.Role:
				roles = append(roles, o)
			case *rbacv1.RoleBinding:
				roleBindings = append(roleBindings, o)
			case *rbacv1.ClusterRole:
				clusterRoles = append(clusterRoles, o)
			case *rbacv1.ClusterRoleBinding:
				clusterRoleBindings = append(clusterRoleBindings, o)
			}
		}
	}
	_, static := rbacvalidation.NewTestRuleResolver(roles, roleBindings, clusterRoles, clusterRoleBindings)
	return rbacauthorizer.New(static, static, static, static)
}

// workerKubelet is a worker's kubelet identity after its TLS bootstrap, the
// one `bootlet upgrade agent` runs with.
var workerKubelet = &user.DefaultInfo{Name: "system:node:w1", Groups: []string{"system:nodes", user.AllAuthenticated}}

func clusterVersionRequest(u user.Info, verb, subresource, name string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: btypes.ClusterVersionGroup, APIVersion: btypes.ClusterVersionVersion,
		Resource: btypes.ClusterVersionResource, Subresource: subresource, Name: name, ResourceRequest: true}
}

// TestUpgradeAgentRBAC: render grants the nodes' group a get of the one
// ClusterVersion, in a ClusterRole of its own, and nothing else of it: not
// a list or watch (the agent makes neither), not another name, no write,
// and nothing to an identity outside system:nodes (a bootstrap token, an
// anonymous request).
func TestUpgradeAgentRBAC(t *testing.T) {
	dir := rendered(t)
	objs := decodeAll(t, filepath.Join(dir, SelfHostedDir, UpgradeAgentRBACFile))
	if len(objs) != 2 {
		t.Fatalf("%d objects, want a ClusterRole and its ClusterRoleBinding", len(objs))
	}
	role, ok := objs[0].(*rbacv1.ClusterRole)
	want := []rbacv1.PolicyRule{{APIGroups: []string{"bootlet.dev"}, Resources: []string{"clusterversions"}, Verbs: []string{"get"}, ResourceNames: []string{"cluster"}}}
	if !ok || role.Name != "bootlet:upgrade-agent" || !reflect.DeepEqual(role.Rules, want) {
		t.Fatalf("first object %T %+v, want ClusterRole bootlet:upgrade-agent with exactly %+v", objs[0], objs[0], want)
	}
	crb, ok := objs[1].(*rbacv1.ClusterRoleBinding)
	if !ok || crb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}) ||
		!reflect.DeepEqual(crb.Subjects, []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}}) {
		t.Fatalf("second object %T %+v, want %s bound to the group system:nodes only", objs[1], objs[1], role.Name)
	}
	// No other rendered object binds the role, or names the kind.
	files, _ := filepath.Glob(filepath.Join(dir, SelfHostedDir, "*.yaml"))
	for _, f := range files {
		if filepath.Base(f) == UpgradeAgentRBACFile {
			continue
		}
		for _, o := range decodeAll(t, f) {
			switch o := o.(type) {
			case *rbacv1.ClusterRoleBinding:
				if o.RoleRef.Name == role.Name {
					t.Errorf("%s binds %s too: %+v", filepath.Base(f), role.Name, o.Subjects)
				}
			case *rbacv1.RoleBinding:
				if o.RoleRef.Name == role.Name {
					t.Errorf("%s binds %s too: %+v", filepath.Base(f), role.Name, o.Subjects)
				}
			}
		}
	}

	authz := renderedAuthorizer(t, dir)
	ctx := context.Background()
	allowed := func(a authorizer.AttributesRecord) bool {
		d, _, err := authz.Authorize(ctx, a)
		if err != nil {
			t.Logf("%s %s/%s %q: %v", a.Verb, a.Resource, a.Subresource, a.Name, err)
		}
		return d == authorizer.DecisionAllow
	}
	if !allowed(clusterVersionRequest(workerKubelet, "get", "", btypes.ClusterVersionName)) {
		t.Errorf("a worker's kubelet identity may not get clusterversions/%s", btypes.ClusterVersionName)
	}
	for _, a := range []authorizer.AttributesRecord{
		clusterVersionRequest(workerKubelet, "list", "", ""),
		clusterVersionRequest(workerKubelet, "watch", "", ""),
		clusterVersionRequest(workerKubelet, "get", "", "other"),
		clusterVersionRequest(workerKubelet, "get", "status", btypes.ClusterVersionName),
		clusterVersionRequest(workerKubelet, "create", "", ""),
		clusterVersionRequest(workerKubelet, "update", "", btypes.ClusterVersionName),
		clusterVersionRequest(workerKubelet, "patch", "", btypes.ClusterVersionName),
		clusterVersionRequest(workerKubelet, "update", "status", btypes.ClusterVersionName),
		clusterVersionRequest(workerKubelet, "delete", "", btypes.ClusterVersionName),
		clusterVersionRequest(&user.DefaultInfo{Name: "system:bootstrap:abcdef", Groups: []string{"system:bootstrappers:kubeadm:default-node-token", user.AllAuthenticated}},
			"get", "", btypes.ClusterVersionName),
		clusterVersionRequest(&user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}, "get", "", btypes.ClusterVersionName),
	} {
		if allowed(a) {
			t.Errorf("%s (%v) may %s clusterversions/%s %q", a.User.GetName(), a.User.GetGroups(), a.Verb, a.Subresource, a.Name)
		}
	}
	// The checkpointer reads the step in flight (a version not through its
	// gate is not checkpointed), and nothing more of it.
	checkpointer := &user.DefaultInfo{Name: CheckpointerUser, Groups: []string{user.AllAuthenticated}}
	if !allowed(clusterVersionRequest(checkpointer, "get", "", btypes.ClusterVersionName)) {
		t.Errorf("the checkpointer may not get clusterversions/%s", btypes.ClusterVersionName)
	}
	for _, a := range []authorizer.AttributesRecord{
		clusterVersionRequest(checkpointer, "list", "", ""),
		clusterVersionRequest(checkpointer, "update", "status", btypes.ClusterVersionName),
		clusterVersionRequest(checkpointer, "patch", "", btypes.ClusterVersionName),
	} {
		if allowed(a) {
			t.Errorf("the checkpointer may %s clusterversions/%s %q", a.Verb, a.Subresource, a.Name)
		}
	}
}

// TestUpgradeAgentCallsWithinRBAC: the node agent's rounds, with and
// without a step of its node, make no call the rendered RBAC does not grant
// a worker's kubelet identity, apart from reading its own Node, which the
// Node authorizer grants every kubelet. The other half of
// TestUpgradeAgentRBAC: what is granted is what is used.
func TestUpgradeAgentCallsWithinRBAC(t *testing.T) {
	authz := renderedAuthorizer(t, rendered(t))
	ctx := context.Background()
	const node = "w1"
	kubelet := filepath.Join(t.TempDir(), "kubelet")
	// The binary in place already reports the target, so a drained step
	// asks for no install (no containerd here).
	if err := os.WriteFile(kubelet, []byte("#!/bin/sh\necho Kubernetes v1.37.2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cs := fake.NewSimpleClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node},
		Status: v1.NodeStatus{NodeInfo: v1.NodeSystemInfo{KubeletVersion: "v1.37.2"}}})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{cvclient.Resource: btypes.ClusterVersionKind + "List"})
	agent := nodeagent.New(nodeagent.Config{NodeName: node, KubeletBinary: kubelet, RestartCommand: []string{"false"}})
	round := func(what string) {
		t.Helper()
		if err := agent.Round(ctx, cs, dyn); err != nil {
			t.Errorf("%s: round: %v", what, err)
		}
	}

	round("no ClusterVersion")
	cv, err := cvclient.SetDesired(ctx, dyn, "v1.37.2", false)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewTime(time.Now())
	for _, s := range []*btypes.UpgradeStep{
		{Component: "kubelet", Node: "other", From: "v1.36.3", To: "v1.37.2", Began: &now},
		{Component: "kubelet", Node: node, From: "v1.36.3", To: "v1.37.2", Began: &now},
		{Component: "kubelet", Node: node, From: "v1.36.3", To: "v1.37.2", Began: &now, Drained: &now},
	} {
		cv.Status.InFlight = s
		if cv, err = cvclient.UpdateStatus(ctx, dyn, cv); err != nil {
			t.Fatal(err)
		}
		dyn.ClearActions()
		round("step " + s.Node)
		checkAgentCalls(t, authz, dyn.Actions())
	}

	var nodeReads int
	for _, a := range cs.Actions() {
		g, ok := a.(k8stesting.GetAction)
		if !ok || a.GetResource().Resource != "nodes" || g.GetName() != node {
			t.Errorf("the agent called %s %s %v: a kubelet's identity may only read its own Node there", a.GetVerb(), a.GetResource().Resource, a)
			continue
		}
		nodeReads++
	}
	if nodeReads == 0 {
		t.Error("the agent never read its Node: the rounds did not reach this node's step")
	}
}

// checkAgentCalls fails on a ClusterVersion call the worker's kubelet
// identity may not make, and when there is none (a vacuous check).
func checkAgentCalls(t *testing.T, authz authorizer.Authorizer, actions []k8stesting.Action) {
	t.Helper()
	if len(actions) == 0 {
		t.Error("the agent made no ClusterVersion call")
	}
	for _, a := range actions {
		var name string
		if g, ok := a.(k8stesting.GetAction); ok {
			name = g.GetName()
		}
		gvr := a.GetResource()
		attrs := authorizer.AttributesRecord{User: workerKubelet, Verb: a.GetVerb(), APIGroup: gvr.Group, APIVersion: gvr.Version,
			Resource: gvr.Resource, Subresource: a.GetSubresource(), Name: name, ResourceRequest: true}
		if d, _, _ := authz.Authorize(context.Background(), attrs); d != authorizer.DecisionAllow {
			t.Errorf("the agent called %s %s/%s %q, which the rendered RBAC does not grant system:nodes", a.GetVerb(), gvr.Group, gvr.Resource, name)
		}
	}
}
