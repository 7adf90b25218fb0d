//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bootlet/bootlet/upgrade"
	"github.com/bootlet/bootlet/upgrade/cvclient"
)

// sandboxImage is the pause image every node has (hack/containerd.sh).
const sandboxImage = "registry.k8s.io/pause:3.10.1"

// TestUpgradeRollback is the upgrade controller end to end on the single
// master of the pivot tests, with images re-tagged (make test builds one
// Kubernetes version): every image of v1.37.2 is present, v1.36.3's under
// the target's tags, except the apiserver's, which is the pause image and
// has no kube-apiserver to run. `bootlet upgrade apply --to v1.37.2` sets
// the desired version; the leader-elected controller in bootlet begins the
// apiserver's step (the DaemonSet's image), the new pod never serves, its
// gate fails for the daemon's --upgrade-gate-timeout, and the controller
// puts the DaemonSet back by itself and stops with Failing=True naming the
// cause, under the strict 50 ms clients: 0 failed requests. bootlet, the
// controller's leader, is SIGKILLed in the middle of the step and started
// again: the step's gate still counts from its beginning. The
// checkpoint still holds the v1.36.3 apiserver (the checkpointer keeps only
// a pod that was Ready), nothing moves until a person asks again, and a
// reboot then comes back on that checkpoint, healthy at v1.36.3.
func TestUpgradeRollback(t *testing.T) {
	step := "0 setup"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("TestUpgradeRollback FAILED in step %s", step)
		}
	})
	lc := RunPivot(t, &step)
	ctx := context.Background()
	cs, admin, node := lc.AdminClient, lc.Admin, lc.K.NodeName
	cfg, err := clientcmd.BuildConfigFromFlags("", admin)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := cvclient.ForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	step = "1 images"
	from, to := upgrade.Releases["v1.36.3"], upgrade.Releases["v1.37.2"]
	for comp, ref := range upgrade.Images(to) {
		src := upgrade.Images(from)[comp]
		switch comp {
		case upgrade.Etcd:
			continue // etcd stays: --etcd-upgrade=false
		case upgrade.APIServer, upgrade.Kubelet, upgrade.KubeProxy, upgrade.CoreDNS:
			// The apiserver's must fail. The others only have to be
			// present: no kubelet image is built for the running version,
			// this master runs no add-ons, and the upgrade stops before
			// any of them.
			src = sandboxImage
		}
		TagImage(t, lc.C, src, ref)
	}
	Eventually(t, 3*time.Minute, func() (bool, string) {
		out, err := exec.Command(Bin(t, "bootlet"), "upgrade", "plan", "--to", "v1.37.2", "--etcd-upgrade=false", "--kubeconfig", admin).CombinedOutput()
		return err == nil, "bootlet upgrade plan --etcd-upgrade=false (the kubelet reports the images it has):\n" + string(out)
	})

	step = "2 apply"
	probe := StartProber(t, "keep-alive during the upgrade and its rollback", admin, true)
	fresh := StartProber(t, "new connection during the upgrade and its rollback", admin, false)
	start := time.Now()
	out, err := exec.Command(Bin(t, "bootlet"), "upgrade", "apply", "--to", "v1.37.2", "--etcd-upgrade=false", "--kubeconfig", admin).CombinedOutput()
	t.Logf("bootlet upgrade apply --to v1.37.2 --etcd-upgrade=false:\n%s", out)
	if err != nil {
		t.Fatalf("upgrade apply: %v", err)
	}
	began := time.Time{}
	Eventually(t, time.Minute, func() (bool, string) {
		img := daemonSetImage(t, lc, "kube-apiserver")
		if img == upgrade.ImageOf(upgrade.APIServer, "v1.37.2") && began.IsZero() {
			began = time.Now()
		}
		return !began.IsZero(), "the apiserver DaemonSet's image: " + img
	})
	t.Logf("the controller began the apiserver's step %s after apply", began.Sub(start).Round(time.Millisecond))

	// The leader dies in the middle of the step: its successor (the same
	// node's daemon, started again) reads the step in flight from the
	// status and gates it from the time it began, not from its own start.
	step = "2b leader killed"
	time.Sleep(5 * time.Second)
	lc.B.Kill9()
	lc.B.Start(t)
	t.Logf("bootlet (the controller's leader) SIGKILLed %s after the step began, and started again", time.Since(began).Round(time.Millisecond))

	step = "3 rollback"
	var failing metav1.Condition
	Eventually(t, lifecycleUpgradeGateTimeout+3*time.Minute, func() (bool, string) {
		cv, err := cvclient.Get(ctx, dyn)
		if err != nil {
			return false, err.Error()
		}
		if c := meta.FindStatusCondition(cv.Status.Conditions, upgrade.Failing); c != nil {
			failing = *c
		}
		return failing.Reason == "RolledBack" && cv.Status.RollingBack == nil, fmt.Sprintf("step %q, rolling back %+v, conditions %+v", cv.Status.Step, cv.Status.RollingBack, cv.Status.Conditions)
	})
	rolledBack := time.Now()
	if late := rolledBack.Sub(began) - lifecycleUpgradeGateTimeout; late > time.Minute {
		t.Errorf("the step was put back %s after its gate's timeout: the restarted controller did not gate it from its beginning", late.Round(time.Millisecond))
	}
	t.Logf("Failing=%s %s: %s (%s after the step began)", failing.Status, failing.Reason, failing.Message, rolledBack.Sub(began).Round(time.Millisecond))
	if failing.Status != metav1.ConditionTrue || !strings.Contains(failing.Message, "kube-apiserver on "+node) || !strings.Contains(failing.Message, "not Ready") {
		t.Errorf("Failing does not name the component, the node and the cause: %+v", failing)
	}
	if img := daemonSetImage(t, lc, "kube-apiserver"); img != upgrade.ImageOf(upgrade.APIServer, "v1.36.3") {
		t.Errorf("after the rollback the apiserver DaemonSet's image is %s", img)
	}
	Eventually(t, 2*time.Minute, func() (bool, string) {
		pods, err := selfHostedPods(ctx, cs, node, "kube-apiserver")
		if err != nil {
			return false, err.Error()
		}
		ok := len(pods) == 1 && containerImage(&pods[0].Spec, "kube-apiserver") == upgrade.ImageOf(upgrade.APIServer, "v1.36.3") && Ready(&pods[0]) && pods[0].DeletionTimestamp == nil
		return ok, "self-hosted apiserver pods after the rollback:\n" + podsSummary(pods)
	})
	back := time.Since(rolledBack)
	time.Sleep(time.Second)
	res, freshRes := probe.Stop(), fresh.Stop()
	t.Logf("UPGRADE-ROLLBACK began=%s rolled_back_after=%s pod_alone_after=%s keepalive=%d/%d newconn=%d/%d",
		began.Sub(start).Round(time.Millisecond), rolledBack.Sub(began).Round(time.Millisecond), back.Round(time.Millisecond),
		res.Failed, res.Requests, freshRes.NotAnswered(), freshRes.Requests)
	if res.Requests < 100 || res.Failed != 0 {
		t.Errorf("the keep-alive probe client saw %d failed requests of %d during the upgrade and its rollback:\n%s", res.Failed, res.Requests, strings.Join(res.Failures, "\n"))
	}
	if freshRes.Requests < 100 || freshRes.NotAnswered() != 0 {
		t.Errorf("the new-connection probe client saw %d requests no apiserver answered, of %d:\n%s", freshRes.NotAnswered(), freshRes.Requests, strings.Join(freshRes.Failures, "\n"))
	}
	if ck := StoredCheckpoint(t, lc.B, "kube-system", "kube-apiserver"); ck != nil {
		if img := containerImage(&ck.Pod.Spec, "kube-apiserver"); img != upgrade.ImageOf(upgrade.APIServer, "v1.36.3") {
			t.Errorf("the checkpoint holds the apiserver at %s, want the working v1.36.3", img)
		}
	} else {
		t.Errorf("no checkpoint of the apiserver")
	}

	step = "4 stays stopped"
	out, err = exec.Command(Bin(t, "bootlet"), "upgrade", "status", "--kubeconfig", admin).CombinedOutput()
	t.Logf("bootlet upgrade status:\n%s", out)
	if err != nil || !strings.Contains(string(out), "RolledBack") {
		t.Errorf("upgrade status: %v; want the history's RolledBack", err)
	}
	time.Sleep(10 * time.Second)
	if img := daemonSetImage(t, lc, "kube-apiserver"); img != upgrade.ImageOf(upgrade.APIServer, "v1.36.3") {
		t.Errorf("a stopped upgrade moved the apiserver again: %s", img)
	}

	// What the checkpoint holds is what a reboot brings back: the node
	// comes back on its v1.36.3 apiserver, then self-hosted at v1.36.3.
	step = "5 reboot"
	rb := rebootAndComeBack(t, lc.C, lc.B, lc.K, cs, upgrade.ImageOf(upgrade.APIServer, "v1.36.3"))
	if v, err := cs.Discovery().ServerVersion(); err != nil || v.GitVersion != "v1.36.3" {
		t.Errorf("/version after the reboot: %v, %v; want v1.36.3", v, err)
	}
	t.Logf("rebooted after the rollback: /readyz through the checkpoint's v1.36.3 apiserver %s after the power-on, self-hosted again %s",
		rb.ToReadyz.Round(time.Millisecond), rb.ToSelfHosted.Round(time.Millisecond))
}

func daemonSetImage(t testing.TB, lc *LifecycleRun, name string) string {
	t.Helper()
	ds, err := lc.AdminClient.AppsV1().DaemonSets("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	return containerImage(&ds.Spec.Template.Spec, name)
}
