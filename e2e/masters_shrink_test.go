//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/credmirror"
	"github.com/bootlet/bootlet/e2e/nodes"
	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/masters"
	masterssigner "github.com/bootlet/bootlet/masters/signer"
	btypes "github.com/bootlet/bootlet/types"
	upgradecontroller "github.com/bootlet/bootlet/upgrade/controller"
)

// shrinkAndGrowAgain is scenario 3 of the masters' issue on two masters:
// the VIP's holder is demoted by taking its label away (two masters to
// one), then labelled again and promoted back (one to two), all under the
// two strict probe clients on the VIP, which count every failed request.
// At each end etcd's member list is one voter per master and the
// control plane's pods run on the masters only. Returns the failures
// and the two operations' times.
func shrinkAndGrowAgain(t testing.TB, admin *kubernetes.Clientset, two []nodes.Member) {
	t.Helper()
	holders := vipHolders(t, two)
	if len(holders) != 1 {
		t.Fatalf("the VIP is on %v, want one master", holders)
	}
	var victim, stays nodes.Member
	for _, m := range two {
		if m.Name == holders[0] {
			victim = m
		} else {
			stays = m
		}
	}
	vb := nodeBootlet(t, victim.Node().PID1(), victim.Name)
	checkApiserverCheckpoint(t, vb, true, time.Minute)
	keep := StartProber(t, "vip-keepalive", nodes.AdminConf, true)
	fresh := StartProber(t, "vip-new-connection", nodes.AdminConf, false)
	time.Sleep(3 * time.Second)

	// Demote: the label goes; the controller and the node's agent do
	// the rest.
	t0 := time.Now()
	demoteAt := t0
	setMasterLabel(t, admin, victim.Name, false)
	awaitDemoted(t, admin, victim.Name)
	demoted := time.Since(t0)
	t.Logf("%s (the VIP's holder) demoted in %s: its label removed, the controller and its agent did the rest", victim.Name, demoted.Round(time.Millisecond))
	if h := vipHolders(t, two); !slices.Equal(h, []string{stays.Name}) {
		t.Errorf("after the demotion the VIP is on %v, want %s", h, stays.Name)
	}
	checkEtcdMembers(t, []nodes.Member{stays})
	checkControlPlaneOn(t, admin, []string{stays.Name})
	checkApiserverCheckpoint(t, vb, false, time.Minute)
	checkEtcdMemberSigner(t, admin, victim, stays, false)
	if n, _ := admin.CoreV1().Nodes().Get(context.Background(), victim.Name, metav1.GetOptions{}); n != nil {
		if _, ok := n.Labels[btypes.LabelControlPlanePods]; ok {
			t.Errorf("%s still carries %s", victim.Name, btypes.LabelControlPlanePods)
		}
	}

	// Promote it again: the label comes back.
	t0 = time.Now()
	promoteAt := t0
	setMasterLabel(t, admin, victim.Name, true)
	awaitPromoted(t, admin, victim.Name)
	promoted := time.Since(t0)
	t.Logf("%s promoted again in %s: labelled, its member a learner, then a voter, then its control plane", victim.Name, promoted.Round(time.Millisecond))
	checkEtcdMembers(t, two)
	checkControlPlaneOn(t, admin, []string{stays.Name, victim.Name})
	checkApiserverCheckpoint(t, vb, true, 2*time.Minute)
	checkMasterStatus(t, stays, []string{stays.Name, victim.Name}, "")
	checkEtcdMemberSigner(t, admin, victim, stays, true)

	// A connection to the VIP's holder cannot survive the address's move
	// (before its apiserver goes): the new holder resets it at the
	// client's next segment, which no server can prevent with an address
	// that moves at layer 2 (docs/cluster.md, "Growing and shrinking the
	// masters"). So each client may lose what it has on the old holder
	// while the address moves, in one window of at most 2 s, the bound
	// the issue sets for a master's loss, and nothing else: the kept-alive
	// client its connection's next request (a reset, sometimes after a
	// request that waited out the 1 s deadline in the move), the other a
	// request or a handshake in flight then.
	failed := false
	for _, p := range []*Prober{keep, fresh} {
		res := p.Stop()
		total := TotalFailureTime(res.Windows)
		t.Logf("probe client %s across the demotion and the promotion: %d requests, %d failed %v in windows %v (%s in total), %d slow answers%s",
			p.name, res.Requests, res.Failed, res.Kinds, res.Windows, total.Round(time.Millisecond), res.SlowAnswers, failuresSuffix(res))
		if len(res.Windows) > 1 || total > 2*time.Second {
			failed = true
			t.Errorf("probe client %s: %d of %d requests failed in %d windows, %s in total, across the demotion of the VIP's holder and its promotion; want one window of at most 2 s, at the address's move",
				p.name, res.Failed, res.Requests, len(res.Windows), total.Round(time.Millisecond))
		}
	}
	if failed {
		// Which window is whose: the operations' times beside each
		// master's etcd membership and slow requests (keepalived's
		// whole journal is the test's cleanup's).
		t.Logf("demotion %s..%s, promotion %s..%s", demoteAt.Format(stampMilli), demoteAt.Add(demoted).Format(stampMilli),
			promoteAt.Format(stampMilli), promoteAt.Add(promoted).Format(stampMilli))
		for _, m := range two {
			logTimeline(t, m, "", "etcd.*(member|learner|promot|leader|slow|took too long)")
		}
	}
}

