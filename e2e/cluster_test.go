//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/controlplanetaint"
	"github.com/bootlet/bootlet/csrapprover"
	"github.com/bootlet/bootlet/e2e/nodes"
	"github.com/bootlet/bootlet/manifests"
	btypes "github.com/bootlet/bootlet/types"
)

// TestClusterJoinWorker is the one-master-one-worker scenario, a worker
// joining, on the harness of `make cluster` (package nodes, docs/cluster.md
// "The harness"): two systemd-nspawn nodes on the bridge bl-cluster0, the
// master booted with bootlet's units to self-hosted as TestSystemdBoot's node,
// the worker with bootlet-containerd, bootlet-kubelet-worker and
// bootlet-upgrade-agent (no bootlet daemon), joined with the line `bootlet
// join print` prints on the master. Then:
//
//   - both nodes Ready, each with its own podCIDR; the worker's kubelet has
//     TLS-bootstrapped (its CSR auto-approved, its client certificate on
//     disk) and no bootlet daemon runs there; kube-proxy's and flannel's
//     pods on the worker Ready;
//   - the master's control plane self-hosted, with 0 container restarts;
//   - a pod on the worker reaches a pod on the master by its pod IP
//     (flannel's vxlan over the bridge), by a Service's cluster IP
//     (kube-proxy on the worker) and by name (CoreDNS);
//   - the worker labelled a master: its agent asks for its etcd member
//     certificate and its checkpointer identity with the node's own
//     identity and writes what the masters' leader issues; that identity
//     changes no Node's labels; the masters' controller promotes it with
//     0 failed requests (checkWorkerNodeKeys); unlabelled, it is demoted,
//     etcd is back to one member and the master is tainted again;
//   - isolation: each node's pod cgroups are under its own node cgroup (and
//     none in the host's /kubepods), and no container of the master was
//     restarted or replaced while the worker's kubelet ran pods and was
//     labelled;
//   - no data race: each node's journal holds no race detector report
//     (make e2e's bootlet is built with -race), read before the teardown.
//
// Every phase is timed and logged with the load average. The cluster is
// torn down at the end, failed or not (make cluster-down's nodes.Down), and
// the test fails if anything is left. It takes no machine lock: the nodes
// have their own cgroup namespaces, below cgroups of their own, and never
// meet the host kubelet's /kubepods.
func TestClusterJoinWorker(tt *testing.T) {
	t := NewFailureRecorder(tt)
	start := time.Now()
	ctx := context.Background()
	c, _, testserver := upTestCluster(t, 1, 1, []string{"bootlet", "bootlet-tools", "containerd", "kubelet"}, func(c *nodes.Cluster) { clusterDump(t, c) })
	checkRacesAtEnd(t, c)
	master, worker := c.Members[0], c.Members[1]
	admin := AdminClient(t, nodes.StateDir)
	mpid, wpid := master.Node().PID1(), worker.Node().PID1()
	if mpid == 0 || wpid == 0 {
		t.Fatalf("a node does not run: master PID 1 %d, worker PID 1 %d", mpid, wpid)
	}

	// The master: self-hosted as TestSystemdBoot's node, bootlet's pod API
	// read through the container's root.
	t0 := time.Now()
	b := nodeBootlet(t, mpid, master.Name)
	waitSelfHosted(t, admin, b, master.Name, start, true, "", 8*time.Minute)
	t.Logf("master self-hosted %s after make cluster returned (load %s)", time.Since(t0).Round(time.Millisecond), nodes.Load1())
	waitPivotDone(t, b, admin, 3*time.Minute)
	checkPortRouted(t, mpid, master.Name)
	t.Logf("master's pivot recorded complete %s after make cluster returned", time.Since(t0).Round(time.Millisecond))

	// The worker: joined by TLS bootstrap, no bootlet daemon.
	mnode, err := admin.CoreV1().Nodes().Get(ctx, master.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wnode, err := admin.CoreV1().Nodes().Get(ctx, worker.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if wnode.Spec.PodCIDR == "" || wnode.Spec.PodCIDR == mnode.Spec.PodCIDR {
		t.Errorf("podCIDRs: master %q, worker %q", mnode.Spec.PodCIDR, wnode.Spec.PodCIDR)
	}
	if got := nodeInternalIP(wnode); got != worker.Addr().String() {
		t.Errorf("the worker's InternalIP is %q, want its bridge address %s (--node-ip)", got, worker.Addr())
	}
	checkWorkerJoined(t, admin, worker, wpid)
	t.Logf("nodes: %s podCIDR %s, %s podCIDR %s", master.Name, mnode.Spec.PodCIDR, worker.Name, wnode.Spec.PodCIDR)

	t0 = time.Now()
	waitNodePodsReady(t, admin, worker.Name, map[string]string{"kube-system": "k8s-app=kube-proxy", manifests.FlannelNamespace: "app=flannel"}, 5*time.Minute)
	t.Logf("kube-proxy and flannel Ready on %s %s later", worker.Name, time.Since(t0).Round(time.Millisecond))

	if cp, err := admin.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "tier=control-plane", FieldSelector: "spec.nodeName=" + worker.Name}); err != nil {
		t.Error(err)
	} else if len(cp.Items) > 0 {
		t.Errorf("control-plane pods on the worker:\n%s", podsSummary(cp.Items))
	}

	// The adoption: the control plane bootlet started and the kubelet took
	// over (etcd, and the self-hosted apiserver, controller-manager and
	// scheduler) never restarted. Other restarts on the master (an add-on
	// that lost the API during the pivot) are logged.
	masterBefore := nodeContainers(t, admin, master.Name)
	deploymentPods := electedDeploymentPods(t, admin)
	var others []string
	for key, cs := range masterBefore {
		cp := strings.HasPrefix(key, "kube-system/etcd") || strings.HasPrefix(key, "kube-system/kube-apiserver") ||
			strings.HasPrefix(key, "kube-system/kube-controller-manager") || strings.HasPrefix(key, "kube-system/kube-scheduler")
		switch {
		case cp && cs.restarts != 0:
			t.Errorf("%s on %s: %d restarts after the adoption, want 0", cs.name, master.Name, cs.restarts)
		case cs.restarts != 0:
			others = append(others, fmt.Sprintf("%s %d", key, cs.restarts))
		}
	}
	sort.Strings(others)
	t.Logf("the master's %d containers: the control plane's 0 restarts; others restarted during the bootstrap: %v", len(masterBefore), others)

	// The pod network across the nodes.
	t0 = time.Now()
	for _, m := range c.Members {
		if out, err := importImage(m, testserver); err != nil {
			t.Fatalf("importing the test image into %s: %v\n%s", m.Name, err, out)
		}
	}
	t.Logf("test image imported into both nodes in %s", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	web := clusterWeb(t, admin, master.Name)
	t.Logf("web pod %s on %s Ready at %s in %s", web.Name, master.Name, web.Status.PodIP, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	logs := clusterClient(t, admin, worker.Name, web)
	t.Logf("the client on %s reached the web pod on %s in %s (load %s):\n%s", worker.Name, master.Name, time.Since(t0).Round(time.Millisecond), nodes.Load1(), logs)

	// The worker labelled a master, then not: its agent's etcd member
	// certificate, the controller's refusal (no daemon there), no member.
	t0 = time.Now()
	checkWorkerNodeKeys(t, admin, master, worker)
	checkMastersTainted(t, admin)
	t.Logf("the worker labelled and unlabelled in %s", time.Since(t0).Round(time.Millisecond))

	// Isolation.
	checkNodeCgroups(t, admin, c.Members)
	// The worker's promotion made the controller-manager and the scheduler
	// DaemonSets (two masters): their Deployment's pods went.
	moved, changed := splitElectedMove(containerChanges(masterBefore, nodeContainers(t, admin, master.Name)), deploymentPods)
	for _, change := range changed {
		t.Errorf("on %s since the worker joined and ran pods: %s", master.Name, change)
	}
	t.Logf("the master's %d containers unchanged (same IDs, 0 restarts) after the worker's pods ran and its promotion, but for the controller-manager's and scheduler's Deployment's, which their DaemonSet's replaced: %v",
		len(masterBefore)-len(moved), moved)
	t.Logf("TestClusterJoinWorker took %s before the teardown (load %s)", time.Since(start).Round(time.Second), nodes.Load1())
}

func nodeInternalIP(n *v1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// checkWorkerJoined checks the worker's TLS bootstrap: a CSR of a
// bootstrap token's user for system:node:NAME, approved; the kubelet's
// client certificate and kubeconfig on the worker's disk; no bootlet
// daemon there.
func checkWorkerJoined(t testing.TB, admin *kubernetes.Clientset, worker nodes.Member, pid1 int) {
	t.Helper()
	csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, csr := range csrs.Items {
		if !strings.HasPrefix(csr.Spec.Username, "system:bootstrap:") {
			continue
		}
		for _, c := range csr.Status.Conditions {
			// Approved by bootlet's approver on the masters: render grants
			// the token's group no auto-approval of the controller-manager.
			if c.Type == "Approved" && c.Reason == csrapprover.ReasonApproved && len(csr.Status.Certificate) > 0 {
				found = true
				t.Logf("CSR %s of %s: approved (%s), signed", csr.Name, csr.Spec.Username, c.Reason)
			}
		}
	}
	if !found {
		t.Errorf("no approved and signed CSR of a system:bootstrap: user: the worker did not TLS-bootstrap")
	}
	checkMastersTainted(t, admin)
	root := worker.Node().Root
	// Lstat: kubelet-client-current.pem is a link to an absolute path in
	// the node.
	for _, f := range []string{"etc/kubernetes/kubelet.conf", "var/lib/kubelet/pki/kubelet-client-current.pem"} {
		if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
			t.Errorf("the worker's /%s: %v", f, err)
		}
	}
	// bootlet join finish removed the token's only copy on the worker.
	if _, err := os.Lstat(filepath.Join(root, "etc/kubernetes/bootstrap-kubelet.conf")); !os.IsNotExist(err) {
		t.Errorf("the worker's /etc/kubernetes/bootstrap-kubelet.conf is still there after join finish: %v", err)
	}
	if out, _ := nodes.Inside(pid1, "systemctl", "is-active", "bootlet.service", "bootlet-kubelet.service", "bootlet-kubelet-worker.service", "bootlet-containerd.service"); strings.Join(strings.Fields(out), " ") != "inactive inactive active active" {
		t.Errorf("the worker's units (bootlet, bootlet-kubelet, bootlet-kubelet-worker, bootlet-containerd): %q, want inactive inactive active active", out)
	}
}

// waitNodePodsReady waits until, in each namespace, a pod of the selector
// runs on the node and is Ready.
func waitNodePodsReady(t testing.TB, admin *kubernetes.Clientset, node string, selectors map[string]string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func() (bool, string) {
		var why []string
		for ns, sel := range selectors {
			pods, err := admin.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: sel, FieldSelector: "spec.nodeName=" + node})
			if err != nil {
				return false, err.Error()
			}
			if len(pods.Items) != 1 || !Ready(&pods.Items[0]) {
				why = append(why, fmt.Sprintf("%s %s on %s:\n%s", ns, sel, node, podsSummary(pods.Items)))
			}
		}
		return len(why) == 0, strings.Join(why, "\n")
	})
}

