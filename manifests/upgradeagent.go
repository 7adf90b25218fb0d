package manifests

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"

	btypes "github.com/bootlet/bootlet/types"
)

// A worker's upgrade agent (`bootlet upgrade agent`) runs with the kubelet's
// own identity (system:node:NAME in system:nodes, its kubelet.conf): a
// worker holds no other, and minting one per worker would need a second
// bootstrap. The Node authorizer already lets it read its own Node; the one
// read it lacks is the ClusterVersion, which this ClusterRole grants. A
// master's agent runs in its daemon with the pivot's identity and needs
// none of it.
const (
	// UpgradeAgentRBACFile is the ClusterRole and ClusterRoleBinding under
	// self-hosted/. It sorts after ClusterVersionFile, so the pivot
	// creates the kind before the grant to read it, though neither
	// create needs the other.
	UpgradeAgentRBACFile = "bootlet-upgrade-agent-rbac.yaml"
	// upgradeAgentRoleName names the ClusterRole and its binding.
	upgradeAgentRoleName = "bootlet:upgrade-agent"
)

// UpgradeAgentRules are the node agent's calls beyond its own Node: it gets
// the one ClusterVersion by name each round (cvclient.Get) and never lists
// or watches it, so the rule is get of that name alone. Every node may read
// the upgrade's status with it, and nothing else of the upgrade: the spec
// and status are written by a person and the controller, never by a node.
func UpgradeAgentRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups:     []string{btypes.ClusterVersionGroup},
		Resources:     []string{btypes.ClusterVersionResource},
		Verbs:         []string{"get"},
		ResourceNames: []string{btypes.ClusterVersionName},
	}}
}

// upgradeAgentRBAC is the ClusterRole and its binding to system:nodes:
// the group, not each node's user, since every node's kubelet identity is
// in it and a worker that joins later needs no new object.
func upgradeAgentRBAC() []runtime.Object {
	return []runtime.Object{
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: upgradeAgentRoleName},
			Rules:      UpgradeAgentRules(),
		},
		clusterRoleBinding(upgradeAgentRoleName, upgradeAgentRoleName,
			rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: kubeadmconstants.NodesGroup}),
	}
}