// stampMilli is how the probes' failures print their times.
const stampMilli = "15:04:05.000"

// logTimeline logs a node's journal lines (of unit, or all when "")
// that match the extended regular expression pattern, with their times.
func logTimeline(t testing.TB, m nodes.Member, unit, pattern string) {
	t.Helper()
	args := []string{"journalctl", "-b", "--no-pager", "-o", "short-precise"}
	if unit != "" {
		args = append(args, "-u", unit)
	}
	out, err := nodes.Inside(m.Node().PID1(), append(args, "--grep", pattern)...)
	if len(out) > 20000 {
		out = "...\n" + out[len(out)-20000:]
	}
	t.Logf("%s's journal (%s, %q), err %v:\n%s", m.Name, unit, pattern, err, out)
}

// checkApiserverCheckpoint waits until the node's bootlet holds a
// checkpoint of the apiserver (want), or none: a demoted master's
// checkpointer drops it once the DaemonSet no longer selects the node and
// its pod has gone, and stores it again once promoted and its new pod is
// Ready.
func checkApiserverCheckpoint(t testing.TB, b *Bootlet, want bool, within time.Duration) {
	t.Helper()
	t0 := time.Now()
	Eventually(t, within, func() (bool, string) {
		has := StoredCheckpoint(t, b, metav1.NamespaceSystem, manifests.KubeAPIServer) != nil
		return has == want, fmt.Sprintf("%s holds a checkpoint of the apiserver: %v, want %v", b.NodeName, has, want)
	})
	t.Logf("%s holds a checkpoint of the apiserver: %v (after %s)", b.NodeName, want, time.Since(t0).Round(100*time.Millisecond))
}

// setMasterLabel sets or removes the control-plane label, as `kubectl
// label node NAME node-role.kubernetes.io/control-plane[=|-]` does.
func setMasterLabel(t testing.TB, admin *kubernetes.Clientset, node string, on bool) {
	t.Helper()
	value := "null"
	if on {
		value = `""`
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, masters.Label, value)
	if _, err := admin.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling %s %s=%v: %v", node, masters.Label, on, err)
	}
}

// awaitPromoted waits until the masters' controller has no operation
// under way and says node is a master (its BootletMaster condition True):
// the promotion its label began is done.
func awaitPromoted(t testing.TB, admin *kubernetes.Clientset, node string) {
	t.Helper()
	Eventually(t, 8*time.Minute, func() (bool, string) {
		rec := mastersRecord(t, admin)
		n, err := admin.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := nodeCondition(n, masters.ConditionType)
		switch {
		case rec.Op != nil:
			return false, fmt.Sprintf("operation under way: %s %s, phase %s", rec.Op.Kind, rec.Op.Node, rec.Op.Phase)
		case c == nil || c.Status != v1.ConditionTrue:
			return false, fmt.Sprintf("%s's %s condition: %+v", node, masters.ConditionType, c)
		}
		return true, ""
	})
}

