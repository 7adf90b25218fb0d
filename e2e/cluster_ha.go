//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/e2e/nodes"
)

// The highly available control plane's scenarios 4 to 6 on a cluster of
// several masters (make
// cluster's harness, package nodes): every master rebooted at once, a
// rolling upgrade of the apiserver DaemonSet across the masters, a worker
// rebooted. Each is a function TestClusterThreeMasters calls in turn on
// the same cluster; each fails t with what it saw, and returns its numbers
// for the test's log.

// waitNodeBack waits until node is Ready (a heartbeat after since) and
// every pod bound to it is Running and Ready again, its containers started
// after since.
func waitNodeBack(t testing.TB, admin *kubernetes.Clientset, node string, since time.Time, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	Eventually(t, timeout, func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue && c.LastHeartbeatTime.After(since) {
				ready = true
			}
		}
		if !ready {
			return false, node + " is not Ready since the power-on"
		}
		pods, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err.Error()
		}
		var waiting []v1.Pod
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil || p.Status.Phase == v1.PodSucceeded {
				continue
			}
			if !Running(p) || !Ready(p) || !startedAfter(p, since) {
				waiting = append(waiting, *p)
			}
		}
		return len(waiting) == 0, fmt.Sprintf("pods on %s not back yet:\n%s", node, podsSummary(waiting))
	})
}

// startedAfter: every container of p runs since after t.
func startedAfter(p *v1.Pod, t time.Time) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil || !cs.State.Running.StartedAt.After(t) {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) > 0
}

// AllMastersReboot is what scenario 4 measured.
type AllMastersReboot struct {
	Objects   int
	PoweredOn time.Time
	// API: from the power-on to the API address answering a list;
	// SelfHosted: to every master self-hosted again.
	API, SelfHosted time.Duration
}

// checkNodeRaces fails t on a race detector report in the journal of a
// running node (every unit: bootlet.service, and any bootlet or
// bootlet-tools a unit ran). A node's journal may not outlive its power-off:
// call it before one.
func checkNodeRaces(t testing.TB, m nodes.Member) {
	t.Helper()
	pid := m.Node().PID1()
	if pid == 0 {
		t.Errorf("%s does not run: its journal cannot be read for data races", m.Name)
		return
	}
	races, err := nodes.JournalRaces(pid)
	if err != nil {
		t.Errorf("%s: reading its journal for data races: %v", m.Name, err)
		return
	}
	if len(races) > 0 {
		t.Errorf("%s's journal holds %d data race report(s); the first:\n%s", m.Name, len(races), races[0])
	}
}

// checkRacesAtEnd registers the race check of every node still running,
// called right after upTestCluster: cleanups run last-in first-out, so it
// reads the journals before the teardown powers the nodes off.
func checkRacesAtEnd(t testing.TB, c *nodes.Cluster) {
	t.Cleanup(func() {
		var read []string
		for _, m := range c.Members {
			if m.Node().PID1() > 0 {
				checkNodeRaces(t, m)
				read = append(read, m.Name)
			}
		}
		t.Logf("journals read for data races before the teardown: %v", read)
	})
}