// containerState is one container of a pod on a node.
type containerState struct {
	name, id string
	restarts int32
}

// nodeContainers are the containers of every pod on the node, by
// namespace/pod/container.
func nodeContainers(t testing.TB, admin *kubernetes.Clientset, node string) map[string]containerState {
	t.Helper()
	pods, err := admin.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]containerState{}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			key := p.Namespace + "/" + p.Name + "/" + cs.Name
			out[key] = containerState{name: key, id: cs.ContainerID, restarts: cs.RestartCount}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no container on %s", node)
	}
	return out
}

// containerChanges says, sorted, which containers of before are gone
// from after, or there with another ID or restart count.
func containerChanges(before, after map[string]containerState) []string {
	var out []string
	for key, b := range before {
		a, ok := after[key]
		switch {
		case !ok:
			out = append(out, key+" is gone")
		case a.id != b.id || a.restarts != b.restarts:
			out = append(out, fmt.Sprintf("%s is container %s (%d restarts), was %s (%d)", key, a.id, a.restarts, b.id, b.restarts))
		}
	}
	slices.Sort(out)
	return out
}

// importImage puts an image archive into the node's containerd, as the
// worker's kubelet unit imports the installed ones.
func importImage(m nodes.Member, archive string) (string, error) {
	return importImages(m, []string{archive})
}