// awaitDemoted waits until the masters' controller has no operation under
// way, no longer counts node among the masters, and node's agent has
// reported its cleanup: the demotion the label's removal began is done.
func awaitDemoted(t testing.TB, admin *kubernetes.Clientset, node string) {
	t.Helper()
	Eventually(t, 6*time.Minute, func() (bool, string) {
		rec := mastersRecord(t, admin)
		n, err := admin.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		switch {
		case rec.Op != nil:
			return false, fmt.Sprintf("operation under way: %s %s, phase %s", rec.Op.Kind, rec.Op.Node, rec.Op.Phase)
		case slices.Contains(rec.Masters, node):
			return false, fmt.Sprintf("the record's masters %v", rec.Masters)
		case n.Annotations[masters.AnnotationCleaned] != "true":
			return false, fmt.Sprintf("%s's agent has not reported its cleanup: %v", node, n.Annotations)
		}
		return true, ""
	})
}

// checkControlPlaneOn waits until the apiserver, controller-manager and
// scheduler each have one Ready pod on every node of on, and none
// elsewhere.
func checkControlPlaneOn(t testing.TB, admin *kubernetes.Clientset, on []string) {
	t.Helper()
	checkComponentsOn(t, admin, on, manifests.KubeAPIServer, manifests.KubeControllerManager, manifests.KubeScheduler)
}

// checkComponentsOn waits until each of components has one Ready pod on
// every node of on, and none elsewhere.
func checkComponentsOn(t testing.TB, admin *kubernetes.Clientset, on []string, components ...string) {
	t.Helper()
	Eventually(t, 5*time.Minute, func() (bool, string) {
		var why []string
		for _, comp := range components {
			pods, err := admin.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app=" + comp})
			if err != nil {
				return false, err.Error()
			}
			per := map[string]int{}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.DeletionTimestamp == nil && Running(p) && Ready(p) {
					per[p.Spec.NodeName]++
				} else if !slices.Contains(on, p.Spec.NodeName) {
					per[p.Spec.NodeName] += 100 // leaving
				}
			}
			for _, n := range on {
				if per[n] != 1 {
					why = append(why, fmt.Sprintf("%s: %d Ready pods on %s", comp, per[n], n))
				}
				delete(per, n)
			}
			if len(per) > 0 {
				why = append(why, fmt.Sprintf("%s: pods elsewhere %v", comp, per))
			}
		}
		return len(why) == 0, strings.Join(why, "; ")
	})
	t.Logf("%v run on %v only", components, on)
}

// electedDeploymentPods are the names of the controller-manager's and the
// scheduler's pods that a Deployment runs (a one-master render's, through
// its ReplicaSet). The first promotion to two masters replaces them by
// their DaemonSet's, one per master (masters.DecideWorkload); that is the
// one replacement the grow tests allow on the first master.
func electedDeploymentPods(t testing.TB, admin *kubernetes.Clientset) map[string]bool {
	t.Helper()
	pods, err := admin.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app in (kube-controller-manager, kube-scheduler)"})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.Kind == "ReplicaSet" {
			out[p.Name] = true
		}
	}
	return out
}

// splitElectedMove splits containerChanges' lines into those of a pod of
// deploymentPods gone (its DaemonSet took over) and all others.
func splitElectedMove(changes []string, deploymentPods map[string]bool) (moved, others []string) {
	for _, c := range changes {
		key, gone := strings.CutSuffix(c, " is gone")
		if parts := strings.Split(key, "/"); gone && len(parts) == 3 && deploymentPods[parts[1]] {
			moved = append(moved, c)
			continue
		}
		others = append(others, c)
	}
	return moved, others
}

// checkPromotedCanLead: each promoted master carries masters.LabelLeader,
// which the masters' controller set as its member came to vote, and its
// daemon says it is a candidate of the controller (with the identity it
// made from the cluster CA its credential mirror holds); the etcd CA the
// first master's leader published is mirrored on its disk.
func checkPromotedCanLead(t testing.TB, admin *kubernetes.Clientset, promoted []nodes.Member) {
	t.Helper()
	ctx := context.Background()
	for _, m := range promoted {
		Eventually(t, time.Minute, func() (bool, string) {
			n, err := admin.CoreV1().Nodes().Get(ctx, m.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if _, ok := n.Labels[masters.LabelLeader]; !ok {
				return false, fmt.Sprintf("%s's labels %v lack %s", m.Name, n.Labels, masters.LabelLeader)
			}
			out, err := nodes.Inside(m.Node().PID1(), "journalctl", "-b", "--no-pager", "-o", "cat", "-u", "bootlet-worker.service")
			if err != nil {
				return false, fmt.Sprintf("%s's journal: %v", m.Name, err)
			}
			if !strings.Contains(out, "this labelled master is a candidate of the masters' controller") {
				return false, fmt.Sprintf("%s's daemon does not say it is a candidate of the masters' controller", m.Name)
			}
			return true, ""
		})
	}
	s, err := admin.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, masterssigner.EtcdCASecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the etcd CA's credential Secret: %v", err)
	}
	target, ok, err := credmirror.TargetOf(s)
	if err != nil || !ok {
		t.Fatalf("the etcd CA's Secret names no mirror directory: %v", err)
	}
	for _, m := range promoted {
		if _, err := os.Stat(filepath.Join(m.Node().Root, target.Dir, masterssigner.EtcdCAKeyKey)); err != nil {
			t.Errorf("%s: the etcd CA is not mirrored: %v", m.Name, err)
		}
	}
	t.Logf("%d promoted masters can lead the masters' controller (labelled %s, each a candidate, the etcd CA mirrored)", len(promoted), masters.LabelLeader)
}

