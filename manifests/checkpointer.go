package manifests

import (
	"crypto/x509"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"

	btypes "github.com/bootlet/bootlet/types"
)

// The checkpointer reads the apiserver with an identity of its own and a kube-system Role granting
// exactly its calls (docs/design/checkpointer.md, "RBAC: the checkpointer's identity").
const (
	// CheckpointerUser is the checkpointer's user name (its certificate's CN).
	CheckpointerUser = btypes.CheckpointerUser
	// CheckpointerClient is its key pair under pki/.
	CheckpointerClient = "kubeconfig/bootlet-checkpointer"
	// CheckpointerKubeconfig is the daemon's --checkpointer-kubeconfig.
	CheckpointerKubeconfig = "bootlet-checkpointer.conf"
	// CheckpointerRBACFile is its Role and RoleBinding under self-hosted/,
	// created in the apiserver with the other self-hosted objects.
	CheckpointerRBACFile = "bootlet-checkpointer-rbac.yaml"
	// NodeGuardPolicyFile is the admission policy under self-hosted/ that
	// keeps the identity from changing a Node's labels (nodeGuardPolicy).
	NodeGuardPolicyFile = "bootlet-node-guard-policy.yaml"
	// checkpointerRoleName names the Role and the RoleBinding.
	checkpointerRoleName = "bootlet:checkpointer"
	// nodeGuardRoleName names the ClusterRole and ClusterRoleBinding of
	// the two cluster-wide controllers that run with the same identity on
	// every master: the bootstrap CSR approver and the control-plane taint.
	nodeGuardRoleName = "bootlet:node-guard"
)

// NodeGuardRules are the calls of package csrapprover (decide the kubelet
// client requests of bootstrap tokens: render grants the token's group no
// auto-approval, so no token holder gets an existing node's identity) and
// of package controlplanetaint (taint the masters while a worker exists),
// the checkpointer's read of the upgrade's ClusterVersion (a version
// whose step has not passed its gate is not checkpointed), and the
// masters' agent of a node labelled a master (its own Node's annotations).
// The identity lives on masters only (bootlet-checkpointer.conf, 0600), as
// the controller-manager's does.
func NodeGuardRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests/approval"}, Verbs: []string{"update"}},
		{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"signers"}, Verbs: []string{"approve"},
			ResourceNames: []string{certificatesv1.KubeAPIServerClientKubeletSignerName}},
		// patch: the masters' agent of a node labelled a master, which
		// reports on its own Node (masters/agent) with this identity.
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{btypes.ClusterVersionGroup}, Resources: []string{btypes.ClusterVersionResource}, Verbs: []string{"get"},
			ResourceNames: []string{btypes.ClusterVersionName}},
	}
}

// CheckpointerRules are the calls of bootlet's checkpointer, of its
// serving gate (package servinggate) and of the credential mirror (package
// credmirror), which use the same identity, and nothing more. The one write is the gate: a patch of the status of this
// node's self-hosted apiserver pods (the Role cannot narrow it to them; the
// gate's code patches only pods that declare the gate).
func CheckpointerRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets", "deployments", "replicasets"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get"}},
		// The credential mirror (package credmirror) watches the
		// control plane's credential Secrets, which no pod mounts.
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/status"}, Verbs: []string{"patch"}},
	}
}

func checkpointerCertSpec(c Config) certSpec {
	return certSpec{Base: CheckpointerClient, CA: CA, Validity: c.CertValidity,
		Config: certutil.Config{CommonName: CheckpointerUser, Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}}
}

func checkpointerKubeconfigSpec() kubeconfigSpec {
	return kubeconfigSpec{CheckpointerKubeconfig, CheckpointerUser, CheckpointerClient}
}

// checkpointerRBAC is the checkpointer's Role and RoleBinding in
// kube-system, and the node guard's ClusterRole and ClusterRoleBinding.
func checkpointerRBAC() []runtime.Object {
	meta := metav1.ObjectMeta{Name: checkpointerRoleName, Namespace: metav1.NamespaceSystem}
	guard := metav1.ObjectMeta{Name: nodeGuardRoleName}
	return []runtime.Object{
		&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: guard, Rules: NodeGuardRules()},
		&rbacv1.ClusterRoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"}, ObjectMeta: guard,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: nodeGuardRoleName},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: CheckpointerUser}}},
		&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"}, ObjectMeta: meta, Rules: CheckpointerRules()},
		&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}, ObjectMeta: meta,
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: checkpointerRoleName},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: CheckpointerUser}}},
	}
}

// NodeGuardPolicyMessage is what the apiserver answers the identity's
// change of a Node's labels with.
const NodeGuardPolicyMessage = "the bootlet checkpointer's identity does not change a Node's labels: a master is made by a person's label"

// nodeGuardPolicy is a ValidatingAdmissionPolicy and its binding: a Node
// updated with the checkpointer's identity keeps its labels. RBAC cannot
// narrow the node guard's update of Nodes to taints and annotations, and
// the identity is not on masters alone: a node labelled a master gets it
// (masters/nodekeys), and keeps it for its month after a demotion. With
// the labels open to it, such a node could label itself or another a
// master (node-role.kubernetes.io/control-plane), or a leader
// (masters.LabelLeader), which NodeRestriction forbids its kubelet. What
// the identity writes to a Node (the control-plane taint, the masters'
// agent's annotations) is not a label; the masters' agent sets the leader
// label with the pivot's identity.
func nodeGuardPolicy() []runtime.Object {
	// An object name, not an RBAC one: no colon.
	meta := metav1.ObjectMeta{Name: "bootlet-node-guard"}
	fail := admissionregistrationv1.Fail
	deny := []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}
	labels := func(o string) string {
		return fmt.Sprintf("(has(%s.metadata.labels) ? %s.metadata.labels : {})", o, o)
	}
	return []runtime.Object{
		&admissionregistrationv1.ValidatingAdmissionPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
			ObjectMeta: meta,
			Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
				FailurePolicy: &fail,
				MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
						Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes"}},
					}}}},
				MatchConditions: []admissionregistrationv1.MatchCondition{{
					Name: "checkpointer-identity", Expression: fmt.Sprintf("request.userInfo.username == %q", CheckpointerUser)}},
				Validations: []admissionregistrationv1.Validation{{
					Expression: labels("object") + " == " + labels("oldObject"),
					Message:    NodeGuardPolicyMessage,
					Reason:     ptr.To(metav1.StatusReasonForbidden),
				}},
			},
		},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
			ObjectMeta: meta,
			Spec:       admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: meta.Name, ValidationActions: deny},
		},
	}
}
