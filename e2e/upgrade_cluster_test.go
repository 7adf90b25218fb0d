//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bootlet/bootlet/e2e/nodes"
	"github.com/bootlet/bootlet/upgrade"
	"github.com/bootlet/bootlet/upgrade/cvclient"
	"github.com/bootlet/bootlet/upgrade/observer"
)

// TestUpgradeCluster is the minor upgrade on three masters and a worker
// (make cluster's harness, package nodes), etcd included: the target's
// images imported on every node, then `bootlet upgrade apply --to v1.37.2
// --wait` through the one API address, under both strict probe clients on
// it. The controller runs in the masters' daemons; each master's etcd
// member and kubelet are replaced by its daemon's node agent, the worker's
// kubelet by `bootlet upgrade agent` (bootlet-upgrade-agent.service).
//
// A timeline samples the cluster once a second (observer.Read, as the
// controller reads it) and fails the test at any sample that breaks the
// skew policy's order: a controller-manager or scheduler at the target
// while any apiserver is older, an apiserver at the target while any etcd
// member is older, or a kubelet at the target while any control-plane
// component is older; and at any violation upgrade.SkewViolations finds.
// At the end every node's kubelet, every etcd member (etcd's own
// status), /version and every control-plane pod report the target, and the
// apiservers name their own etcd member again, with 0 failed requests of
// either client in etcd's steps and in the rest.
func TestUpgradeCluster(t *testing.T) { upgradeCluster(t, 3) }

// TestUpgradeTwoMasters is TestUpgradeCluster's upgrade on two masters and
// a worker. With two members neither may restart alone (the other is no
// quorum), so each member's step adds one helper member beside it
// (upgrade/nodeagent, helper.go), which also serves the member's client
// address while it restarts, as a three-member step's one helper does.
func TestUpgradeTwoMasters(t *testing.T) { upgradeCluster(t, 2) }

// TestUpgradeGrown is TestUpgradeCluster's upgrade on three masters and a
// worker grown by label from one master (growSome: one master and three
// workers, two of them promoted). A promoted master's etcd member is taken
// through its step by an agent its daemon runs with the identity it makes
// as a candidate (node/promotedleader.go), its kubelet by the `bootlet
// upgrade agent` it ran as a worker; the first master's by its daemon.
func TestUpgradeGrown(tt *testing.T) {
	t := NewFailureRecorder(tt)
	requireTarget(t)
	start := time.Now()
	g := growSome(t, nodes.Spec{Masters: 1, Workers: 3}, 2)
	t.Cleanup(func() {
		if t.Failed() {
			logUpgradeJournals(t, g.c, g.names())
		}
	})
	checkPromotedCanLead(t, g.admin, g.workers)
	t.Logf("one master and three workers, two promoted, %s after the start", time.Since(start).Round(time.Second))
	upgradeAndCheck(t, g.c, g.grown, g.admin)
}

func upgradeCluster(tt *testing.T, mastersWanted int) {
	t := NewFailureRecorder(tt)
	requireTarget(t)
	start := time.Now()
	c, _, _ := upTestCluster(t, mastersWanted, 1, []string{"bootlet", "bootlet-tools", "containerd", "kubelet", "kubectl"}, func(c *nodes.Cluster) {
		clusterDump(t, c)
		logUpgradeJournals(t, c, nil)
	})
	checkRacesAtEnd(t, c)
	var masters []nodes.Member
	for _, m := range c.Members {
		if m.Role == nodes.Master {
			masters = append(masters, m)
		}
	}
	admin := AdminClient(t, nodes.StateDir)
	for _, m := range masters {
		b := nodeBootlet(t, m.Node().PID1(), m.Name)
		waitSelfHosted(t, admin, b, m.Name, start, true, "", 10*time.Minute)
		waitPivotDone(t, b, admin, 3*time.Minute)
	}
	checkEtcdMembers(t, masters)
	t.Logf("the cluster is up and self-hosted %s after the start", time.Since(start).Round(time.Second))
	upgradeAndCheck(t, c, masters, admin)
}

