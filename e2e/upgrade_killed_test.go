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
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
	"github.com/bootlet/bootlet/upgrade/cvclient"
)

// TestUpgradeKilled is the single master's minor upgrade, v1.36.3 to
// v1.37.2 (etcd aside, as in TestUpgradeMinor), killed in the middle:
//  1. in the apiserver's step, bootlet (the controller's leader and the
//     node's agent) is SIGKILLed and started again, and then the whole node
//     loses its power (every process and container killed, containerd's
//     state wiped) and boots;
//  2. in the kubelet's step, as soon as the controller records it, the
//     whole node loses its power again;
//  3. the upgrade resumes by itself and completes: /version, the kubelet,
//     every control-plane image at v1.37.2, the history Completed;
//  4. a writer created a ConfigMap every 100 ms from before `apply` to the
//     end: every create the apiserver acknowledged is there, with its data
//     (0 lost acknowledged writes). Creates refused or unanswered while the
//     node was down are counted, not failures.
//
// A power cut here kills processes; the machine's page cache survives it,
// so what it proves is the upgrade's resumption from whatever state the
// kill left, not the disk's durability (etcd's fsync covers that).
func TestUpgradeKilled(t *testing.T) {
	requireTarget(t)
	images := upgrade.Images(upgrade.Releases[upgradeTarget])
	step := "0 setup"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("TestUpgradeKilled FAILED in step %s", step)
		}
	})
	lc := RunPivot(t, &step, WithKubeletUnit())
	ctx := context.Background()
	admin, cs, node := lc.Admin, lc.AdminClient, lc.K.NodeName
	cfg, err := clientcmd.BuildConfigFromFlags("", admin)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := cvclient.ForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	step = "1 images and plan"
	took := importImageDir(t, lc.C, upgradeTarget, 8)
	t.Logf("imported %s's images in %s", upgradeTarget, took.Round(time.Millisecond))
	Eventually(t, 3*time.Minute, func() (bool, string) {
		out, err := exec.Command(Bin(t, "bootlet"), "upgrade", "plan", "--to", upgradeTarget, "--etcd-upgrade=false", "--kubeconfig", admin).CombinedOutput()
		return err == nil, "bootlet upgrade plan:\n" + string(out)
	})

	step = "2 apply"
	// The writer's client gives up on a request after 5 s, so the writes
	// go on at their pace while the node is down.
	wcfg := rest.CopyConfig(cfg)
	wcfg.Timeout = 5 * time.Second
	wcs, err := kubernetes.NewForConfig(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	w := startConfigMapWriter(wcs)
	t.Cleanup(w.stop)
	start := time.Now()
	out, err := exec.Command(Bin(t, "bootlet"), "upgrade", "apply", "--to", upgradeTarget, "--etcd-upgrade=false", "--kubeconfig", admin).CombinedOutput()
	t.Logf("bootlet upgrade apply --to %s --etcd-upgrade=false:\n%s", upgradeTarget, out)
	if err != nil {
		t.Fatalf("upgrade apply: %v", err)
	}

	step = "3 killed in the apiserver's step"
	inFlight := waitInFlight(t, dyn, upgrade.APIServer, 2*time.Minute)
	t.Logf("the apiserver's step in flight %s after apply: %+v", time.Since(start).Round(time.Millisecond), inFlight)
	time.Sleep(5 * time.Second)
	lc.B.Kill9()
	// From here on the product's gate timeout (5 min, kubeadm's) rather
	// than the lifecycle's 2 min, which a rollback test waits out: a power
	// cut takes a minute of the step, and this test is about resuming.
	setArg(lc.B.Args, "--upgrade-gate-timeout", "5m")
	lc.B.Start(t)
	t.Logf("KILL bootlet SIGKILLed %s into the apiserver's step, and started again", time.Since(inFlight.Began.Time).Round(time.Millisecond))
	time.Sleep(5 * time.Second)
	if st := currentInFlight(t, dyn); st == nil || st.Component != string(upgrade.APIServer) {
		t.Logf("the apiserver's step is no longer in flight before the power cut (in flight: %+v)", st)
	} else if img := checkpointImage(t, lc); img != upgrade.ImageOf(upgrade.APIServer, "v1.36.3") {
		// A version whose step has not passed its gate is not checkpointed.
		t.Errorf("the apiserver's step is in flight, and the checkpoint already holds %s", img)
	}
	back := powerCycle(t, lc)
	t.Logf("KILL the node lost its power %s into the apiserver's step; /readyz again %s after the power-on, through the checkpoint of %s",
		(time.Since(inFlight.Began.Time) - back).Round(time.Millisecond), back.Round(time.Millisecond), checkpointImage(t, lc))

	step = "4 killed in the kubelet's step"
	kubeletStep := waitInFlight(t, dyn, upgrade.Kubelet, 15*time.Minute)
	t.Logf("the kubelet's step in flight %s after apply: %+v", time.Since(start).Round(time.Millisecond), kubeletStep)
	back = powerCycle(t, lc)
	t.Logf("KILL the node lost its power %s into the kubelet's step (kubelet unit restarts so far: %d); /readyz again %s after the power-on",
		(time.Since(kubeletStep.Began.Time) - back).Round(time.Millisecond), len(lc.Unit.Restarts()), back.Round(time.Millisecond))

	step = "5 resumed"
	Eventually(t, 15*time.Minute, func() (bool, string) {
		cv, err := cvclient.Get(ctx, dyn)
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cv.Status.Conditions, upgrade.Progressing)
		return c != nil && c.Reason == upgrade.ReasonDone && cv.Status.InFlight == nil, fmt.Sprintf("step %q, in flight %+v, conditions %+v", cv.Status.Step, cv.Status.InFlight, cv.Status.Conditions)
	})
	total := time.Since(start)
	w.stop()

	step = "6 what runs"
	if v, err := cs.Discovery().ServerVersion(); err != nil || v.GitVersion != upgradeTarget {
		t.Errorf("/version after the upgrade: %v, %v; want %s", v, err, upgradeTarget)
	}
	Eventually(t, 2*time.Minute, func() (bool, string) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return n.Status.NodeInfo.KubeletVersion == upgradeTarget && nodeReady(n) && !n.Spec.Unschedulable,
			fmt.Sprintf("node %s: kubelet %s, ready %v, unschedulable %v", node, n.Status.NodeInfo.KubeletVersion, nodeReady(n), n.Spec.Unschedulable)
	})
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
	status, _ := exec.Command(Bin(t, "bootlet"), "upgrade", "status", "--kubeconfig", admin).CombinedOutput()
	t.Logf("bootlet upgrade status:\n%s", status)
	if !strings.Contains(string(status), "Completed") {
		t.Errorf("the history does not say the upgrade Completed")
	}

	step = "7 acknowledged writes"
	acked, lost := w.verify(cs)
	t.Logf("UPGRADE-KILLED total %s; writes: %d acknowledged, %d refused or unanswered (the node down), %d acknowledged and lost",
		total.Round(time.Millisecond), acked, w.failures(), len(lost))
	if acked < 100 {
		t.Errorf("only %d writes were acknowledged", acked)
	}
	if len(lost) > 0 {
		t.Errorf("%d acknowledged writes are lost: %v", len(lost), lost[:min(len(lost), 20)])
	}
}