var clusterWebLabels = map[string]string{"app": "cluster-web"}

// clusterWeb runs a testserver pod on the node, and a Service for it.
func clusterWeb(t testing.TB, admin *kubernetes.Clientset, node string) *v1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-web", Labels: clusterWebLabels},
		Spec: v1.PodSpec{
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
			// The node may be a master, tainted while the cluster has a
			// worker: this pod is placed there on purpose.
			Tolerations: controlPlaneToleration,
			Containers: []v1.Container{{
				Name: "web", Image: "bootlet.dev/testserver:1", ImagePullPolicy: v1.PullNever,
				Ports: []v1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{
					HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)},
				}},
			}},
		},
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the web pod: %v", err)
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-web"},
		Spec:       v1.ServiceSpec{Selector: clusterWebLabels, Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the web Service: %v", err)
	}
	var p *v1.Pod
	Eventually(t, 3*time.Minute, func() (bool, string) {
		var err error
		p, err = admin.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return Running(p) && Ready(p) && p.Spec.NodeName == node, "the web pod: " + statusSummary(p)
	})
	return p
}

// clusterClientScript: each check retried for up to a minute (kube-proxy's
// and CoreDNS's first sync), each answer's body (the last line of
// testserver get's "200 OK" and body) checked to be the web pod's host
// name; it exits non-zero at the first check that never passes.
const clusterClientScript = `
try() { n=0; until out=$("$@") && echo "$out" && [ "$(echo "$out" | tail -n 1)" = "$WEB_NAME" ]; do n=$((n+1)); [ $n -ge 30 ] && echo "FAILED: $*" && return 1; sleep 2; done; }
set -e
echo "== pod IP $WEB_POD_IP:8080 (on the master)"; try /testserver get -timeout 3s http://$WEB_POD_IP:8080/hostname
echo "== Service cluster IP $WEB_IP"; try /testserver get -timeout 3s http://$WEB_IP/hostname
echo "== Service by name"; try /testserver get -timeout 3s http://cluster-web.default.svc.cluster.local/hostname
echo "== all checks passed"
`

