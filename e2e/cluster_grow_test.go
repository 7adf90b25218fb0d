//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bootlet/bootlet/e2e/nodes"
)

// TestClusterGrow is the masters' grow scenario as make test runs it:
// `make cluster MASTERS=2 WORKERS=0`'s code, both masters self-hosted
// behind the VIP with one etcd voter each, then shrinkAndGrowAgain: the
// VIP's holder demoted by taking its label away (two masters to one) and
// promoted again by labelling it (one to two), under the two strict probe
// clients on the VIP, etcd's member list one voter per master at each
// end, the control plane's pods on the masters only, the apiserver's
// checkpoint dropped and stored again, the node's own request for an etcd
// member certificate denied and then issued. What ran on the master that
// stays is not restarted or replaced. No data race in either journal.
//
// TestClusterHA (make test-cluster) runs the same shrink and grow on three
// masters, after a power-off and a dead master's removal; this is its cut
// that fits CI's budget (docs/records/README.md, the CI budget's record).
// Torn down at the end, failed or not.
func TestClusterGrow(tt *testing.T) {
	t := NewFailureRecorder(tt)
	start := time.Now()
	c, _, _ := upTestClusterSpec(t, nodes.Spec{Masters: 2}, []string{"bootlet", "bootlet-tools", "containerd", "kubelet", "kubectl"}, func(c *nodes.Cluster) { clusterDump(t, c) })
	checkRacesAtEnd(t, c)
	two := c.Members
	admin := AdminClient(t, nodes.StateDir)
	t.Logf("make cluster MASTERS=2 WORKERS=0 returned %s after the start (load %s)", time.Since(start).Round(time.Second), nodes.Load1())

	t0 := time.Now()
	for _, m := range two {
		pid := m.Node().PID1()
		if pid == 0 {
			t.Fatalf("%s does not run", m.Name)
		}
		b := nodeBootlet(t, pid, m.Name)
		waitSelfHosted(t, admin, b, m.Name, start, true, "", 10*time.Minute)
		waitPivotDone(t, b, admin, 3*time.Minute)
		checkPortRouted(t, pid, m.Name)
	}
	checkOnePerMaster(t, admin, two)
	checkEtcdMembers(t, two)
	checkVIP(t, two)
	t.Logf("two masters self-hosted behind the VIP %s after make cluster returned (load %s)", time.Since(t0).Round(time.Second), nodes.Load1())

	holders := vipHolders(t, two)
	if len(holders) != 1 {
		t.Fatalf("the VIP is on %v, want one master", holders)
	}
	stays := two[0]
	if stays.Name == holders[0] {
		stays = two[1]
	}
	before := nodeContainers(t, admin, stays.Name)

	t0 = time.Now()
	shrinkAndGrowAgain(t, admin, two)
	t.Logf("two masters to one and back took %s", time.Since(t0).Round(time.Second))

	if changed := containerChanges(before, nodeContainers(t, admin, stays.Name)); len(changed) > 0 {
		t.Errorf("on %s, which stayed a master, containers restarted, replaced or gone across the shrink and the grow: %v", stays.Name, changed)
	} else {
		t.Logf("%s's %d containers unchanged (same IDs, same restarts) across the shrink and the grow", stays.Name, len(before))
	}
	t.Logf("TestClusterGrow took %s before the teardown (load %s)", time.Since(start).Round(time.Second), nodes.Load1())
}

// TestClusterGrowFromWorkers is the issue's grow scenario: `make cluster
// MASTERS=1 WORKERS=2`, then both workers promoted by their label, one
// after the other, under the two strict probe clients on the API address
// (growFromWorkers says what is checked). Then, on the grown cluster,
// `bootlet master status` on a promoted master (with the administrator's
// kubeconfig: it has no admin.conf), and each promoted master a candidate
// of the masters' controller (checkPromotedCanLead), and every master's
// apiserver names the API address in its issuer's discovery document
// (checkIssuerDiscovery). No data race in any journal. Torn down at the
// end, failed or not.
//
// TestClusterGrownLifecycle (make test-cluster) takes the grown cluster
// further: a master's loss, a reboot of every node, the shrink back.
func TestClusterGrowFromWorkers(tt *testing.T) {
	t := NewFailureRecorder(tt)
	start := time.Now()
	g := growFromWorkers(t)
	checkMasterStatus(t, g.workers[0], g.names(), "", "--kubeconfig", copyAdminConf(t, g.workers[0]))
	checkPromotedCanLead(t, g.admin, g.workers)
	checkIssuerDiscovery(t, g.grown)
	t.Logf("TestClusterGrowFromWorkers took %s before the teardown (load %s)", time.Since(start).Round(time.Second), nodes.Load1())
}

