//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/upgrade"
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
// pivot tests, self-hosted at v1.36.3, to v1.37.2, step by step in the
// version skew policy's order, under the strict 50 ms clients (keep-alive
// and a new connection per request) from the first step to the last:
//  1. the target's images are imported; `bootlet upgrade plan` says the
//     upgrade may start, once the kubelet reports them;
//  2. the apiserver DaemonSet rolls to v1.37.2 through the port hand-over
//     (UpgradeAPIServer asserts 0 failed requests and the serving gate);
//     /version says v1.37.2;
//  3. the controller-manager and the scheduler Deployments roll, only now
//     that every apiserver runs the target;
//  4. the v1.37.2 kubelet is taken out of its image
//     (bootlet.dev/kubelet:v1.37.2, imported like the rest) with `bootlet
//     images extract`, the kubelet stopped and the new one started in its
//     place, with its configuration and state: the node reports v1.37.2
//     and every container runs on, none restarted or replaced;
//  5. the plan has one step left: etcd 3.6.8 to 3.7.0.
//
// The steps are taken by the test, as the upgrade controller will take
// them: this proves the mechanics at a real version change, not the
// controller.
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
	lc := RunPivot(t, &step)
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

	start := time.Now()
	step = "2 kube-apiserver"
	up := UpgradeAPIServer(t, lc, images[upgrade.APIServer])
	t.Logf("STEP kube-apiserver %s -> %s: %s; keep-alive %d requests, %d failed; new connection %d requests, %d not answered",
		up.From, up.To, up.Took.Round(time.Millisecond), up.KeepAlive.Requests, up.KeepAlive.Failed, up.NewConn.Requests, up.NewConn.NotAnswered())
	if v, err := cs.Discovery().ServerVersion(); err != nil || v.GitVersion != upgradeTarget {
		t.Errorf("/version after the apiserver's step: %v, %v; want %s", v, err, upgradeTarget)
	}

	probe := StartProber(t, "keep-alive, controllers and kubelet", admin, true)
	fresh := StartProber(t, "new connection, controllers and kubelet", admin, false)
	for _, comp := range []upgrade.Component{upgrade.ControllerManager, upgrade.Scheduler} {
		step = "3 " + string(comp)
		took := rollDeployment(t, cs, string(comp), images[comp])
		t.Logf("STEP %s -> %s: %s", comp, images[comp], took.Round(time.Millisecond))
	}

	step = "4 kubelet"
	kubeletBin := filepath.Join(lc.C.Dir, "kubelet-"+upgradeTarget)
	run(t, Bin(t, "bootlet"), "images", "extract", "--address", lc.C.Socket, images[upgrade.Kubelet], "/usr/local/bin/kubelet", kubeletBin)
	if out, err := exec.Command(kubeletBin, "--version").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "Kubernetes "+upgradeTarget {
		t.Fatalf("the kubelet taken out of %s says %q (%v)", images[upgrade.Kubelet], out, err)
	}
	before := runningContainerIDs(t, lc.C)
	restartsBefore := podRestarts(t, cs, node)
	t0 := time.Now()
	lc.K.Stop()
	lc.K.Binary = kubeletBin
	lc.K.Start(t)
	Eventually(t, 3*time.Minute, func() (bool, string) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return n.Status.NodeInfo.KubeletVersion == upgradeTarget && nodeReady(n), fmt.Sprintf("node %s: kubelet %s, ready %v", node, n.Status.NodeInfo.KubeletVersion, nodeReady(n))
	})
	kubeletTook := time.Since(t0)
	// Several of the new kubelet's sync rounds, for any restart to show.
	time.Sleep(20 * time.Second)
	after := runningContainerIDs(t, lc.C)
	if gone := missingFrom(before, after); len(gone) > 0 {
		t.Errorf("containers that no longer run after the kubelet's upgrade: %v", gone)
	}
	if added := missingFrom(after, before); len(added) > 0 {
		t.Errorf("containers started by the new kubelet: %v", added)
	}
	if restarts := podRestarts(t, cs, node); fmt.Sprint(restarts) != fmt.Sprint(restartsBefore) {
		t.Errorf("restart counts changed across the kubelet's upgrade:\nbefore %v\nafter  %v", restartsBefore, restarts)
	}
	t.Logf("STEP kubelet v1.36.3 -> %s: Ready at the target %s after its stop; %d containers ran on, none restarted", upgradeTarget, kubeletTook.Round(time.Millisecond), len(after))
	res, freshRes := probe.Stop(), fresh.Stop()
	if res.Requests < 100 || res.Failed != 0 {
		t.Errorf("the keep-alive probe client saw %d failed requests of %d during the controllers' and the kubelet's steps:\n%s", res.Failed, res.Requests, strings.Join(res.Failures, "\n"))
	}
	if freshRes.Requests < 100 || freshRes.NotAnswered() != 0 {
		t.Errorf("the new-connection probe client saw %d requests no apiserver answered, of %d, during the controllers' and the kubelet's steps:\n%s", freshRes.NotAnswered(), freshRes.Requests, strings.Join(freshRes.Failures, "\n"))
	}
	t.Logf("the controllers' and the kubelet's steps: keep-alive %d requests, %d failed; new connection %d requests, %d not answered",
		res.Requests, res.Failed, freshRes.Requests, freshRes.NotAnswered())

	step = "5 what is left"
	out, err := exec.Command(Bin(t, "bootlet"), "upgrade", "plan", "--to", upgradeTarget, "--kubeconfig", admin).CombinedOutput()
	t.Logf("bootlet upgrade plan --to %s after the steps (%s in all):\n%s", upgradeTarget, time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Errorf("upgrade plan after the steps: %v", err)
	}
	if got := planSteps(string(out), node); strings.Join(got, "; ") != "etcd 3.6.8->3.7.0" {
		t.Errorf("the plan after the steps is %q, want etcd's step alone", got)
	}
	if !strings.Contains(string(out), "Upgrade from v1.37.2 (etcd 3.6.8, ") {
		t.Errorf("the plan after the steps does not say the cluster runs v1.37.2 with etcd 3.6.8")
	}
}

// rollDeployment sets kube-system's Deployment name to image and waits
// until every replica runs it, Ready, and no old one is left.
func rollDeployment(t testing.TB, cs *kubernetes.Clientset, name, image string) time.Duration {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == name {
			d.Spec.Template.Spec.Containers[i].Image = image
		}
	}
	if _, err := cs.AppsV1().Deployments("kube-system").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 5*time.Minute, func() (bool, string) {
		d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pods, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=" + name})
		if err != nil {
			return false, err.Error()
		}
		ok := deploymentDone(d)
		for i := range pods.Items {
			p := &pods.Items[i]
			if containerImage(&p.Spec, name) != image || !Ready(p) || p.DeletionTimestamp != nil {
				ok = false
			}
		}
		return ok, fmt.Sprintf("Deployment %s: %+v\n%s", name, d.Status, podsSummary(pods.Items))
	})
	return time.Since(start)
}

func deploymentDone(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.Replicas == want && s.ReadyReplicas == want
}

// runningContainerIDs are the IDs of the runtime's running containers,
// each with its pod's and its own name.
func runningContainerIDs(t testing.TB, c *Containerd) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ct := range runningContainers(t, c) {
		out[ct.Id] = ct.Labels["io.kubernetes.pod.name"] + "/" + ct.Metadata.Name
	}
	return out
}

func missingFrom(a, b map[string]string) []string {
	var out []string
	for id, name := range a {
		if _, ok := b[id]; !ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
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