// allMastersReboot is scenario 4: every master powered off, then on, at
// once. The control plane must come back self-hosted on each (etcd quorum
// back: the API lists and writes), with every object created before.
func allMastersReboot(t testing.TB, admin *kubernetes.Clientset, masters []nodes.Member, objects int) AllMastersReboot {
	t.Helper()
	ctx := context.Background()
	r := AllMastersReboot{Objects: objects}
	ns := "ha-before-reboot"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < objects; i++ {
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)}, Data: map[string]string{"i": fmt.Sprint(i)}}
		if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating ConfigMap %d: %v", i, err)
		}
	}
	// Their journals go with their power (a volatile journal): read first.
	for _, m := range masters {
		checkNodeRaces(t, m)
	}
	for _, m := range masters {
		if err := nodes.PowerOff(m); err != nil {
			t.Fatalf("powering off %s: %v", m.Name, err)
		}
	}
	on := time.Now()
	r.PoweredOn = on
	cpu := nodes.SnapshotCPU()
	for _, m := range masters {
		if _, err := nodes.PowerOn(m); err != nil {
			t.Fatalf("powering on %s: %v", m.Name, err)
		}
	}
	// etcd has quorum again once a write through the API address succeeds.
	Eventually(t, 10*time.Minute, func() (bool, string) {
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "written-after-reboot"}}
		_, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err.Error()
		}
		return true, ""
	})
	r.API = time.Since(on)
	for _, m := range masters {
		waitSelfHosted(t, admin, nodeBootlet(t, m.Node().PID1(), m.Name), m.Name, on, false, "", 10*time.Minute)
	}
	r.SelfHosted = time.Since(on)
	// Processes that exited (crash-looping apiservers) took their time
	// with them: a lower bound of what the comeback cost.
	t.Logf("CPU from the power-on to every master self-hosted, of the processes still running (load %s): %s", nodes.Load1(), nodes.SnapshotCPU().TopSince(cpu, 12))
	l, err := admin.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, cm := range l.Items {
		have[cm.Name] = cm.Data["i"] != ""
	}
	var lost []string
	for i := 0; i < objects; i++ {
		if n := fmt.Sprintf("cm-%04d", i); !have[n] {
			lost = append(lost, n)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d ConfigMaps created before every master rebooted are gone: %v", len(lost), objects, lost)
	}
	t.Logf("ALL MASTERS REBOOTED: the API address lists again %s after the power-on, every master self-hosted %s after; %d of %d objects kept",
		r.API.Round(time.Millisecond), r.SelfHosted.Round(time.Millisecond), objects-len(lost), objects)
	return r
}

// rollingUpgrade is scenario 5: the apiserver DaemonSet moved to a second
// tag of its image (tagged in every master's containerd), one master after
// the other (maxSurge 1), under both probe clients through the API
// address; none of their requests may fail.
func rollingUpgrade(t testing.TB, admin *kubernetes.Clientset, kubeconfig string, masters []nodes.Member) UpgradeResult {
	t.Helper()
	ctx := context.Background()
	ds, err := admin.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	from := containerImage(&ds.Spec.Template.Spec, "kube-apiserver")
	to := from + "-ha"
	for _, m := range masters {
		out, err := nodes.Inside(m.Node().PID1(), "/usr/libexec/bootlet/ctr", "--address", "/run/bootlet/containerd.sock", "--namespace", "k8s.io", "images", "tag", "--force", from, to)
		if err != nil {
			t.Fatalf("tagging %s as %s on %s: %v\n%s", from, to, m.Name, err, out)
		}
	}
	r := UpgradeResult{From: from, To: to}
	etcdBefore := etcdServerMetrics(masters)
	cpu := nodes.SnapshotCPU()
	probe := StartProber(t, "keep-alive to the API address during the rolling upgrade", kubeconfig, true)
	fresh := StartProber(t, "new connection per request to the API address during the rolling upgrade", kubeconfig, false)
	start := time.Now()
	kubectl(t, kubeconfig, "-n", "kube-system", "set", "image", "ds/kube-apiserver", "kube-apiserver="+to)
	// One list a second: the wait must not add much to the load the probe
	// clients measure (three lists every 100 ms would be 30 a second).
	timeline := newPodTimeline()
	EventuallyEvery(t, 15*time.Minute, time.Second, func() (bool, string) {
		l, err := admin.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-apiserver"})
		if err != nil {
			return false, err.Error()
		}
		timeline.observe(time.Now(), l.Items)
		var why []string
		for _, m := range masters {
			var pods []v1.Pod
			for _, p := range l.Items {
				if p.Spec.NodeName == m.Name {
					pods = append(pods, p)
				}
			}
			if !(len(pods) == 1 && containerImage(&pods[0].Spec, "kube-apiserver") == to && Running(&pods[0]) && Ready(&pods[0]) && pods[0].DeletionTimestamp == nil) {
				why = append(why, m.Name+":\n"+podsSummary(pods))
			}
		}
		return len(why) == 0, "self-hosted apiserver pods during the rolling upgrade:\n" + strings.Join(why, "\n")
	})
	r.Took = time.Since(start)
	time.Sleep(time.Second)
	r.KeepAlive, r.NewConn = probe.Stop(), fresh.Stop()
	// Where the machine's CPU went meanwhile: the probe's failures have been
	// requests slower than its 1 s timeout (docs/cluster.md, run 10).
	t.Logf("CPU during the rolling upgrade (load %s): %s", nodes.Load1(), nodes.SnapshotCPU().TopSince(cpu, 12))
	// What the failures, if any, fall next to: which master's apiservers
	// were starting or stopping, and how etcd's members fared.
	t.Logf("apiserver pods during the rolling upgrade (seen by a list a second, from %s):\n%s", start.Format("15:04:05.000"), timeline)
	t.Logf("etcd members during the rolling upgrade (their metrics, before -> after):\n%s", etcdMetricsChange(etcdBefore, etcdServerMetrics(masters)))
	t.Logf("ROLLING UPGRADE %s -> %s over %d masters in %s: keep-alive %d failed of %d, new connection %d not answered of %d",
		from, to, len(masters), r.Took.Round(time.Millisecond), r.KeepAlive.Failed, r.KeepAlive.Requests, r.NewConn.NotAnswered(), r.NewConn.Requests)
	if r.KeepAlive.Requests < 100 || r.KeepAlive.Failed != 0 {
		t.Errorf("the keep-alive probe client saw %d failed requests of %d during the rolling upgrade%s", r.KeepAlive.Failed, r.KeepAlive.Requests, failuresSuffix(r.KeepAlive))
	}
	if r.NewConn.Requests < 100 || r.NewConn.NotAnswered() != 0 {
		t.Errorf("the new-connection probe client saw %d requests no apiserver answered, of %d, during the rolling upgrade%s", r.NewConn.NotAnswered(), r.NewConn.Requests, failuresSuffix(r.NewConn))
	}
	return r
}

