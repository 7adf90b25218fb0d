package manifests

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
)

// TestCheckpointerRBAC: render gives the checkpointer its own certificate
// (its user, no group: not system:masters) and a kube-system Role with
// exactly its calls, bound to that user alone; no other rendered object
// binds it. package checkpointer's TestCheckpointerCallsWithinRBAC checks the other half:
// every call the checkpointer makes is one of these rules.
func TestCheckpointerRBAC(t *testing.T) {
	dir := rendered(t)
	cfg, err := clientcmd.LoadFromFile(filepath.Join(dir, CheckpointerKubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	cert := parseCert(t, rc.CertData)
	if cert.Subject.CommonName != CheckpointerUser || len(cert.Subject.Organization) != 0 {
		t.Errorf("checkpointer certificate subject %s, want CN=%s and no group", cert.Subject, CheckpointerUser)
	}

	objs := decodeAll(t, filepath.Join(dir, SelfHostedDir, CheckpointerRBACFile))
	if len(objs) != 4 {
		t.Fatalf("%d objects, want the node guard's ClusterRole and ClusterRoleBinding, a Role and a RoleBinding", len(objs))
	}
	guard, ok := objs[0].(*rbacv1.ClusterRole)
	if !ok || !reflect.DeepEqual(guard.Rules, NodeGuardRules()) {
		t.Fatalf("first object %T %v, want the node guard's ClusterRole", objs[0], objs[0])
	}
	// The node guard approves only kubelet client requests, and writes
	// only Nodes (taints) and events: never a Secret, a pod or RBAC.
	for _, r := range guard.Rules {
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.Resources, "secrets") {
			t.Errorf("node guard rule %+v is too wide", r)
		}
		if slices.Contains(r.Resources, "signers") && !reflect.DeepEqual(r.ResourceNames, []string{"kubernetes.io/kube-apiserver-client-kubelet"}) {
			t.Errorf("node guard may approve for signers %v", r.ResourceNames)
		}
	}
	if crb, ok := objs[1].(*rbacv1.ClusterRoleBinding); !ok || crb.RoleRef.Name != guard.Name ||
		!reflect.DeepEqual(crb.Subjects, []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: CheckpointerUser}}) {
		t.Fatalf("second object %T %v, want the node guard bound to %s only", objs[1], objs[1], CheckpointerUser)
	}
	objs = objs[2:]
	role, ok := objs[0].(*rbacv1.Role)
	if !ok || role.Namespace != "kube-system" {
		t.Fatalf("first object %T %v, want a Role in kube-system", objs[0], objs[0])
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets", "deployments", "replicasets"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}},
	}
	if !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("Role rules:\n%+v\nwant exactly:\n%+v", role.Rules, want)
	}
	// Reads, and one write: the serving gate's patch of a pod's status
	// (never of a pod, a Secret or anything else).
	for _, r := range role.Rules {
		reads := !slices.ContainsFunc(r.Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" })
		gate := reflect.DeepEqual(r, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}})
		if slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") || !reads && !gate {
			t.Errorf("rule %+v grants more than reads and the serving gate's status patch", r)
		}
	}
	rb, ok := objs[1].(*rbacv1.RoleBinding)
	if !ok || rb.Namespace != "kube-system" || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name ||
		!reflect.DeepEqual(rb.Subjects, []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: CheckpointerUser}}) {
		t.Errorf("RoleBinding %+v, want the Role bound to %s only", objs[1], CheckpointerUser)
	}
	// Nothing else binds the checkpointer: no other ClusterRole, no
	// cluster-wide Secret read.
	files, _ := filepath.Glob(filepath.Join(dir, SelfHostedDir, "*.yaml"))
	for _, f := range files {
		for _, o := range decodeAll(t, f) {
			var subjects []rbacv1.Subject
			switch b := o.(type) {
			case *rbacv1.ClusterRoleBinding:
				if filepath.Base(f) == CheckpointerRBACFile {
					continue
				}
				subjects = b.Subjects
			case *rbacv1.RoleBinding:
				if filepath.Base(f) == CheckpointerRBACFile {
					continue
				}
				subjects = b.Subjects
			}
			for _, s := range subjects {
				if s.Name == CheckpointerUser {
					t.Errorf("%s binds the checkpointer too: %+v", filepath.Base(f), o)
				}
			}
		}
	}
}

// TestNoAutoApprovalOfBootstrapTokens: no rendered binding lets the
// controller-manager approve a bootstrap token's node client request
// (it would for any node name, a master's included); the renewals'
// binding for system:nodes stays.
func TestNoAutoApprovalOfBootstrapTokens(t *testing.T) {
	dir := t.TempDir()
	if err := render(testConfig(), dir, time.Now(), t.Logf); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, SelfHostedDir, "*.yaml"))
	renewals := false
	for _, f := range files {
		for _, o := range decodeAll(t, f) {
			b, ok := o.(*rbacv1.ClusterRoleBinding)
			if !ok {
				continue
			}
			if b.RoleRef.Name == kubeadmconstants.CSRAutoApprovalClusterRoleName {
				t.Errorf("%s: %s binds %s to %v", filepath.Base(f), b.Name, b.RoleRef.Name, b.Subjects)
			}
			if b.RoleRef.Name == kubeadmconstants.NodeSelfCSRAutoApprovalClusterRoleName {
				renewals = true
			}
		}
	}
	if !renewals {
		t.Errorf("no binding to %s: nodes could not renew their certificates", kubeadmconstants.NodeSelfCSRAutoApprovalClusterRoleName)
	}
}