// checkIssuerDiscovery asks every master's own apiserver (at its own
// address, the certificate checked for the name "kubernetes", which every
// master's names) for the service account issuer's discovery document:
// its jwks_uri must name the API address, whose certificate every master
// serves, not the answering master's own address, which the certificate of
// a master labelled after render does not name (conformance's OIDC
// discovery spec fetches it from a pod and checks it).
func checkIssuerDiscovery(t testing.TB, masters []nodes.Member) {
	t.Helper()
	want := "https://" + nodes.ControlPlaneEndpoint() + "/openid/v1/jwks"
	for _, m := range masters {
		cfg, err := clientcmd.BuildConfigFromFlags("", nodes.AdminConf)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Host = "https://" + net.JoinHostPort(m.Addr().String(), fmt.Sprint(nodes.APIPort))
		cfg.TLSClientConfig.ServerName = "kubernetes"
		cfg.Timeout = 10 * time.Second
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		Eventually(t, time.Minute, func() (bool, string) {
			raw, err := cs.Discovery().RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(context.Background())
			if err != nil {
				return false, fmt.Sprintf("%s's discovery document: %v", m.Name, err)
			}
			if err := json.Unmarshal(raw, &doc); err != nil {
				return false, fmt.Sprintf("%s's discovery document: %v: %s", m.Name, err, raw)
			}
			return true, ""
		})
		if doc.JWKSURI != want {
			t.Errorf("%s's apiserver names jwks_uri %q, want the API address's %q", m.Name, doc.JWKSURI, want)
		}
	}
	t.Logf("the %d masters' apiservers name jwks_uri %s", len(masters), want)
}

