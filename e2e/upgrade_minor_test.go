//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"

	"github.com/bootlet/bootlet/manifests"
	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
	"github.com/bootlet/bootlet/upgrade/nodeagent"
)

// upgradeTarget is the release make test-upgrade moves to.
const upgradeTarget = "v1.37.2"

// requireTarget fails loudly (never skips) when `make upgrade-images
// TO=v1.37.2` has not built the target's images.
func requireTarget(t testing.TB) {
	t.Helper()
	dir := filepath.Join(Repo, "_output", "images", upgradeTarget)
	if files, _ := filepath.Glob(filepath.Join(dir, "*.tar")); len(files) < 8 {
		t.Fatalf("%s holds %d archives, want 8: run `make upgrade-images TO=%s` (make test-upgrade does)", dir, len(files), upgradeTarget)
	}
}

// TestUpgradeMinor is a real minor upgrade of the single master of the
// pivot tests, self-hosted at v1.36.3, to v1.37.2, taken by bootlet's
// upgrade controller, under the strict 50 ms clients (keep-alive and a new
// connection per request) from `bootlet upgrade apply` to its end:
//  1. the target's images are imported; `bootlet upgrade plan` says the
//     upgrade may start, once the kubelet reports them;
//  2. `bootlet upgrade apply --to v1.37.2 --wait`: etcd's step first, on
//     its one member: the node's agent adds two helper members (learners,
//     then voters), starts the first again on the member's client address
//     too, moves the member's pod to etcd 3.7.0 while the helpers keep the
//     quorum and the first serves the apiserver, and the helpers go (no
//     apiserver is rolled in etcd's step); then the
//     controller (leader by its Lease) rolls the apiserver DaemonSet
//     through the port hand-over, then the controller-manager and the
//     scheduler, then records the kubelet's step, which the node's agent
//     takes: the v1.37.2 kubelet out of bootlet.dev/kubelet:v1.37.2 into
//     the unit's file, the unit restarted (KubeletUnit plays systemd);
//     apply exits 0 once the ClusterVersion says Done;
//  3. /version, the node's kubelet, etcd's own version, every
//     control-plane image and the history report v1.37.2; etcd has one
//     member again, no helper pod or data is left, and the apiservers name
//     their member alone; no container restarted (etcd's was replaced), none
//     started by the new kubelet; 0 failed requests of both clients;
//  4. a reboot: the node comes back through its checkpoint, now the
//     v1.37.2 apiserver's, self-hosted at v1.37.2, its kubelet v1.37.2.
func TestUpgradeMinor(t *testing.T) {
	requireTarget(t)
	target := upgrade.Releases[upgradeTarget]
	images := upgrade.Images(target)
	step := "0 setup"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("TestUpgradeMinor FAILED in step %s", step)
		}
	})
	lc := RunPivot(t, &step, WithKubeletUnit())
	ctx := context.Background()
	admin, cs, node := lc.Admin, lc.AdminClient, lc.K.NodeName

	step = "1 images and plan"
	took := importImageDir(t, lc.C, upgradeTarget, 8)
	t.Logf("imported %s's images in %s", upgradeTarget, took.Round(time.Millisecond))
	var planOut string
	Eventually(t, 3*time.Minute, func() (bool, string) {
		out, err := exec.Command(Bin(t, "bootlet"), "upgrade", "plan", "--to", upgradeTarget, "--kubeconfig", admin).CombinedOutput()
		planOut = string(out)
		return err == nil, "bootlet upgrade plan:\n" + planOut
	})
	t.Logf("bootlet upgrade plan --to %s:\n%s", upgradeTarget, planOut)
	if !strings.Contains(planOut, ": may start") {
		t.Errorf("the plan does not say the upgrade may start")
	}
	restartsBefore := podRestarts(t, cs, node)

	step = "2 apply"
	dsBefore, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, string(upgrade.APIServer), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	probe := StartProber(t, "keep-alive, the whole upgrade", admin, true)
	fresh := StartProber(t, "new connection, the whole upgrade", admin, false)
	tl := startSkewTimeline(t, cs, target)
	start := time.Now()
	out, err := exec.Command(Bin(t, "bootlet"), "upgrade", "apply", "--to", upgradeTarget, "--wait", "--timeout", "30m", "--kubeconfig", admin).CombinedOutput()
	total := time.Since(start)
	t.Logf("bootlet upgrade apply --to %s --wait (%s):\n%s", upgradeTarget, total.Round(time.Millisecond), out)
	timeline := tl.stop()
	t.Logf("the upgrade's timeline (each component's version, as a sample a second first saw it):\n%s", timeline)
	if err != nil {
		t.Fatalf("upgrade apply --wait: %v", err)
	}
	time.Sleep(time.Second)
	res, freshRes := probe.Stop(), fresh.Stop()
	for _, v := range tl.violations() {
		t.Errorf("skew order broken: %s", v)
	}

	// etcd's step took the shared address (render's members have
	// --socket-reuse-port): the first helper started again on the
	// member's client address, and stopped before it was removed; the
	// apiserver DaemonSet changed once, in its own step.
	daemonLog, err := os.ReadFile(lc.B.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	var agentLines []string
	for _, l := range strings.Split(string(daemonLog), "\n") {
		if strings.Contains(l, "Upgrade node agent: etcd helper") {
			agentLines = append(agentLines, l)
		}
	}
	t.Logf("the node agent's acts on etcd's helpers:\n%s", strings.Join(agentLines, "\n"))
	for _, act := range []string{`act="ShareHelper"`, `act="StopHelper"`} {
		if !strings.Contains(strings.Join(agentLines, "\n"), act) {
			t.Errorf("the node agent never took %s: etcd's step did not serve the member's address from its helper", act)
		}
	}
	if ds, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, string(upgrade.APIServer), metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if ds.Generation != dsBefore.Generation+1 {
		t.Errorf("the apiserver DaemonSet went from generation %d to %d, want one change: its own step's", dsBefore.Generation, ds.Generation)
	}

	step = "3 what runs"
	if v, err := cs.Discovery().ServerVersion(); err != nil || v.GitVersion != upgradeTarget {
		t.Errorf("/version after the upgrade: %v, %v; want %s", v, err, upgradeTarget)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil || n.Status.NodeInfo.KubeletVersion != upgradeTarget || n.Spec.Unschedulable {
		t.Errorf("node %s after the upgrade: %v; kubelet %s, unschedulable %v", node, err, n.Status.NodeInfo.KubeletVersion, n.Spec.Unschedulable)
	}
	for _, comp := range []upgrade.Component{upgrade.APIServer, upgrade.ControllerManager, upgrade.Scheduler} {
		pods, err := selfHostedPods(ctx, cs, node, string(comp))
		if err != nil || len(pods) == 0 {
			t.Errorf("%s after the upgrade: %v %v", comp, err, podsSummary(pods))
		}
		for _, p := range pods {
			if img := containerImage(&p.Spec, string(comp)); img != images[comp] {
				t.Errorf("%s runs %s, want %s", p.Name, img, images[comp])
			}
		}
	}
	checkSoloEtcd(t, cs, lc.Assets, target.Etcd)
	restarts := lc.Unit.Restarts()
	if len(restarts) != 1 {
		t.Errorf("the kubelet unit was restarted %d times, want once", len(restarts))
	}
	if len(restarts) > 0 {
		// Nothing started after the new kubelet: it adopted every
		// container the old one ran (the kubelet's step is the last).
		for _, ct := range runningContainers(t, lc.C) {
			if created := time.Unix(0, ct.CreatedAt); created.After(restarts[0]) {
				t.Errorf("container %s/%s was created %s after the kubelet's restart", ct.Labels["io.kubernetes.pod.name"], ct.Metadata.Name, created.Sub(restarts[0]).Round(time.Millisecond))
			}
		}
	}
	for _, r := range podRestarts(t, cs, node) {
		if strings.HasPrefix(r, "kube-system/etcd-"+node+"/etcd=") {
			continue // etcd's step replaces its container
		}
		if !strings.HasSuffix(r, "=0") && !slices.Contains(restartsBefore, r) {
			t.Errorf("a container restarted during the upgrade: %s", r)
		}
	}
	status, _ := exec.Command(Bin(t, "bootlet"), "upgrade", "status", "--kubeconfig", admin).CombinedOutput()
	t.Logf("bootlet upgrade status:\n%s", status)
	if !strings.Contains(string(status), "Completed") {
		t.Errorf("the history does not say the upgrade Completed")
	}
	t.Logf("UPGRADE single-master %s -> %s: total %s; keep-alive %d requests, %d failed; new connection %d requests, %d not answered; kubelet restarted %d times",
		"v1.36.3", upgradeTarget, total.Round(time.Millisecond), res.Requests, res.Failed, freshRes.Requests, freshRes.NotAnswered(), len(restarts))
	if res.Requests < 100 || res.Failed != 0 {
		t.Errorf("the keep-alive probe client saw %d failed requests of %d during the upgrade:\n%s", res.Failed, res.Requests, strings.Join(res.Failures, "\n"))
	}
	if freshRes.Requests < 100 || freshRes.NotAnswered() != 0 {
		t.Errorf("the new-connection probe client saw %d requests no apiserver answered, of %d, during the upgrade:\n%s", freshRes.NotAnswered(), freshRes.Requests, strings.Join(freshRes.Failures, "\n"))
	}
	if t.Failed() {
		t.FailNow()
	}

	step = "4 reboot"
	rb := rebootAndComeBack(t, lc.C, lc.B, lc.K, cs, images[upgrade.APIServer])
	t.Logf("REBOOT at %s: reboot_to_readyz_seconds=%.1f reboot_to_selfhosted_seconds=%.1f", upgradeTarget, rb.ToReadyz.Seconds(), rb.ToSelfHosted.Seconds())
	Eventually(t, 2*time.Minute, func() (bool, string) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return n.Status.NodeInfo.KubeletVersion == upgradeTarget && nodeReady(n), fmt.Sprintf("node %s after the reboot: kubelet %s, ready %v", node, n.Status.NodeInfo.KubeletVersion, nodeReady(n))
	})
	if v, err := cs.Discovery().ServerVersion(); err != nil || v.GitVersion != upgradeTarget {
		t.Errorf("/version after the reboot: %v, %v; want %s", v, err, upgradeTarget)
	}
	checkSoloEtcd(t, cs, lc.Assets, target.Etcd)
}

