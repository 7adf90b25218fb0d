package masters

// BudgetedComponents are the control-plane workloads with a
// PodDisruptionBudget (render's): their pods elect a leader, so one may go
// while another remains.
var BudgetedComponents = []string{"kube-controller-manager", "kube-scheduler"}

// BudgetMinAvailable is those budgets' minAvailable with n masters, one
// pod each: one eviction at a time while another pod remains (n-1), and
// never the last one (1). Render's for the first boot, and the
// controller's once the set of masters changes.
func BudgetMinAvailable(n int) int {
	if n > 1 {
		return n - 1
	}
	return 1
}

// MasterCount is how many masters f shows: labelled nodes whose member
// votes. 0 while that is unsettled: etcd did not answer, or a voter has
// no labelled Node (a first-boot master before its pivot labels it, a
// master being demoted).
func MasterCount(f Facts) int {
	if f.Members == nil {
		return 0
	}
	v := newView(f)
	n := 0
	for _, node := range v.f.Nodes {
		if m := v.memberOf(node.Name, node.PeerURL()); node.Labelled && m != nil && !m.Learner {
			n++
		}
	}
	voters := 0
	for _, m := range v.voters() {
		if !m.Helper {
			voters++
		}
	}
	if n != voters {
		return 0
	}
	return n
}