// podTimeline is when a poll first saw each pod, saw it Ready, and saw it
// deleting, and when it was last seen: enough to place a failed request
// next to the start or the stop of an apiserver.
type podTimeline struct {
	order []types.UID
	pods  map[types.UID]*podSeen
}

type podSeen struct {
	name, node, image            string
	first, ready, deleting, last time.Time
}

func newPodTimeline() *podTimeline { return &podTimeline{pods: map[types.UID]*podSeen{}} }

func (tl *podTimeline) observe(at time.Time, pods []v1.Pod) {
	for i := range pods {
		p := &pods[i]
		s, ok := tl.pods[p.UID]
		if !ok {
			s = &podSeen{name: p.Name, node: p.Spec.NodeName, image: containerImage(&p.Spec, "kube-apiserver"), first: at}
			tl.pods[p.UID] = s
			tl.order = append(tl.order, p.UID)
		}
		if s.node == "" {
			// A DaemonSet's pod is created before the scheduler binds it.
			s.node = p.Spec.NodeName
		}
		if s.ready.IsZero() && Ready(p) {
			s.ready = at
		}
		if s.deleting.IsZero() && p.DeletionTimestamp != nil {
			s.deleting = at
		}
		s.last = at
	}
}

func (tl *podTimeline) String() string {
	stamp := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Format("15:04:05.000")
	}
	var b strings.Builder
	for _, uid := range tl.order {
		s := tl.pods[uid]
		fmt.Fprintf(&b, "  %s on %s (%s): first seen %s, Ready %s, deleting %s, last seen %s\n",
			s.name, s.node, s.image, stamp(s.first), stamp(s.ready), stamp(s.deleting), stamp(s.last))
	}
	return b.String()
}

// etcdWatched are the etcd server metrics that tell whether a member was
// the leader and whether it kept up: a starved leader sends its heartbeats
// late and answers read-index requests slowly.
var etcdWatched = []string{
	"etcd_server_is_leader",
	"etcd_server_leader_changes_seen_total",
	"etcd_server_heartbeat_send_failures_total",
	"etcd_server_slow_read_indexes_total",
	"etcd_server_slow_apply_total",
}