// TestClusterGrownLifecycle is the masters' issue's scenarios 2, 5 and 3
// on a cluster grown from one master (growFromWorkers), in make
// test-cluster:
//
//   - the first master (the only one render made) powered off under the
//     keep-alive probe client and a kubectl loop (threeLoseAMaster's
//     measures: at most 2 s of failed requests in total, no kubectl call
//     failed), a new Deployment scheduled and Ready on the promoted
//     workers meanwhile, `bootlet master status` on a promoted one;
//     powered on again, it rejoins;
//   - every node powered off and on at once: the three masters come back
//     (etcd three voters, one control plane per master, each called a
//     master) with every object made before;
//   - the promoted workers demoted one after the other, back to the first
//     master alone, and one promoted again from the member it set aside,
//     under the strict clients.
//
// No data race in any journal. Torn down at the end, failed or not.
func TestClusterGrownLifecycle(tt *testing.T) {
	t := NewFailureRecorder(tt)
	start := time.Now()
	g := growFromWorkers(t)

	t0 := time.Now()
	for _, m := range g.c.Members {
		if out, err := importImage(m, g.testserver); err != nil {
			t.Fatalf("importing the test image into %s: %v\n%s", m.Name, err, out)
		}
	}
	t.Logf("test image imported into the 3 nodes in %s", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	loseAMaster(t, g.c, g.admin, g.grown, g.master, []nodes.Member{g.master})
	t.Logf("scenario 2 (the first master lost and back, the others promoted workers) took %s", time.Since(t0).Round(time.Second))

	t0 = time.Now()
	r := allMastersReboot(t, g.admin, g.grown, 200)
	checkOnePerMaster(t, g.admin, g.grown)
	checkEtcdMembers(t, g.grown)
	checkMastersCondition(t, g.admin, g.names())
	checkVIP(t, g.grown)
	t.Logf("scenario 5 (every node of the grown cluster rebooted at once): the API lists %s after the power-on, every master self-hosted %s after; took %s",
		r.API.Round(time.Millisecond), r.SelfHosted.Round(time.Millisecond), time.Since(t0).Round(time.Second))

	t0 = time.Now()
	shrinkGrownToOne(t, g.admin, g.master, g.workers)
	t.Logf("scenario 3 (three masters to one, then two again) took %s", time.Since(t0).Round(time.Second))
	t.Logf("TestClusterGrownLifecycle took %s before the teardown (load %s)", time.Since(start).Round(time.Second), nodes.Load1())
}

// TestClusterGrownReplaceDead is the masters' issue's scenario 4 on a
// cluster grown from one master, in make test-cluster: one master and
// three workers, two of them promoted (growSome); a promoted master that
// does not hold the API address is powered off for good and its Node
// deleted, and the masters' controller removes its etcd member once it
// has not answered for --master-dead-after (removeDeadMaster: no command,
// no hand on etcd, at most 2 s of failed requests on the API address,
// quorum kept: two of three voters answer, then two of two); then the
// third worker is promoted in its place under the strict clients
// (promoteReplacement). No data race in any journal (make test-cluster
// builds bootlet with -race for it). Torn down at the end, failed or not.
func TestClusterGrownReplaceDead(tt *testing.T) {
	t := NewFailureRecorder(tt)
	start := time.Now()
	g := growSome(t, nodes.Spec{Masters: 1, Workers: 3, BootletArgs: "--master-dead-after=" + haDeadAfter.String()}, 2)
	// A promoted master that does not hold the API address; the first
	// master reads `bootlet master status`.
	holders := vipHolders(t, g.grown)
	i := slices.IndexFunc(g.workers, func(m nodes.Member) bool { return !slices.Contains(holders, m.Name) })
	if i < 0 {
		t.Fatalf("the API address is on %v: no promoted master without it", holders)
	}
	t0 := time.Now()
	left := removeDeadMaster(t, g.admin, g.grown, g.workers[i], haDeadAfter)
	t.Logf("a promoted master powered off for good, its Node deleted, its member removed; took %s", time.Since(t0).Round(time.Second))
	promoteReplacement(t, g, left)
	t.Logf("TestClusterGrownReplaceDead took %s before the teardown (load %s)", time.Since(start).Round(time.Second), nodes.Load1())
}

// TestClusterGrownReplaceFirst is scenario 4 when the dead master is the
// first one, the only one render made, in make test-cluster: one master
// and three workers, two promoted (growSome), each promoted master a
// candidate of the masters' controller (checkPromotedCanLead); the first
// master, which leads the controller and holds the API address, is powered
// off for good and its Node deleted. A promoted master takes the lead, and
// its controller removes the dead member once it has not answered for
// --master-dead-after (removeDeadMaster: at most 2 s of failed requests as
// the address moves, quorum kept); then the third worker is promoted in its
// place (promoteReplacement), its etcd member certificate signed by the
// promoted leader with the etcd CA the first master published. No data
// race in any journal. Torn down at the end, failed or not.
func TestClusterGrownReplaceFirst(tt *testing.T) {
	t := NewFailureRecorder(tt)
	start := time.Now()
	g := growSome(t, nodes.Spec{Masters: 1, Workers: 3, BootletArgs: "--master-dead-after=" + haDeadAfter.String()}, 2)
	checkPromotedCanLead(t, g.admin, g.workers)
	if holder := mastersLeader(t, g.admin); holder != g.master.Name {
		t.Logf("the masters' controller is led by %s, not the first master", holder)
	}
	t0 := time.Now()
	left := removeDeadMaster(t, g.admin, g.grown, g.master, haDeadAfter, "--kubeconfig", copyAdminConf(t, g.workers[0]))
	holder := mastersLeader(t, g.admin)
	if !slices.ContainsFunc(g.workers, func(m nodes.Member) bool { return m.Name == holder }) {
		t.Fatalf("the masters' controller is led by %q, want a promoted master", holder)
	}
	t.Logf("the first master powered off for good, its Node deleted, its member removed by %s's controller; took %s", holder, time.Since(t0).Round(time.Second))
	promoteReplacement(t, g, left)
	t.Logf("TestClusterGrownReplaceFirst took %s before the teardown (load %s)", time.Since(start).Round(time.Second), nodes.Load1())
}

// promoteReplacement labels the grown cluster's first spare worker a
// master in a dead one's place, under the strict clients, and checks the
// masters it makes with left: one etcd voter each, the control plane on
// each, the port routed by the new one's daemon, the API address on one,
// each called a master; no request failed.
func promoteReplacement(t testing.TB, g grown, left []nodes.Member) {
	t.Helper()
	replacement := g.spare[0]
	keep := StartProber(t, "api-keepalive", nodes.AdminConf, true)
	fresh := StartProber(t, "api-new-connection", nodes.AdminConf, false)
	time.Sleep(3 * time.Second)
	t0 := time.Now()
	setMasterLabel(t, g.admin, replacement.Name, true)
	awaitPromoted(t, g.admin, replacement.Name)
	t.Logf("%s promoted in the dead master's place in %s (load %s)", replacement.Name, time.Since(t0).Round(time.Millisecond), nodes.Load1())
	three := append(slices.Clone(left), replacement)
	var names []string
	for _, m := range three {
		names = append(names, m.Name)
	}
	checkEtcdMembers(t, three)
	checkComponentsOn(t, g.admin, names, pivoted...)
	checkPortRoutedBy(t, replacement.Node().PID1(), replacement.Name, "bootlet-worker.service")
	checkVIP(t, three)
	checkMastersCondition(t, g.admin, names)
	stopStrictProbes(t, "across the replacement's promotion", keep, fresh)
}

// grown is a cluster growFromWorkers grew.
type grown struct {
	c          *nodes.Cluster
	admin      *kubernetes.Clientset
	master     nodes.Member
	workers    []nodes.Member // the promoted ones
	spare      []nodes.Member // workers still
	grown      []nodes.Member // the master, then the workers
	testserver string
}

func (g grown) names() []string {
	var names []string
	for _, m := range g.grown {
		names = append(names, m.Name)
	}
	return names
}

// growFromWorkers is `make cluster MASTERS=1 WORKERS=2`, then both
// workers promoted by their label, one after the other, under the two
// strict probe clients on the API address. Each worker's agent fetches its
// credentials as a master, its daemon makes its etcd member from the
// master's and starts it as the learner the controller adds, and the
// controller makes it a voter and moves the apiserver there. At the end
// etcd has three voters, the apiserver's, controller-manager's and
// scheduler's DaemonSets are Ready on the three nodes (the last two were
// the one-master render's Deployments, which the first promotion
// replaced), each promoted worker's daemon routes its apiserver port, the
// VIP is on one master, no request failed, and nothing that ran before
// was restarted or replaced, on any node, but for the pods of those two
// Deployments. The teardown and the race check are registered.
func growFromWorkers(t testing.TB) grown {
	t.Helper()
	return growSome(t, nodes.Spec{Masters: 1, Workers: 2}, 2)
}

// growSome is growFromWorkers on the cluster spec makes (one master),
// promoting its first n workers; the others stay workers (grown.spare).
func growSome(t testing.TB, spec nodes.Spec, n int) grown {
	t.Helper()
	start := time.Now()
	c, _, testserver := upTestClusterSpec(t, spec, []string{"bootlet", "bootlet-tools", "containerd", "kubelet", "kubectl"}, func(c *nodes.Cluster) { clusterDump(t, c) })
	checkRacesAtEnd(t, c)
	admin := AdminClient(t, nodes.StateDir)
	master, workers, spare := c.Members[0], c.Members[1:1+n], c.Members[1+n:]
	t.Logf("make cluster MASTERS=%d WORKERS=%d returned %s after the start (load %s)", spec.Masters, spec.Workers, time.Since(start).Round(time.Second), nodes.Load1())
	b := nodeBootlet(t, master.Node().PID1(), master.Name)
	waitSelfHosted(t, admin, b, master.Name, start, true, "", 10*time.Minute)
	waitPivotDone(t, b, admin, 3*time.Minute)

	// What runs on each node before, once every container has started (a
	// worker's flannel may still be starting when make cluster returns).
	before := map[string]map[string]containerState{}
	for _, m := range c.Members {
		Eventually(t, 2*time.Minute, func() (bool, string) {
			before[m.Name] = nodeContainers(t, admin, m.Name)
			for key, cs := range before[m.Name] {
				if cs.id == "" {
					return false, fmt.Sprintf("%s has not started on %s", key, m.Name)
				}
			}
			return true, ""
		})
	}
	deploymentPods := electedDeploymentPods(t, admin)
	keep := StartProber(t, "api-keepalive", nodes.AdminConf, true)
	fresh := StartProber(t, "api-new-connection", nodes.AdminConf, false)
	time.Sleep(3 * time.Second)

	g := grown{c: c, admin: admin, master: master, workers: workers, spare: spare, grown: []nodes.Member{master}, testserver: testserver}
	for _, w := range workers {
		t0 := time.Now()
		setMasterLabel(t, admin, w.Name, true)
		awaitPromoted(t, admin, w.Name)
		g.grown = append(g.grown, w)
		t.Logf("%s promoted in %s (load %s)", w.Name, time.Since(t0).Round(time.Millisecond), nodes.Load1())
		checkEtcdMembers(t, g.grown)
	}
	checkComponentsOn(t, admin, g.names(), pivoted...)
	// Each promoted worker's daemon routes its apiserver port from the
	// identity's arrival, without a restart, and holds the API address
	// with the master: every node is in its group.
	for _, w := range workers {
		checkPortRoutedBy(t, w.Node().PID1(), w.Name, "bootlet-worker.service")
	}
	checkVIP(t, g.grown)

	stopStrictProbes(t, "across both promotions", keep, fresh)
	for _, m := range c.Members {
		moved, changed := splitElectedMove(containerChanges(before[m.Name], nodeContainers(t, admin, m.Name)), deploymentPods)
		if len(changed) > 0 {
			t.Errorf("on %s, containers restarted, replaced or gone across the promotions: %v", m.Name, changed)
		} else {
			t.Logf("%s's %d containers unchanged (same IDs, same restarts) across the promotions, but for the controller-manager's and scheduler's Deployment's, which their DaemonSet's replaced: %v",
				m.Name, len(before[m.Name])-len(moved), moved)
		}
	}
	t.Logf("grown from one master and %d workers to %d masters in %s", len(c.Members)-1, len(g.grown), time.Since(start).Round(time.Second))
	return g
}