// logUpgradeJournals logs each node's upgrade lines: a first-boot master's
// daemon's, a worker's `bootlet upgrade agent`'s, and on a worker labelled
// a master (promoted) its daemon's too, whose agent takes its etcd
// member's steps.
func logUpgradeJournals(t testing.TB, c *nodes.Cluster, promoted []string) {
	for _, m := range c.Members {
		pid := m.Node().PID1()
		if pid <= 0 {
			continue
		}
		units := []string{"bootlet.service"}
		if m.Role != nodes.Master {
			units = []string{"bootlet-upgrade-agent.service"}
			if slices.Contains(promoted, m.Name) {
				units = append(units, "bootlet-worker.service")
			}
		}
		for _, unit := range units {
			out, _ := nodes.Inside(pid, "journalctl", "-b", "--no-pager", "-o", "short-precise", "-u", unit, "--grep", "[Uu]pgrade")
			t.Logf("%s's upgrade log (%s):\n%s", m.Name, unit, out)
		}
	}
}

// upgradeAndCheck imports the target on every node of c and upgrades the
// cluster to it through the API address, masters being the nodes with an
// etcd member, and checks what TestUpgradeCluster says.
func upgradeAndCheck(t *FailureRecorder, c *nodes.Cluster, masters []nodes.Member, admin *kubernetes.Clientset) {
	target := upgrade.Releases[upgradeTarget]
	// The target's archives on every node, imported into its containerd
	// as an air-gapped node receives them.
	for _, m := range c.Members {
		took := importOnNode(t, m, upgradeTarget)
		t.Logf("imported %s's images on %s in %s", upgradeTarget, m.Name, took.Round(time.Millisecond))
	}
	var planOut string
	Eventually(t, 3*time.Minute, func() (bool, string) {
		out, err := exec.Command(Bin(t, "bootlet"), "upgrade", "plan", "--to", upgradeTarget, "--kubeconfig", nodes.AdminConf).CombinedOutput()
		planOut = string(out)
		return err == nil, "bootlet upgrade plan:\n" + planOut
	})
	t.Logf("bootlet upgrade plan --to %s:\n%s", upgradeTarget, planOut)

	// Two phases of the probe clients, each with its own count: etcd's
	// steps (until the controller begins the first apiserver's: the
	// members one by one, each with a helper on its client address;
	// docs/design/upgrade.md, "etcd's step"), then the rest. Neither may
	// fail a request.
	restartsBefore := map[string][]string{}
	for _, m := range c.Members {
		restartsBefore[m.Name] = podRestarts(t, admin, m.Name)
	}
	tl := startSkewTimeline(t, admin, target)
	cfg, err := clientcmd.BuildConfigFromFlags("", nodes.AdminConf)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	dyn, err := cvclient.ForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Render's members share their client address, so etcd's steps roll
	// no apiserver (docs/design/upgrade.md, "A helper on the member's own
	// address"): the apiserver DaemonSet's generation moves only with
	// the apiserver's own step.
	apiserverGeneration := func() (int64, string) {
		t.Helper()
		ds, err := admin.AppsV1().DaemonSets("kube-system").Get(context.Background(), string(upgrade.APIServer), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return ds.Generation, ds.Spec.Template.Spec.Containers[0].Image
	}
	if o, err := observer.Read(context.Background(), admin); err != nil || !upgrade.EtcdSharesClientAddress(o.Pods) {
		t.Errorf("etcd's members do not all run with %s=true (render's): %v", upgrade.ArgEtcdSocketReusePort, err)
	}
	genBefore, _ := apiserverGeneration()
	cpu := StartCPUSampler(t, 250*time.Millisecond)
	etcdProbe := StartProber(t, "keep-alive to the API address, etcd's steps", nodes.AdminConf, true)
	etcdFresh := StartProber(t, "new connection to the API address, etcd's steps", nodes.AdminConf, false)
	applied := time.Now()
	var applyOut bytes.Buffer
	apply := exec.Command(Bin(t, "bootlet"), "upgrade", "apply", "--to", upgradeTarget, "--wait", "--timeout", "45m", "--kubeconfig", nodes.AdminConf)
	apply.Stdout, apply.Stderr = &applyOut, &applyOut
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	applyDone := make(chan error, 1)
	go func() { applyDone <- apply.Wait() }()
	var etcdTook time.Duration
	for etcdTook == 0 {
		select {
		case err := <-applyDone:
			applyDone <- err
			etcdTook = time.Since(applied)
		case <-time.After(time.Second):
			cv, err := cvclient.Get(context.Background(), dyn)
			if err == nil && cv.Status.InFlight != nil && cv.Status.InFlight.Component != string(upgrade.Etcd) {
				etcdTook = time.Since(applied)
			}
		}
	}
	etcdRes, etcdFreshRes := etcdProbe.Stop(), etcdFresh.Stop()
	genAfter, image := apiserverGeneration()
	rolls := genAfter - genBefore
	if image == upgrade.ImageOf(upgrade.APIServer, upgradeTarget) {
		rolls-- // the apiserver's step began: its one patch
	}
	t.Logf("the apiserver DaemonSet's generation in etcd's steps: %d to %d (image %s): %d change(s) of etcd's steps", genBefore, genAfter, image, rolls)
	if rolls != 0 {
		t.Errorf("etcd's steps changed the apiserver DaemonSet %d time(s), want none: the members share their client address", rolls)
	}
	probe := StartProber(t, "keep-alive to the API address, after etcd's steps", nodes.AdminConf, true)
	fresh := StartProber(t, "new connection to the API address, after etcd's steps", nodes.AdminConf, false)
	err = <-applyDone
	total := time.Since(applied)
	t.Logf("bootlet upgrade apply --to %s --wait (%s):\n%s", upgradeTarget, total.Round(time.Millisecond), applyOut.String())
	time.Sleep(time.Second)
	res, freshRes := probe.Stop(), fresh.Stop()
	timeline := tl.stop()
	cpu.Stop()
	t.Logf("the upgrade's timeline (each component's version per node, as a sample a second first saw it):\n%s", timeline)
	t.Logf("ETCD STEPS (%d members, %s): keep-alive %d failed of %d, windows %s%s\nnew connection %d not answered of %d, windows %s%s",
		len(masters), etcdTook.Round(time.Millisecond), etcdRes.Failed, etcdRes.Requests, windowsSummary(etcdRes.Windows), failuresSuffix(etcdRes)+explainWindows(cpu, etcdRes),
		etcdFreshRes.NotAnswered(), etcdFreshRes.Requests, windowsSummary(etcdFreshRes.Windows), failuresSuffix(etcdFreshRes)+explainWindows(cpu, etcdFreshRes))
	if err != nil {
		t.Fatalf("upgrade apply --wait: %v", err)
	}

	ctx := context.Background()
	if v, err := admin.Discovery().ServerVersion(); err != nil || v.GitVersion != upgradeTarget {
		t.Errorf("/version after the upgrade: %v, %v; want %s", v, err, upgradeTarget)
	}
	nl, err := admin.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nl.Items {
		if n.Status.NodeInfo.KubeletVersion != upgradeTarget || n.Spec.Unschedulable {
			t.Errorf("node %s after the upgrade: kubelet %s, unschedulable %v", n.Name, n.Status.NodeInfo.KubeletVersion, n.Spec.Unschedulable)
		}
	}
	for ep, v := range etcdVersions(t, masters) {
		if v != target.Etcd {
			t.Errorf("etcd at %s reports %s, want %s", ep, v, target.Etcd)
		}
	}
	checkEtcdMembers(t, masters) // one per master: no helper member left
	ds, err := admin.AppsV1().DaemonSets("kube-system").Get(ctx, string(upgrade.APIServer), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := upgrade.EtcdServersOf(ds.Spec.Template.Spec.Containers[0].Command); got != "https://127.0.0.1:2379" {
		t.Errorf("after the upgrade the apiservers' --etcd-servers is %q, want their own member's only", got)
	}
	o, err := observer.Read(ctx, admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range o.Pods {
		for _, ctr := range p.Spec.Containers {
			comp := upgrade.Component(ctr.Name)
			want, ok := upgrade.Images(target)[comp]
			if !ok || comp == upgrade.Kubelet {
				continue
			}
			if ctr.Image != want || upgrade.RunningImage(p, ctr) != want {
				t.Errorf("pod %s/%s on %s: spec %s, runs %s; want %s", p.Namespace, p.Name, p.Spec.NodeName, ctr.Image, upgrade.RunningImage(p, ctr), want)
			}
		}
	}
	// Container restarts by component: a restart count that changed on a
	// pod that was there before. Only etcd's may: the kubelet replaces its
	// container in the same pod (the workloads' steps make new pods).
	restarted := map[string]int{}
	for _, m := range c.Members {
		for _, r := range podRestarts(t, admin, m.Name) {
			if strings.HasSuffix(r, "=0") || slices.Contains(restartsBefore[m.Name], r) {
				continue
			}
			ctr := r[strings.LastIndex(r[:strings.LastIndex(r, "=")], "/")+1 : strings.LastIndex(r, "=")]
			restarted[ctr]++
			if ctr != string(upgrade.Etcd) {
				t.Errorf("a container restarted during the upgrade on %s: %s", m.Name, r)
			}
		}
	}
	t.Logf("containers restarted during the upgrade, by container: %v (etcd's are its replacement, one per member)", restarted)
	if v := tl.violations(); len(v) > 0 {
		t.Errorf("the skew policy's order was broken at %d samples:\n%s", len(v), strings.Join(v, "\n"))
	}
	status, _ := exec.Command(Bin(t, "bootlet"), "upgrade", "status", "--kubeconfig", nodes.AdminConf).CombinedOutput()
	t.Logf("bootlet upgrade status:\n%s", status)
	if !strings.Contains(string(status), "Completed") {
		t.Errorf("the history does not say the upgrade Completed")
	}
	t.Logf("UPGRADE %d masters and a worker v1.36.3 -> %s (etcd %s): total %s (etcd's steps %s); after etcd's steps: keep-alive %d requests, %d failed; new connection %d requests, %d not answered; %d timeline samples",
		len(masters), upgradeTarget, target.Etcd, total.Round(time.Millisecond), etcdTook.Round(time.Millisecond), res.Requests, res.Failed, freshRes.Requests, freshRes.NotAnswered(), tl.samples)
	if etcdRes.Requests < 100 || etcdRes.Failed != 0 {
		t.Errorf("the keep-alive probe client saw %d failed requests of %d during etcd's steps%s", etcdRes.Failed, etcdRes.Requests, failuresSuffix(etcdRes))
	}
	if etcdFreshRes.Requests < 100 || etcdFreshRes.NotAnswered() != 0 {
		t.Errorf("the new-connection probe client saw %d requests no apiserver answered, of %d, during etcd's steps%s", etcdFreshRes.NotAnswered(), etcdFreshRes.Requests, failuresSuffix(etcdFreshRes))
	}
	if res.Requests < 100 || res.Failed != 0 {
		t.Errorf("the keep-alive probe client saw %d failed requests of %d after etcd's steps%s%s", res.Failed, res.Requests, failuresSuffix(res), explainWindows(cpu, res))
	}
	if freshRes.Requests < 100 || freshRes.NotAnswered() != 0 {
		t.Errorf("the new-connection probe client saw %d requests no apiserver answered, of %d, after etcd's steps%s%s", freshRes.NotAnswered(), freshRes.Requests, failuresSuffix(freshRes), explainWindows(cpu, freshRes))
	}
}

// importOnNode copies the target's archives into m's disk and imports them
// into its containerd with `bootlet images import`, as a person does on an
// air-gapped node.
func importOnNode(t testing.TB, m nodes.Member, version string) time.Duration {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(Repo, "_output", "images", version, "*.tar"))
	dir := "/var/tmp/bootlet-" + version
	host := filepath.Join(m.Node().Root, dir)
	if err := os.MkdirAll(host, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(host, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if out, err := nodes.Inside(m.Node().PID1(), "/usr/bin/bootlet", "images", "import", "--address", "/run/bootlet/containerd.sock", dir); err != nil {
		t.Fatalf("bootlet images import on %s: %v\n%s", m.Name, err, out)
	}
	return time.Since(start)
}

// etcdVersions is each member's server version, from etcd's own status.
func etcdVersions(t testing.TB, masters []nodes.Member) map[string]string {
	t.Helper()
	var eps []string
	for _, m := range masters {
		eps = append(eps, "https://"+m.Addr().String()+":2379")
	}
	cli := etcdClient(t, masters, eps)
	out := map[string]string{}
	for _, ep := range eps {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err != nil {
			t.Errorf("etcd status of %s: %v", ep, err)
			continue
		}
		out[ep] = st.Version
	}
	return out
}

// skewTimeline samples the cluster once a second while the upgrade runs:
// when each component on each node was first seen at each version, and
// every sample that breaks the order the skew policy asks.
type skewTimeline struct {
	mu      sync.Mutex
	lines   []string
	seen    map[string]string
	broken  []string
	samples int
	done    chan struct{}
	stopped chan struct{}
	start   time.Time
}

func startSkewTimeline(t testing.TB, cs kubernetes.Interface, target upgrade.Versions) *skewTimeline {
	tl := &skewTimeline{seen: map[string]string{}, done: make(chan struct{}), stopped: make(chan struct{}), start: time.Now()}
	go func() {
		defer close(tl.stopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			o, err := observer.Read(ctx, cs)
			cancel()
			if err == nil {
				tl.sample(time.Now(), upgrade.Observe(o, target), target)
			}
			select {
			case <-tl.done:
				return
			case <-tick.C:
			}
		}
	}()
	return tl
}

func (tl *skewTimeline) sample(at time.Time, c upgrade.Cluster, target upgrade.Versions) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.samples++
	stamp := fmt.Sprintf("+%6.1fs", at.Sub(tl.start).Seconds())
	older := map[upgrade.Component][]string{} // component -> nodes still older than the target
	var atTarget []string
	for _, n := range c.Nodes {
		comps := make([]string, 0, len(n.Running))
		for comp := range n.Running {
			comps = append(comps, string(comp))
		}
		sort.Strings(comps)
		for _, name := range comps {
			comp := upgrade.Component(name)
			v := n.Running[comp]
			key := n.Name + " " + name
			if tl.seen[key] != v {
				tl.seen[key] = v
				tl.lines = append(tl.lines, fmt.Sprintf("%s %-8s %-24s %s", stamp, n.Name, name, v))
			}
			if v == target.Of(comp) {
				atTarget = append(atTarget, key)
			} else {
				older[comp] = append(older[comp], n.Name)
			}
		}
	}
	for _, m := range c.EtcdMembers {
		if m.Helper {
			continue // a one-member step's helper, at the version the member leaves
		}
		if m.Version != target.Etcd {
			older[upgrade.Etcd] = append(older[upgrade.Etcd], m.Name)
		}
	}
	var why []string
	for _, key := range atTarget {
		comp := upgrade.Component(key[strings.Index(key, " ")+1:])
		var before []upgrade.Component
		switch comp {
		case upgrade.APIServer:
			before = []upgrade.Component{upgrade.Etcd}
		case upgrade.ControllerManager, upgrade.Scheduler:
			before = []upgrade.Component{upgrade.Etcd, upgrade.APIServer}
		case upgrade.Kubelet:
			before = []upgrade.Component{upgrade.Etcd, upgrade.APIServer, upgrade.ControllerManager, upgrade.Scheduler}
		}
		for _, b := range before {
			if len(older[b]) > 0 {
				why = append(why, fmt.Sprintf("%s at the target while %s is older on %v", key, b, older[b]))
			}
		}
	}
	why = append(why, upgrade.SkewViolations(c)...)
	if len(why) > 0 {
		tl.broken = append(tl.broken, stamp+": "+strings.Join(why, "; "))
	}
}

func (tl *skewTimeline) stop() string {
	close(tl.done)
	<-tl.stopped
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return strings.Join(tl.lines, "\n")
}

func (tl *skewTimeline) violations() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.broken
}

// windowsSummary lists failure windows, "none" without one.
func windowsSummary(ws []FailureWindow) string {
	if len(ws) == 0 {
		return "none"
	}
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return strings.Join(out, ", ")
}