// clusterClient runs the client pod on the node to completion (it must
// succeed) and returns its logs.
func clusterClient(t testing.TB, admin *kubernetes.Clientset, node string, web *v1.Pod) string {
	t.Helper()
	ctx := context.Background()
	svc, err := admin.CoreV1().Services("default").Get(ctx, "cluster-web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-client"},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever,
			NodeSelector:  map[string]string{"kubernetes.io/hostname": node},
			Containers: []v1.Container{{
				Name: "client", Image: "bootlet.dev/testserver:1", ImagePullPolicy: v1.PullNever,
				Command: []string{"sh", "-c", clusterClientScript},
				Env: []v1.EnvVar{{Name: "WEB_IP", Value: svc.Spec.ClusterIP}, {Name: "WEB_POD_IP", Value: web.Status.PodIP},
					{Name: "WEB_NAME", Value: web.Name}},
			}},
		},
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the client pod: %v", err)
	}
	var done *v1.Pod
	Eventually(t, 5*time.Minute, func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		done = p
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed, "the client pod: " + statusSummary(p)
	})
	// The logs come from the worker's kubelet through the apiserver: its
	// API trusts the apiserver's kubelet client.
	logs, err := admin.CoreV1().Pods("default").GetLogs(pod.Name, &v1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Errorf("the client pod's logs, from the worker's kubelet: %v", err)
	}
	if done.Spec.NodeName != node {
		t.Errorf("the client pod ran on %q, want %s", done.Spec.NodeName, node)
	}
	if done.Status.Phase != v1.PodSucceeded {
		t.Fatalf("the client pod on %s %s:\n%s", node, done.Status.Phase, logs)
	}
	if ip := net.ParseIP(done.Status.PodIP); ip == nil || ip.Equal(net.ParseIP(web.Status.PodIP)) {
		t.Errorf("the client's pod IP %q", done.Status.PodIP)
	}
	return string(logs)
}