// setArg sets the value that follows flag in args.
func setArg(args []string, flag, value string) {
	for i := range args[:max(len(args)-1, 0)] {
		if args[i] == flag {
			args[i+1] = value
		}
	}
}

// waitInFlight waits until the ClusterVersion records a step of comp in
// flight, and returns it.
func waitInFlight(t testing.TB, dyn dynamic.Interface, comp upgrade.Component, timeout time.Duration) *btypes.UpgradeStep {
	t.Helper()
	var st *btypes.UpgradeStep
	EventuallyEvery(t, timeout, 200*time.Millisecond, func() (bool, string) {
		st = currentInFlight(t, dyn)
		return st != nil && st.Component == string(comp) && st.Began != nil, fmt.Sprintf("waiting for %s's step; in flight: %+v", comp, st)
	})
	return st
}

// currentInFlight is the step the ClusterVersion records in flight (nil:
// none, or the API does not answer).
func currentInFlight(t testing.TB, dyn dynamic.Interface) *btypes.UpgradeStep {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cv, err := cvclient.Get(ctx, dyn)
	if err != nil {
		return nil
	}
	return cv.Status.InFlight
}

// powerCycle cuts the node's power (bootlet's process group, the kubelet,
// containerd and every container killed, containerd's state wiped) and
// boots it, with the kubelet's unit held meanwhile, and returns how long
// the apiserver took to answer /readyz after the power-on.
func powerCycle(t testing.TB, lc *LifecycleRun) time.Duration {
	t.Helper()
	var times RebootTimes
	lc.Unit.Held(func() { times = rebootNode(t, lc.C, lc.B, lc.K) })
	waitAPIReadyz(t, lc.AdminClient, 5*time.Minute)
	return time.Since(times.PoweredOn)
}

// checkpointImage is the apiserver image bootlet's stored checkpoint
// holds.
func checkpointImage(t testing.TB, lc *LifecycleRun) string {
	t.Helper()
	if ck := StoredCheckpoint(t, lc.B, "kube-system", "kube-apiserver"); ck != nil && ck.Pod != nil {
		return containerImage(&ck.Pod.Spec, "kube-apiserver")
	}
	return "(none)"
}
