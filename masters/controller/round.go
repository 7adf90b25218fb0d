package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/internal/etcdapi"
	"github.com/bootlet/bootlet/masters"
	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
	"github.com/bootlet/bootlet/upgrade/cvclient"
	"github.com/bootlet/bootlet/upgrade/nodeagent"
)

// rounds is the leader's state between rounds: its clients, and what it
// last said, so that a waiting round is logged once.
type rounds struct {
	cfg      Config
	cs       kubernetes.Interface
	dyn      dynamic.Interface
	recorder record.EventRecorder
	said     string
	// nodes are the Nodes this round observed, for its report.
	nodes []v1.Node
	// budgeted is the number of masters the disruption budgets were
	// last made right for (0: not yet), so that they are read only when
	// that number changes, not every round.
	budgeted int
	// electedFor is the number of masters the elected components'
	// workloads were last looked at for (keepElectedWorkloads), and
	// electedPending whether a change of them was then under way: they
	// are read again only when either says so, not every round.
	electedFor     int
	electedPending bool
}

// round observes, decides, writes the record, acts, then reports. Any
// error before the record is written ends the round; the next one
// observes again.
func (r *rounds) round(ctx context.Context) {
	f, kept, etcd, err := r.observe(ctx)
	if etcd != nil {
		defer etcd.Close()
	}
	if err != nil {
		klog.ErrorS(err, "Masters controller: observing the cluster")
		return
	}
	d := masters.Decide(f)
	if d.Why != r.said {
		klog.InfoS("Masters controller", "act", d.Act.Kind, "node", d.Act.Node, "why", d.Why)
		r.said = d.Why
	}
	// The record first: a leader that dies after it acted leaves the
	// operation recorded, and the next one resumes it rather than
	// beginning another on a member list halfway through the act.
	if err := writeRecord(ctx, r.cs, kept, d.Record); err != nil {
		if !apierrors.IsConflict(err) {
			klog.ErrorS(err, "Masters controller: writing the record", "configmap", metav1.NamespaceSystem+"/"+RecordName)
		}
		return
	}
	if err := act(ctx, etcd, f.Members, d.Act); err != nil {
		// Not a failure of the operation: the rule book bounds each wait,
		// and the next round asks again.
		klog.ErrorS(err, "Masters controller: acting", "act", d.Act.Kind, "node", d.Act.Node, "member", fmt.Sprintf("%x", d.Act.MemberID))
	} else if d.Act.Kind != masters.None {
		klog.InfoS("Masters controller: acted", "act", d.Act.Kind, "node", d.Act.Node, "member", fmt.Sprintf("%x", d.Act.MemberID), "peer", d.Act.PeerURL)
	}
	for _, p := range d.Placements {
		if err := place(ctx, r.cs, p); err != nil {
			klog.ErrorS(err, "Masters controller: placing the control plane's pods", "node", p.Node, "controlPlane", p.ControlPlane)
			continue
		}
		klog.InfoS("Masters controller: the control plane's pods follow", "node", p.Node, "controlPlane", p.ControlPlane, "label", btypes.LabelControlPlanePods)
	}
	if n := masters.MasterCount(f); d.Record.Op == nil && n != 0 && n != r.budgeted && keepBudgets(ctx, r.cs, n) {
		r.budgeted = n
	}
	if n := masters.MasterCount(f); d.Record.Op == nil && !f.UpgradeUnderway && n != 0 && (n != r.electedFor || r.electedPending) {
		r.electedPending, r.electedFor = r.keepElectedWorkloads(ctx, n), n
	}
	r.report(ctx, f, d)
}

// keepBudgets sets the control plane's PodDisruptionBudgets for
// masterCount masters as the set of masters changes (render sets them
// for the first boot's). Between operations only, and only an integer
// minAvailable it finds: a budget a person changed to another form is
// theirs. false if a budget could not be read or written.
func keepBudgets(ctx context.Context, cs kubernetes.Interface, masterCount int) bool {
	want, ok := masters.BudgetMinAvailable(masterCount), true
	for _, name := range masters.BudgetedComponents {
		pdb, err := cs.PolicyV1().PodDisruptionBudgets(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if !apierrors.IsNotFound(err) {
				klog.ErrorS(err, "Masters controller: reading a disruption budget", "name", name)
				ok = false
			}
			continue
		}
		ma := pdb.Spec.MinAvailable
		if ma == nil || ma.Type != intstr.Int || ma.IntValue() == want {
			continue
		}
		patch := fmt.Sprintf(`{"spec":{"minAvailable":%d}}`, want)
		if _, err := cs.PolicyV1().PodDisruptionBudgets(metav1.NamespaceSystem).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: Component}); err != nil {
			klog.ErrorS(err, "Masters controller: setting a disruption budget", "name", name, "minAvailable", want)
			ok = false
			continue
		}
		klog.InfoS("Masters controller: the disruption budget follows the masters", "name", name, "masters", masterCount, "minAvailable", want)
	}
	return ok
}