// mastersLeader is the holder of the Lease that elects the masters'
// controller (with the upgrade's).
func mastersLeader(t testing.TB, admin *kubernetes.Clientset) string {
	t.Helper()
	l, err := admin.CoordinationV1().Leases(metav1.NamespaceSystem).Get(context.Background(), upgradecontroller.LeaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the masters' controller's Lease: %v", err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// shrinkGrownToOne is scenario 3 of the masters' issue on a cluster grown
// from one master: the promoted masters demoted one after the other by
// taking their labels away (three masters to two, then to one, the first
// master, the one that can lead), then the first promoted worker labelled
// again and promoted back from the member it set aside, under the two
// strict probe clients on the VIP. etcd's member list is one voter per
// master at every step. Each client may lose what it has on a holder of
// the VIP whose demotion moves the address, in one window of at most 2 s
// per move (shrinkAndGrowAgain says why), and nothing else.
func shrinkGrownToOne(t testing.TB, admin *kubernetes.Clientset, first nodes.Member, promoted []nodes.Member) {
	t.Helper()
	all := append([]nodes.Member{first}, promoted...)
	keep := StartProber(t, "vip-keepalive", nodes.AdminConf, true)
	fresh := StartProber(t, "vip-new-connection", nodes.AdminConf, false)
	time.Sleep(3 * time.Second)
	moves := 0
	left := slices.Clone(all)
	for i := len(promoted) - 1; i >= 0; i-- {
		victim := promoted[i]
		if slices.Equal(vipHolders(t, all), []string{victim.Name}) {
			moves++
		}
		t0 := time.Now()
		setMasterLabel(t, admin, victim.Name, false)
		awaitDemoted(t, admin, victim.Name)
		left = slices.DeleteFunc(left, func(m nodes.Member) bool { return m.Name == victim.Name })
		t.Logf("%s demoted in %s (%d masters left)", victim.Name, time.Since(t0).Round(time.Millisecond), len(left))
		checkEtcdMembers(t, left)
		var names []string
		for _, m := range left {
			names = append(names, m.Name)
		}
		checkControlPlaneOn(t, admin, names)
	}
	again := promoted[0]
	t0 := time.Now()
	setMasterLabel(t, admin, again.Name, true)
	awaitPromoted(t, admin, again.Name)
	t.Logf("%s promoted again in %s, from the member it set aside", again.Name, time.Since(t0).Round(time.Millisecond))
	checkEtcdMembers(t, []nodes.Member{first, again})
	checkControlPlaneOn(t, admin, []string{first.Name, again.Name})
	for _, p := range []*Prober{keep, fresh} {
		res := p.Stop()
		total := TotalFailureTime(res.Windows)
		t.Logf("probe client %s across the shrink to one master and a promotion again: %d requests, %d failed %v in windows %v (%s in total), %d slow answers%s",
			p.name, res.Requests, res.Failed, res.Kinds, res.Windows, total.Round(time.Millisecond), res.SlowAnswers, failuresSuffix(res))
		if len(res.Windows) > moves || total > time.Duration(moves)*2*time.Second {
			t.Errorf("probe client %s: %d of %d requests failed in %d windows, %s in total; want at most one window of at most 2 s per move of the VIP (%d)",
				p.name, res.Failed, res.Requests, len(res.Windows), total.Round(time.Millisecond), moves)
		}
	}
}