// etcdServerMetrics reads etcdWatched from each master's etcd metrics
// listener (kubeadm's --listen-metrics-urls=http://127.0.0.1:2381), by
// master name; a master it cannot read maps to the error.
func etcdServerMetrics(masters []nodes.Member) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, m := range masters {
		values := map[string]string{}
		body, err := nodes.Inside(m.Node().PID1(), "curl", "-sS", "--max-time", "5", "http://127.0.0.1:2381/metrics")
		if err != nil {
			values["error"] = strings.TrimSpace(strings.SplitN(err.Error(), "\n", 2)[0])
		}
		for _, line := range strings.Split(body, "\n") {
			name, value, ok := strings.Cut(line, " ")
			if ok && slices.Contains(etcdWatched, name) {
				values[name] = value
			}
		}
		out[m.Name] = values
	}
	return out
}

// etcdMetricsChange is one line per master: each watched metric as
// before -> after.
func etcdMetricsChange(before, after map[string]map[string]string) string {
	names := make([]string, 0, len(after))
	for name := range after {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		fmt.Fprintf(&b, "  %s:", name)
		for _, metric := range append([]string{"error"}, etcdWatched...) {
			was, is := before[name][metric], after[name][metric]
			if was == "" && is == "" {
				continue
			}
			fmt.Fprintf(&b, " %s %s -> %s;", strings.TrimPrefix(metric, "etcd_server_"), was, is)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// workerReboot is scenario 6: the worker power-cycled; every pod bound to
// it comes back Running and Ready. It returns the time from the power-on.
func workerReboot(t testing.TB, admin *kubernetes.Clientset, worker nodes.Member) time.Duration {
	t.Helper()
	ctx := context.Background()
	pods, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + worker.Name})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatalf("no pod on %s before its reboot", worker.Name)
	}
	checkNodeRaces(t, worker) // its journal may go with its power
	if err := nodes.PowerOff(worker); err != nil {
		t.Fatal(err)
	}
	on := time.Now()
	if _, err := nodes.PowerOn(worker); err != nil {
		t.Fatal(err)
	}
	waitNodeBack(t, admin, worker.Name, on, 10*time.Minute)
	took := time.Since(on)
	after, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + worker.Name})
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]bool{}
	for _, p := range after.Items {
		uids[string(p.UID)] = true
	}
	var gone []string
	for _, p := range pods.Items {
		if !uids[string(p.UID)] && p.OwnerReferences != nil && p.OwnerReferences[0].Kind == "DaemonSet" {
			gone = append(gone, p.Namespace+"/"+p.Name)
		}
	}
	if len(gone) > 0 {
		t.Errorf("DaemonSet pods of %s replaced rather than restarted across its reboot: %v", worker.Name, gone)
	}
	t.Logf("WORKER REBOOT %s: Ready and its %d pods Running and Ready %s after the power-on", worker.Name, len(after.Items), took.Round(time.Millisecond))
	return took
}

// apiserversReadyAt is when the last master's self-hosted apiserver pod
// turned Ready (each master must have one Running and Ready).
func apiserversReadyAt(t testing.TB, admin *kubernetes.Clientset, masters []nodes.Member) time.Time {
	t.Helper()
	var last time.Time
	for _, m := range masters {
		pods, err := selfHostedPods(context.Background(), admin, m.Name, "kube-apiserver")
		if err != nil {
			t.Fatal(err)
		}
		var at time.Time
		for i := range pods {
			if p := &pods[i]; Running(p) && Ready(p) && p.DeletionTimestamp == nil {
				at = readyTransition(p)
			}
		}
		if at.IsZero() {
			t.Fatalf("no Ready self-hosted apiserver on %s:\n%s", m.Name, podsSummary(pods))
		}
		if at.After(last) {
			last = at
		}
	}
	return last
}