// keepElectedWorkloads makes the controller-manager's and the scheduler's
// workloads follow the masters' label once there are several masters
// (masters.DecideWorkload: a one-master render's Deployment becomes a
// DaemonSet). Between operations and upgrade steps only, one step per
// component per round. It reports whether a change is under way (or a
// read failed): the next round looks again.
func (r *rounds) keepElectedWorkloads(ctx context.Context, masterCount int) bool {
	pending := false
	underway := "" // a component whose change is under way: the next waits
	for _, name := range masters.ElectedComponents {
		dep, ds, err := readElectedWorkload(ctx, r.cs, name)
		if err != nil {
			klog.ErrorS(err, "Masters controller: reading a control-plane workload", "name", name)
			pending = true
			underway = name
			continue
		}
		step, why := masters.DecideWorkload(masterCount, dep, ds, underway)
		switch step {
		case masters.WorkloadAddDaemonSet:
			_, err = r.cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Create(ctx, masters.DaemonSetOf(dep), metav1.CreateOptions{FieldManager: Component})
		case masters.WorkloadRemoveDeployment:
			// Its pods go with it (background propagation), as kubectl
			// delete does; the DaemonSet's run on every master.
			err = r.cs.AppsV1().Deployments(metav1.NamespaceSystem).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &dep.UID}})
		}
		if err != nil {
			klog.ErrorS(err, "Masters controller: making a control-plane component follow the masters", "name", name, "step", step)
		} else if step != masters.WorkloadKeep {
			klog.InfoS("Masters controller: the control plane follows the masters", "name", name, "step", step, "why", why)
		}
		if step != masters.WorkloadKeep || err != nil || (dep != nil && ds != nil) {
			pending = true
			underway = name
		}
	}
	return pending
}

// observe reads one round's facts, and keeps the record's object for its
// write. etcd that does not answer is no error: the facts say so, and
// the rule book waits.
func (r *rounds) observe(ctx context.Context) (masters.Facts, keptRecord, Etcd, error) {
	f := masters.Facts{Now: r.cfg.Now(), DeadAfter: r.cfg.DeadAfter}
	kept, err := readRecord(ctx, r.cs)
	if err != nil {
		return f, kept, nil, err
	}
	f.Record = kept.record
	nodes, err := r.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return f, kept, nil, fmt.Errorf("listing the Nodes: %w", err)
	}
	pods, err := r.cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
	if err != nil {
		return f, kept, nil, fmt.Errorf("listing kube-system's pods: %w", err)
	}
	f.Nodes = masters.NodesOf(nodes.Items, pods.Items)
	r.nodes = nodes.Items
	if f.UpgradeUnderway, err = upgradeUnderway(ctx, r.dyn); err != nil {
		return f, kept, nil, err
	}
	access, err := r.cfg.EtcdAccess()
	if err != nil {
		return f, kept, nil, fmt.Errorf("this master's etcd member: %w", err)
	}
	etcd, err := r.cfg.DialEtcd(access)
	if err != nil {
		return f, kept, nil, err
	}
	members, leader, err := etcd.Observe(ctx, endpoints(access.Endpoint, pods.Items))
	if err != nil {
		f.EtcdErr = err
		return f, kept, etcd, nil
	}
	f.Members, f.Leader = MembersOf(members), leader
	return f, kept, etcd, nil
}

// MembersOf are etcd's members as the rule book sees them; nil for nil
// (no member answered).
func MembersOf(members []etcdapi.Member) []masters.Member {
	if members == nil {
		return nil
	}
	out := make([]masters.Member, 0, len(members))
	for _, m := range members {
		out = append(out, masters.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, Learner: m.Learner, Healthy: m.Healthy, Helper: nodeagent.IsHelperName(m.Name)})
	}
	return out
}

// endpoints are this master's member's, then every member's that the
// etcd pods in the API advertise (upgrade.EtcdClientURLs): a master whose
// own member does not answer (restarting, or set aside by its demotion)
// still reaches etcd.
func endpoints(own string, pods []v1.Pod) []string {
	out := upgrade.EtcdClientURLs(pods)
	if own != "" && !slices.Contains(out, own) {
		out = append([]string{own}, out...)
	}
	return out
}

// upgradeUnderway: the ClusterVersion has a step in flight or being put
// back, whose members may restart. No ClusterVersion: no upgrade.
func upgradeUnderway(ctx context.Context, dyn dynamic.Interface) (bool, error) {
	if dyn == nil {
		return false, nil
	}
	cv, err := cvclient.Get(ctx, dyn)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the ClusterVersion: %w", err)
	}
	return cv.Status.InFlight != nil || cv.Status.RollingBack != nil, nil
}

