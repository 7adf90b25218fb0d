package manifests

import (
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
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
	if len(objs) != 2 {
		t.Fatalf("%d objects, want a Role and a RoleBinding", len(objs))
	}
	role, ok := objs[0].(*rbacv1.Role)
	if !ok || role.Namespace != "kube-system" {
		t.Fatalf("first object %T %v, want a Role in kube-system", objs[0], objs[0])
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets", "deployments", "replicasets"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get"}},
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
	// Nothing else binds the checkpointer: no ClusterRole, no cluster-wide
	// Secret read.
	files, _ := filepath.Glob(filepath.Join(dir, SelfHostedDir, "*.yaml"))
	for _, f := range files {
		for _, o := range decodeAll(t, f) {
			var subjects []rbacv1.Subject
			switch b := o.(type) {
			case *rbacv1.ClusterRoleBinding:
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
