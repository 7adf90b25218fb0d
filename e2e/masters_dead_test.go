//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/e2e/nodes"
	"github.com/bootlet/bootlet/masters"
	masterscontroller "github.com/bootlet/bootlet/masters/controller"
)

// checkMastersCondition waits until each of names carries the masters'
// controller's BootletMaster condition, True and Master: the controller
// runs on the leader, sees each master's member vote and its apiserver
// Ready.
func checkMastersCondition(t testing.TB, admin *kubernetes.Clientset, names []string) {
	t.Helper()
	Eventually(t, 2*time.Minute, func() (bool, string) {
		for _, name := range names {
			n, err := admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			c := nodeCondition(n, masters.ConditionType)
			if c == nil || c.Status != v1.ConditionTrue || c.Reason != masters.ReasonMaster {
				return false, fmt.Sprintf("%s's %s condition: %+v", name, masters.ConditionType, c)
			}
		}
		return true, ""
	})
	t.Logf("the masters' controller calls %v masters (%s=True)", names, masters.ConditionType)
}

func nodeCondition(n *v1.Node, typ v1.NodeConditionType) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// mastersRecord is the masters' controller's record.
func mastersRecord(t testing.TB, admin *kubernetes.Clientset) masters.Record {
	t.Helper()
	cm, err := admin.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(context.Background(), masterscontroller.RecordName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the masters' record: %v", err)
	}
	var r masters.Record
	if err := json.Unmarshal([]byte(cm.Data[masterscontroller.RecordKey]), &r); err != nil {
		t.Fatalf("the masters' record does not decode: %v\n%s", err, cm.Data[masterscontroller.RecordKey])
	}
	return r
}

// replaceDeadMaster is scenario 4 of the masters' issue, its first half
// on three masters: a master that is not the VIP's holder is powered off
// for good and its Node deleted; the masters' controller removes its etcd
// member once it has not answered for deadAfter (the daemons'
// --master-dead-after), with no command
// and no hand on etcd. etcd keeps its quorum throughout (two of three
// voters answer, then two of two), and the probe client on the VIP counts
// what the loss costs. Returns the masters left.
func replaceDeadMaster(t testing.TB, admin *kubernetes.Clientset, ms []nodes.Member, deadAfter time.Duration) []nodes.Member {
	t.Helper()
	holders := vipHolders(t, ms)
	if len(holders) != 1 {
		t.Fatalf("the VIP is on %v, want one master", holders)
	}
	for _, m := range ms {
		if m.Name != holders[0] {
			return removeDeadMaster(t, admin, ms, m, deadAfter)
		}
	}
	t.Fatalf("no master but the VIP's holder among %d", len(ms))
	return nil
}

// removeDeadMaster is replaceDeadMaster's loss of victim, one of ms, which
// may be any master: the VIP's holder too (the probe client's window as
// it moves is then the at most 2 s of a master's loss). `bootlet master
// status` is read on the first of the others, with statusArgs.
func removeDeadMaster(t testing.TB, admin *kubernetes.Clientset, ms []nodes.Member, victim nodes.Member, deadAfter time.Duration, statusArgs ...string) []nodes.Member {
	t.Helper()
	var rest []nodes.Member
	for _, m := range ms {
		if m.Name != victim.Name {
			rest = append(rest, m)
		}
	}
	if before := mastersRecord(t, admin); !slices.Contains(before.Masters, victim.Name) {
		t.Fatalf("the masters' record %v does not name %s: its member would never be removed", before.Masters, victim.Name)
	}
	prober := StartProber(t, "vip", nodes.AdminConf, true)
	checkNodeRaces(t, victim)
	offAt := time.Now()
	if err := nodes.PowerOff(victim); err != nil {
		t.Fatalf("powering off %s: %v", victim.Name, err)
	}
	// A victim that held the API address takes the administrator's
	// kept-alive connection with it: the delete is asked again on a new
	// one once the address has moved.
	Eventually(t, 30*time.Second, func() (bool, string) {
		err := admin.CoreV1().Nodes().Delete(context.Background(), victim.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("deleting %s's Node: %v", victim.Name, err)
		}
		return true, ""
	})
	deletedAt := time.Now()
	t.Logf("%s powered off and its Node deleted in %s", victim.Name, deletedAt.Sub(offAt).Round(time.Millisecond))

	// Not before deadAfter: a master rebooting is not gone.
	statusOf := func() (string, error) {
		out, err := nodes.Inside(rest[0].Node().PID1(), append([]string{"/usr/bin/bootlet", "master", "status"}, statusArgs...)...)
		if err != nil {
			return "", fmt.Errorf("bootlet master status: %v: %s", err, out)
		}
		return string(out), nil
	}
	var removedAt time.Time
	Eventually(t, deadAfter+3*time.Minute, func() (bool, string) {
		st, err := statusOf()
		if err != nil {
			return false, err.Error()
		}
		if strings.Contains(st, victim.Name) {
			return false, st
		}
		removedAt = time.Now()
		return true, ""
	})
	took := removedAt.Sub(offAt)
	t.Logf("%s's member removed by the masters' controller %s after the power-off (%s after its Node's deletion)", victim.Name, took.Round(time.Second), removedAt.Sub(deletedAt).Round(time.Second))
	if took < deadAfter {
		t.Errorf("%s's member went %s after the power-off, before --master-dead-after (%s)", victim.Name, took.Round(time.Second), deadAfter)
	}
	res := prober.Stop()
	total := TotalFailureTime(res.Windows)
	t.Logf("the keep-alive probe client on the VIP, from the power-off to the removal: %d requests, %d failed in %d windows, %s in total%s",
		res.Requests, res.Failed, len(res.Windows), total.Round(time.Millisecond), failuresSuffix(res))
	if total > 2*time.Second {
		t.Errorf("the probe client's failures with %s gone fell in windows of %s in total, more than 2 s", victim.Name, total.Round(time.Millisecond))
	}
	names := []string{rest[0].Name, rest[1].Name}
	checkEtcdMembers(t, rest)
	checkMasterStatus(t, rest[0], names, "", statusArgs...)
	// The controller writes its record before each act, so the record
	// that ends the removal is the next round's (masters/controller,
	// every 5 s), once that round has seen the member gone.
	EventuallyEvery(t, 30*time.Second, time.Second, func() (bool, string) {
		after := mastersRecord(t, admin)
		if slices.Contains(after.Masters, victim.Name) || after.Op != nil {
			return false, fmt.Sprintf("the masters' record after the removal: %+v, want %s dropped and no operation", after, victim.Name)
		}
		return true, ""
	})
	return rest
}