// act makes the decision's one call on etcd's member list, at a voter
// that answered: etcd forwards a member change to its leader.
func act(ctx context.Context, etcd Etcd, members []masters.Member, a masters.Act) error {
	if a.Kind == masters.None {
		return nil
	}
	if a.Kind == masters.MoveLeader {
		// etcd takes a leadership move only from the leader itself.
		ep := etcd.EndpointOf(a.Leader)
		if ep == "" {
			return fmt.Errorf("moving etcd's leadership: the leader %x does not answer", a.Leader)
		}
		return etcd.MoveLeader(ctx, ep, a.MemberID)
	}
	endpoint := ""
	for _, m := range members {
		if ep := etcd.EndpointOf(m.ID); ep != "" && m.Healthy && !m.Learner {
			endpoint = ep
			break
		}
	}
	if endpoint == "" {
		return fmt.Errorf("%s: no voter answers", a.Kind)
	}
	switch a.Kind {
	case masters.AddLearner:
		id, err := etcd.AddLearner(ctx, endpoint, a.PeerURL)
		if err == nil {
			klog.InfoS("Masters controller: learner added", "node", a.Node, "member", fmt.Sprintf("%x", id))
		}
		return err
	case masters.PromoteLearner:
		return etcd.Promote(ctx, endpoint, a.MemberID)
	case masters.RemoveMember:
		return etcd.Remove(ctx, endpoint, a.MemberID)
	}
	return fmt.Errorf("unknown act %q", a.Kind)
}

// place sets or removes the label the control plane's pods select, and
// with it masters.LabelLeader: a master whose member votes runs a
// candidate of this controller (a promoted node's daemon does once its
// member is there and the credential mirror holds the CAs), so the last
// one is kept from demotion. A first-boot master's own daemon labels
// itself again after its demotion: it still holds render's identity.
func place(ctx context.Context, cs kubernetes.Interface, p masters.Placement) error {
	var value any // nil: JSON null, which a merge patch removes
	if p.ControlPlane {
		value = ""
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{btypes.LabelControlPlanePods: value, masters.LabelLeader: value}}})
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, p.Node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: Component})
	return err
}

// report sets each node's condition where it changed, with an Event.
// Each is compared with the condition the round observed: the round's own
// writes before it change labels only.
func (r *rounds) report(ctx context.Context, f masters.Facts, d masters.Decision) {
	want := masters.Conditions(f, d)
	now := metav1.NewTime(r.cfg.Now())
	for i := range r.nodes {
		n := &r.nodes[i]
		c, ok := want[n.Name]
		if !ok {
			continue
		}
		cond, changed := conditionFor(n, c, now)
		if !changed {
			continue
		}
		if err := patchCondition(ctx, r.cs, n.Name, cond); err != nil {
			if !apierrors.IsNotFound(err) {
				klog.ErrorS(err, "Masters controller: setting the node's condition", "node", n.Name)
			}
			continue
		}
		kind := v1.EventTypeNormal
		if c.Reason == masters.ReasonRefused {
			kind = v1.EventTypeWarning
		}
		r.recorder.Event(&v1.ObjectReference{Kind: "Node", Name: n.Name, UID: types.UID(n.Name)}, kind, "Master"+c.Reason, c.Message)
	}
}

// conditionFor is n's condition saying c, and whether that changes what
// n carries. A node that never carried it and is no master is left
// alone: a worker needs no word from this controller.
func conditionFor(n *v1.Node, c masters.Condition, now metav1.Time) (v1.NodeCondition, bool) {
	status := v1.ConditionFalse
	if c.Status {
		status = v1.ConditionTrue
	}
	cond := v1.NodeCondition{Type: masters.ConditionType, Status: status, Reason: c.Reason, Message: c.Message, LastHeartbeatTime: now, LastTransitionTime: now}
	for _, old := range n.Status.Conditions {
		if old.Type != masters.ConditionType {
			continue
		}
		if old.Status == cond.Status {
			cond.LastTransitionTime = old.LastTransitionTime
		}
		return cond, old.Status != cond.Status || old.Reason != cond.Reason || old.Message != cond.Message
	}
	return cond, c.Reason != masters.ReasonNotMaster
}

// patchCondition merges cond into the Node's conditions by type (the
// kubelet's own patches keep a condition it does not set).
func patchCondition(ctx context.Context, cs kubernetes.Interface, node string, cond v1.NodeCondition) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []v1.NodeCondition{cond}}})
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: Component}, "status")
	return err
}

var _ Etcd = (*etcdapi.Client)(nil)