// checkNodeCgroups checks that every running pod's cgroup is below its own
// node's cgroup, in the memory, cpu and pids hierarchies, and in no other
// node's and not in the host's /kubepods.
func checkNodeCgroups(t testing.TB, admin *kubernetes.Clientset, ms []nodes.Member) {
	t.Helper()
	pods, err := admin.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, p := range pods.Items {
		if p.Status.Phase != v1.PodRunning || p.Spec.NodeName == "" {
			continue
		}
		// A static pod's cgroup has the kubelet's UID, which its mirror pod
		// carries in an annotation (bootlet's etcd: the UID bootlet gave it).
		uid := string(p.UID)
		if m := p.Annotations[v1.MirrorPodAnnotationKey]; m != "" {
			uid = m
		}
		pod := "pod" + uid
		for _, ctl := range []string{"memory", "cpu", "pids"} {
			var where []string
			for _, m := range ms {
				in, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", ctl, m.Node().Cgroup, "kubepods", "*", pod))
				direct, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", ctl, m.Node().Cgroup, "kubepods", pod))
				if len(in)+len(direct) > 0 {
					where = append(where, m.Name)
				}
			}
			host, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", ctl, "kubepods", "*", pod))
			hostDirect, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", ctl, "kubepods", pod))
			if len(host)+len(hostDirect) > 0 {
				where = append(where, "the host's /kubepods")
			}
			if len(where) != 1 || where[0] != p.Spec.NodeName {
				t.Errorf("pod %s/%s on %s: its %s cgroup is under %v", p.Namespace, p.Name, p.Spec.NodeName, ctl, where)
			}
		}
		count[p.Spec.NodeName]++
	}
	var s []string
	for n, c := range count {
		s = append(s, fmt.Sprintf("%s %d", n, c))
	}
	sort.Strings(s)
	t.Logf("pod cgroups below their own node's cgroup only (memory, cpu, pids): %s", strings.Join(s, ", "))
	for _, m := range ms {
		if count[m.Name] == 0 {
			t.Errorf("no running pod on %s to check", m.Name)
		}
	}
}

// clusterDump logs each node's console tail and its units' journal.
func clusterDump(t testing.TB, c *nodes.Cluster) {
	for _, m := range c.Members {
		n := m.Node()
		t.Logf("console of %s:\n%s", m.Name, n.ConsoleTail(3000))
		pid := n.PID1()
		if pid == 0 {
			continue
		}
		units := nodes.MasterUnits
		if m.Role == nodes.Worker {
			units = nodes.WorkerUnits
		}
		args := "journalctl -b --no-pager -o short-precise"
		for _, u := range units {
			args += " -u " + u
		}
		out, _ := nodes.Inside(pid, "sh", "-c", args+" | grep -v 'v1 Endpoints is deprecated' | tail -n 150")
		t.Logf("journal of %s's units:\n%s", m.Name, out)
		// The whole boot's journal outlives the teardown in a file: the
		// tail above rarely reaches back to where a failure started.
		dir := filepath.Join(os.TempDir(), "bootlet-cluster-dump")
		if all, err := nodes.Inside(pid, "journalctl", "-b", "--no-pager", "-o", "short-precise"); err == nil && os.MkdirAll(dir, 0o700) == nil {
			f := filepath.Join(dir, m.Name+".journal")
			if err := os.WriteFile(f, []byte(all), 0o600); err == nil {
				t.Logf("%s's whole journal of this boot: %s", m.Name, f)
			}
		}
		out, _ = nodes.Inside(pid, "systemctl", "list-units", "--failed", "--no-pager")
		t.Logf("failed units on %s:\n%s", m.Name, out)
	}
}

// checkMastersTainted: with a worker in the cluster, every master carries
// the control-plane NoSchedule taint, set by bootlet (package
// controlplanetaint), and the worker does not.
func checkMastersTainted(t testing.TB, admin *kubernetes.Clientset) {
	t.Helper()
	Eventually(t, time.Minute, func() (bool, string) {
		list, err := admin.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var why []string
		for i := range list.Items {
			n := controlplanetaint.FromNode(&list.Items[i])
			switch {
			case n.ControlPlane && !(n.Tainted && n.Managed):
				why = append(why, fmt.Sprintf("master %s: tainted %v, by bootlet %v", n.Name, n.Tainted, n.Managed))
			case !n.ControlPlane && n.Tainted:
				why = append(why, fmt.Sprintf("worker %s carries the control-plane taint", n.Name))
			}
		}
		return len(why) == 0, strings.Join(why, "; ")
	})
}

// controlPlaneToleration lets a test's pod run on a master that is
// tainted because the cluster has a worker (package controlplanetaint):
// the cluster tests place some pods on masters on purpose.
var controlPlaneToleration = []v1.Toleration{{Key: btypes.LabelControlPlane, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