// checkSoloEtcd: the node's etcd, asked itself, runs version, is its
// cluster's one member, and no helper of its step is left (pod, data
// directory), nor named by the apiservers.
func checkSoloEtcd(t testing.TB, cs kubernetes.Interface, assets, version string) {
	t.Helper()
	em, err := manifests.LoadEtcdMember(assets)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(em.CertFile, em.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := certutil.NewPool(em.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{em.ClientURL}, DialTimeout: 5 * time.Second,
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, em.ClientURL)
	if err != nil {
		t.Fatalf("etcd's status: %v", err)
	}
	if "v"+st.Version != version && st.Version != strings.TrimPrefix(version, "v") {
		t.Errorf("etcd reports %s, want %s", st.Version, version)
	}
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatalf("etcd's member list: %v", err)
	}
	var names []string
	for _, m := range list.Members {
		names = append(names, fmt.Sprintf("%s(learner %v)", m.Name, m.IsLearner))
	}
	if len(list.Members) != 1 || list.Members[0].Name != em.Name {
		t.Errorf("etcd's members %v, want %s alone", names, em.Name)
	}
	for i := 1; i <= nodeagent.Helpers; i++ {
		dir := fmt.Sprintf("%s-upgrade-helper-%d", filepath.Clean(em.DataDir), i)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("helper data %s is left (%v)", dir, err)
		}
	}
	pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: btypes.LabelEtcdUpgradeHelper})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("helper pods left: %v %v", err, podsSummary(pods.Items))
	}
	ds, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, string(upgrade.APIServer), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := upgrade.EtcdServersOf(ds.Spec.Template.Spec.Containers[0].Command); got != "https://127.0.0.1:2379" {
		t.Errorf("the apiservers' --etcd-servers is %q, want their own member's only", got)
	}
	t.Logf("etcd: version %s, members %v, db %d bytes", st.Version, names, st.DbSize)
}

// podRestarts are the restart counts of every container of the node's
// pods, as the API shows them.
func podRestarts(t testing.TB, cs *kubernetes.Clientset, node string) []string {
	t.Helper()
	pods, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			out = append(out, fmt.Sprintf("%s/%s/%s=%d", p.Namespace, p.Name, s.Name, s.RestartCount))
		}
	}
	sort.Strings(out)
	return out
}
