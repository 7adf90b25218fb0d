//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/bootlet/bootlet/e2e/nodes"
)

// TestClusterHA is the guard of the high-availability claims (make
// test-cluster, beside TestClusterThreeMasters, of which it is a cut):
// `make cluster MASTERS=3 WORKERS=0`'s code, then
//
//   - scenario 1 on the masters: every kubeconfig names the VIP; each
//     master self-hosted, its pivot recorded, its port routed; one Ready
//     pod per master of the apiserver, controller-manager and scheduler;
//     etcd three voting members; keepalived on each, the VIP on one;
//   - scenario 3: the master holding the VIP powered off under the 50 ms
//     keep-alive probe client on the VIP (its failures in windows of at
//     most 2 s in total) and kubectl (no error), a new Deployment scheduled
//     and Ready meanwhile; powered on again, it rejoins;
//   - the masters' controller calls each master a master (its Node's
//     BootletMaster condition); a master that is not the VIP's holder
//     powered off for good and its Node deleted: the controller removes
//     its etcd member after the daemons' --master-dead-after (haDeadAfter,
//     shorter than the default's 5 minutes), quorum kept, the
//     probe client's failures again at most 2 s;
//   - the VIP's holder of the two left demoted by removing its label, then
//     promoted again by labelling it, under the two strict probe clients
//     (each may lose what it has on the old holder as the address moves,
//     in one window of at most 2 s; nothing else), etcd one voter per
//     master at each end;
//   - no data race in any node's journal (make test-cluster builds it with
//     -race), the powered-off master's read before its power-off.
//
// No worker, no workloads across nodes, no rolling upgrade, no worker or
// all-masters reboot: those are TestClusterThreeMasters'. Torn down at the
// end, failed or not.
// haDeadAfter is TestClusterHA's --master-dead-after: still longer than
// its masters' reboot in scenario 3.
const haDeadAfter = 90 * time.Second

func TestClusterHA(tt *testing.T) {
	t := NewFailureRecorder(tt)
	start := time.Now()
	spec := nodes.Spec{Masters: 3, BootletArgs: "--master-dead-after=" + haDeadAfter.String()}
	c, _, testserver := upTestClusterSpec(t, spec, []string{"bootlet", "bootlet-tools", "containerd", "kubelet", "kubectl"}, func(c *nodes.Cluster) {
		clusterDump(t, c)
		for _, m := range c.Members {
			if pid := m.Node().PID1(); pid > 0 {
				out, _ := nodes.Inside(pid, "journalctl", "-b", "--no-pager", "-o", "short-precise", "-u", "keepalived.service")
				t.Logf("keepalived on %s:\n%s", m.Name, out)
			}
		}
	})
	checkRacesAtEnd(t, c)
	masters := c.Members
	admin := AdminClient(t, nodes.StateDir)
	t.Logf("make cluster MASTERS=3 WORKERS=0 returned %s after the start (load %s)", time.Since(start).Round(time.Second), nodes.Load1())

	// Scenario 1: the control plane on every master.
	checkServers(t, "https://"+nodes.ControlPlaneEndpoint(), masters, nodes.Member{})
	t0 := time.Now()
	for _, m := range masters {
		pid := m.Node().PID1()
		if pid == 0 {
			t.Fatalf("%s does not run", m.Name)
		}
		b := nodeBootlet(t, pid, m.Name)
		waitSelfHosted(t, admin, b, m.Name, start, true, "", 10*time.Minute)
		t.Logf("%s self-hosted %s after make cluster returned (load %s)", m.Name, time.Since(t0).Round(time.Millisecond), nodes.Load1())
		waitPivotDone(t, b, admin, 3*time.Minute)
		checkPortRouted(t, pid, m.Name)
	}
	checkOnePerMaster(t, admin, masters)
	checkEtcdMembers(t, masters)
	checkVIP(t, masters)
	names := []string{masters[0].Name, masters[1].Name, masters[2].Name}
	checkMasterStatus(t, masters[0], names, "")
	checkMasterRemoveRefusesLive(t, masters[0], masters[1].Name)
	checkMastersCondition(t, admin, names)
	t.Logf("scenario 1 (three masters self-hosted behind the VIP) done %s after the start", time.Since(start).Round(time.Second))

	// Scenario 3: the VIP's holder powered off, then on. Its Deployment
	// runs the test server on the other masters.
	t0 = time.Now()
	for _, m := range masters {
		if out, err := importImage(m, testserver); err != nil {
			t.Fatalf("importing the test image into %s: %v\n%s", m.Name, err, out)
		}
	}
	t.Logf("test image imported into the 3 masters in %s", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	threeLoseAMaster(t, c, admin, masters)
	t.Logf("scenario 3 (a master lost and back) took %s", time.Since(t0).Round(time.Second))

	// A master gone for good: its Node deleted, its member goes.
	t0 = time.Now()
	two := replaceDeadMaster(t, admin, masters, haDeadAfter)
	t.Logf("a dead master's member removed; the scenario took %s", time.Since(t0).Round(time.Second))

	// Two masters to one by a label, and back to two.
	t0 = time.Now()
	shrinkAndGrowAgain(t, admin, two)
	t.Logf("two masters to one and back took %s", time.Since(t0).Round(time.Second))
	t.Logf("TestClusterHA took %s before the teardown (load %s)", time.Since(start).Round(time.Second), nodes.Load1())
}
