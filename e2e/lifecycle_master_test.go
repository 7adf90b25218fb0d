//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/shim"
)

// TestLifecycle is issue 9's full single-master lifecycle with the real
// kubelet, one step after the other on the same node:
//
//  1. first boot: bootlet runs the bootstrap control plane (cold bootstrap
//     timed from bootlet's start to the apiserver's /readyz);
//  2. a registered kubelet adopts the four bootstrap pods, 0 restarts
//     (container IDs and restartCounts compared);
//  3. the pivot to self-hosted, 0 failed requests from the 50 ms probe
//     client, default/kubernetes never empty;
//  4. the checkpointer stores the self-hosted apiserver's checkpoint (its
//     DaemonSet carries bootlet.dev/checkpoint: "true"), read with bootlet's
//     CLI;
//  5. a simulated reboot (RebootNode): the control plane comes back through
//     the checkpoint, then is self-hosted again and the checkpoint is
//     withdrawn (reboot_to_readyz_seconds, reboot_to_selfhosted_seconds);
//  6. `kubectl set image ds/kube-apiserver` to a second local tag: the
//     checkpoint follows;
//  7. another reboot: back on the upgraded tag, through the checkpoint of
//     the upgraded tag; then the last self-hosted apiserver pod is deleted
//     (the node loses its control-plane label, so the DaemonSet deletes its
//     pod and makes no other): the checkpoint steps in and stays; the node
//     labelled again, the DaemonSet's new pod takes over and the checkpoint
//     is withdrawn.
//
// A failure names the step it happened in. Like TestPivotSelfHosted it binds
// fixed host ports and must not call t.Parallel.
func TestLifecycle(t *testing.T) {
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)
	step := "0 setup"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("TestLifecycle FAILED in step %s", step)
		}
	})
	ctx := context.Background()
	const withdrawAfter = 10 * time.Second

	c := StartContainerd(t)
	t.Logf("imported the control-plane images in %s", ImportControlPlaneImages(t, c).Round(time.Millisecond))
	k := NewKubelet(t, c)
	t.Cleanup(k.Stop)
	assets := RenderControlPlane(t, filepath.Join(c.Dir, "assets"), filepath.Join(c.Dir, "etcd"), k.NodeName, AdvertiseAddress(t))
	admin := filepath.Join(assets, "admin.conf")
	k.UseAPIServer(t, filepath.Join(assets, "kubelet.conf"))

	// 1. First boot.
	step = "1 first boot"
	bootletStart := time.Now()
	b := StartBootlet(t, c,
		"--kubelet-healthz-url", fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort),
		"--kubelet-static-pod-path", k.ManifestDir,
		"--kubelet-root-dir", k.RootDir,
		"--pivot-kubeconfig", admin,
		"--self-hosted-assets", filepath.Join(assets, "self-hosted"),
		"--checkpointer-kubeconfig", admin,
		"--checkpointer-kubelet-pods-url", fmt.Sprintf("https://127.0.0.1:%d/pods", k.Port),
		"--checkpointer-withdraw-after", withdrawAfter.String(),
		"--manifests-dir", filepath.Join(assets, "bootstrap-manifests"))
	if b.NodeName != k.NodeName {
		t.Fatalf("bootlet's node %s is not the kubelet's %s", b.NodeName, k.NodeName)
	}
	t.Cleanup(func() {
		logCheckpointerLines(t, b)
		if t.Failed() {
			dumpControlPlane(t, b)
			out, _ := b.CLI(t, "get", "events", "-A")
			t.Logf("bootlet events:\n%s", tail(out, 4000))
			t.Logf("--- kubelet log tail:\n%s", tail(k.Log(), 4000))
		}
	})
	// The bootstrap pods come from --manifests-dir, as in the bootstrap
	// bench: every start applies it, also after the reboots, when the
	// pivot's record must keep the withdrawn bootstrap pods out.
	adminClient := AdminClient(t, assets)
	waitAPIReadyz(t, adminClient, 5*time.Minute)
	coldBootstrap := time.Since(bootletStart)
	uids := map[string]string{}
	for _, n := range ControlPlanePods {
		p := b.WaitPod(t, "kube-system", n, 3*time.Minute, "Running and Ready", func(p *v1.Pod) bool { return Running(p) && Ready(p) })
		uids[n] = string(p.UID)
	}
	t.Logf("STEP 1 first boot: bootlet start -> kube-apiserver /readyz %s (cold_bootstrap_seconds)", coldBootstrap.Round(time.Millisecond))

	// 2. Adoption, 0 restarts. The probes and the endpoints watch run from
	// here to the end of the pivot.
	step = "2 adoption"
	probe := StartProber(t, "keep-alive", admin, true)
	eps := WatchKubernetesEndpoints(t, admin)
	time.Sleep(2 * time.Second) // let status and init GC settle
	before := handoffSnapshot(t, c, uids)
	kubeletStart := time.Now()
	k.Start(t)
	Eventually(t, 2*time.Minute, func() (bool, string) {
		var not []string
		for _, n := range ControlPlanePods {
			if o := b.Pod(t, "kube-system", n).Annotations["bootlet.dev/owner"]; o != "kubelet-static" {
				not = append(not, n+"="+o)
			}
		}
		return len(not) == 0, fmt.Sprintf("not adopted: %v\n%s", not, tail(k.Log(), 2000))
	})
	adopted := time.Now()
	view := kubeletView(t, k, uids)
	restarts := 0
	for _, n := range ControlPlanePods {
		p := view[uids[n]]
		for _, cs := range p.Status.ContainerStatuses {
			id := strings.TrimPrefix(cs.ContainerID, "containerd://")
			restarts += int(cs.RestartCount)
			if cs.RestartCount != 0 || !strings.Contains(before, "/"+id+" ") {
				t.Errorf("kubelet view of %s/%s after the adoption: container %s restartCount %d; bootlet's containers:\n%s", n, cs.Name, id, cs.RestartCount, before)
			}
		}
	}
	if after := handoffSnapshot(t, c, uids); after != before {
		t.Errorf("the adoption changed the runtime objects:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("STEP 2 adoption: the kubelet adopted the 4 bootstrap pods %s after its start, container_restarts_on_adoption=%d",
		adopted.Sub(kubeletStart).Round(time.Millisecond), restarts)

	// 3. The pivot.
	step = "3 pivot"
	Eventually(t, 6*time.Minute, func() (bool, string) {
		var left []string
		for _, n := range pivoted {
			if _, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, n, metav1.GetOptions{}); err == nil {
				left = append(left, n)
			}
		}
		pods, _ := adminClient.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
		var summary string
		if pods != nil {
			summary = podsSummary(pods.Items)
		}
		return len(left) == 0, fmt.Sprintf("bootstrap pods left in bootlet: %v\nkube-system pods:\n%s\nbootlet:\n%s", left, summary, tail(b.Log(), 3000))
	})
	pivotDone := time.Now()
	time.Sleep(3 * time.Second)
	res := probe.Stop()
	eps.Stop()
	_, _, _, empties, werrs := eps.Report()
	if res.Requests < 100 || res.Failed != 0 {
		t.Errorf("the probe client saw %d failed requests of %d during the adoption and the pivot:\n%s", res.Failed, res.Requests, strings.Join(res.Failures, "\n"))
	}
	if len(empties) > 0 || len(werrs) > 0 {
		t.Errorf("default/kubernetes listed no address during the pivot: %v (watch errors %v)", empties, werrs)
	}
	waitSelfHosted(t, adminClient, b, k.NodeName, time.Time{}, true, "", 3*time.Minute)
	if t.Failed() {
		t.FailNow()
	}
	if r, err := shim.ReadPivotDone(shim.PivotDoneFile(b.Dir)); err != nil || r == nil || len(r.Components) != len(pivoted) {
		t.Fatalf("bootlet recorded no completed pivot in %s: %+v %v", shim.PivotDoneFile(b.Dir), r, err)
	}
	t.Logf("STEP 3 pivot: pivot_seconds=%.1f failed_requests_during_pivot=%d of %d", pivotDone.Sub(adopted).Seconds(), res.Failed, res.Requests)

	// 4. The checkpoint of the self-hosted apiserver.
	step = "4 checkpoint stored"
	ds, err := adminClient.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Spec.Template.Annotations["bootlet.dev/checkpoint"] != "true" {
		t.Fatalf("the self-hosted apiserver DaemonSet's pods are not annotated bootlet.dev/checkpoint: %v", ds.Spec.Template.Annotations)
	}
	origImage := containerImage(&ds.Spec.Template.Spec, "kube-apiserver")
	if origImage == "" {
		t.Fatalf("the DaemonSet has no kube-apiserver container: %v", ds.Spec.Template.Spec.Containers)
	}
	waitCheckpoint(t, b, adminClient, k.NodeName, origImage, 2*time.Minute)
	out, _ := b.CLI(t, "checkpoint", "ls", "--root-dir", b.Dir)
	t.Logf("STEP 4 checkpoint stored (%s):\n%s", origImage, out)

	// 5. Reboot: back through the checkpoint, then self-hosted again.
	step = "5 reboot"
	rebootToReadyz, rebootToSelfHosted := rebootAndComeBack(t, c, b, k, adminClient, origImage)
	t.Logf("STEP 5 reboot: reboot_to_readyz_seconds=%.1f reboot_to_selfhosted_seconds=%.1f cold_bootstrap_seconds=%.1f",
		rebootToReadyz.Seconds(), rebootToSelfHosted.Seconds(), coldBootstrap.Seconds())

	// 6. Upgrade to a second local tag: the checkpoint follows.
	step = "6 upgrade"
	newImage := origImage + "-lifecycle"
	if i := strings.LastIndex(origImage, ":"); i < 0 || strings.Contains(origImage[i:], "/") {
		t.Fatalf("the apiserver image %q has no tag", origImage)
	}
	TagImage(t, c, origImage, newImage)
	upgradeStart := time.Now()
	upgradeProbe := StartProber(t, "keep-alive during the upgrade", admin, true)
	kubectl(t, admin, "-n", "kube-system", "set", "image", "ds/kube-apiserver", "kube-apiserver="+newImage)
	Eventually(t, 5*time.Minute, func() (bool, string) {
		pods, err := selfHostedPods(ctx, adminClient, k.NodeName, "kube-apiserver")
		if err != nil {
			return false, err.Error()
		}
		ok := len(pods) == 1 && containerImage(&pods[0].Spec, "kube-apiserver") == newImage && Running(&pods[0]) && Ready(&pods[0]) && pods[0].DeletionTimestamp == nil
		return ok, "self-hosted apiserver pods during the upgrade:\n" + podsSummary(pods)
	})
	upgraded := time.Since(upgradeStart)
	ck := waitCheckpoint(t, b, adminClient, k.NodeName, newImage, 2*time.Minute)
	ures := upgradeProbe.Stop()
	t.Logf("STEP 6 upgrade: set image -> the new pod alone, Running and Ready %s; checkpoint moved to %s (source %s) %s after set image; probe: %d requests, %d failed%s",
		upgraded.Round(time.Millisecond), newImage, ck.SourceName, ck.StoredAt.Sub(upgradeStart).Round(time.Millisecond), ures.Requests, ures.Failed, failuresSuffix(ures))

	// 7. Another reboot: back on the upgraded tag.
	step = "7 second reboot"
	rebootToReadyz2, rebootToSelfHosted2 := rebootAndComeBack(t, c, b, k, adminClient, newImage)
	t.Logf("STEP 7 second reboot, on %s: reboot_to_readyz_seconds=%.1f reboot_to_selfhosted_seconds=%.1f",
		newImage, rebootToReadyz2.Seconds(), rebootToSelfHosted2.Seconds())

	// 7b. The last self-hosted apiserver pod deleted. A plain `kubectl
	// delete pod` is no such thing: the DaemonSet surges (maxSurge 1), so
	// its controller creates the replacement as soon as the pod is marked
	// for deletion (podsShouldBeOnNode: "we need to have at least one
	// non-deleted pod on the node"), and the outage is the new apiserver's
	// start, shorter than the activation delay. The last pod is the one the
	// DaemonSet itself deletes and does not replace: the node loses its
	// control-plane label (an operator's mistake). The owner is still
	// there, with the annotation, so the checkpoint is kept; the apiserver
	// goes; the checkpoint steps in, and stays while nothing else serves.
	// Labelling the node again (through the checkpoint) brings the
	// DaemonSet's pod back, and the checkpoint is withdrawn.
	step = "7b last self-hosted apiserver deleted"
	pods, err := selfHostedPods(ctx, adminClient, k.NodeName, "kube-apiserver")
	if err != nil || len(pods) != 1 {
		t.Fatalf("want one self-hosted apiserver pod before deleting it: %v\n%s", err, podsSummary(pods))
	}
	oldUID := pods[0].UID
	kubectl(t, admin, "label", "node", k.NodeName, "node-role.kubernetes.io/control-plane-")
	deleted := time.Now()
	var ckPod *v1.Pod
	Eventually(t, 3*time.Minute, func() (bool, string) {
		p, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-checkpoint", metav1.GetOptions{})
		if err != nil {
			return false, "no checkpoint pod in bootlet: " + err.Error()
		}
		ckPod = p
		return Running(p), "the checkpoint pod: " + statusSummary(p)
	})
	stepIn := time.Since(deleted)
	waitAPIReadyz(t, adminClient, 3*time.Minute)
	back := time.Since(deleted)
	if img := containerImage(&ckPod.Spec, "kube-apiserver"); img != newImage {
		t.Errorf("the checkpoint that stepped in runs %s, want the upgraded %s", img, newImage)
	}
	activated, _ := time.Parse(time.RFC3339Nano, ckPod.Annotations["bootlet.dev/checkpoint-activated"])
	t.Logf("STEP 7b: node unlabelled, the DaemonSet deletes its pod -> checkpoint activated +%s, Running +%s (owner %q), kube-apiserver /readyz +%s",
		activated.Sub(deleted).Round(time.Millisecond), stepIn.Round(time.Millisecond), ckPod.Annotations["bootlet.dev/owner"], back.Round(time.Millisecond))
	// Nothing else serves: the checkpoint stays, past twice the withdrawal
	// delay, and its record stays stored.
	Eventually(t, 2*time.Minute, func() (bool, string) {
		pods, err := selfHostedPods(ctx, adminClient, k.NodeName, "kube-apiserver")
		return err == nil && len(pods) == 0, fmt.Sprintf("the deleted self-hosted apiserver pod is still there: %v\n%s", err, podsSummary(pods))
	})
	time.Sleep(2*withdrawAfter + 5*time.Second)
	if p, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-checkpoint", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil || !Running(p) {
		t.Fatalf("the checkpoint, the only apiserver, did not stay: %v %v", err, p)
	}
	if StoredCheckpoint(t, b, "kube-system", "kube-apiserver") == nil {
		t.Fatal("the stored checkpoint of kube-system/kube-apiserver was removed while its pod was the only apiserver")
	}

	step = "7c self-hosted again"
	relabelled := time.Now()
	kubectl(t, admin, "label", "node", k.NodeName, "node-role.kubernetes.io/control-plane=")
	waitSelfHosted(t, adminClient, b, k.NodeName, relabelled, false, newImage, 5*time.Minute)
	selfHostedAgain := time.Since(relabelled)
	waitCheckpointGone(t, b)
	pods, err = selfHostedPods(ctx, adminClient, k.NodeName, "kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.UID == oldUID {
			t.Errorf("the deleted self-hosted apiserver pod is back: %s", podsSummary(pods))
		}
	}
	if StoredCheckpoint(t, b, "kube-system", "kube-apiserver") == nil {
		t.Error("the stored checkpoint of kube-system/kube-apiserver is gone")
	}
	t.Logf("STEP 7c: node labelled again -> the DaemonSet's new pod took over and the checkpoint was withdrawn %s later, gone %s later",
		selfHostedAgain.Round(time.Millisecond), time.Since(relabelled).Round(time.Millisecond))
	step = "done"
	t.Logf("LIFECYCLE cold_bootstrap_seconds=%.1f container_restarts_on_adoption=%d failed_requests_during_pivot=%d pivot_seconds=%.1f reboot_to_readyz_seconds=%.1f reboot_to_selfhosted_seconds=%.1f reboot2_to_readyz_seconds=%.1f reboot2_to_selfhosted_seconds=%.1f",
		coldBootstrap.Seconds(), restarts, res.Failed, pivotDone.Sub(adopted).Seconds(), rebootToReadyz.Seconds(), rebootToSelfHosted.Seconds(),
		rebootToReadyz2.Seconds(), rebootToSelfHosted2.Seconds())
}

// rebootAndComeBack reboots the node and waits until the apiserver answers
// /readyz through the checkpoint (of image), then until the control plane
// is self-hosted again (on image) and the checkpoint withdrawn. It returns
// both times from the power-on.
func rebootAndComeBack(t *testing.T, c *Containerd, b *Bootlet, k *Kubelet, admin *kubernetes.Clientset, image string) (toReadyz, toSelfHosted time.Duration) {
	t.Helper()
	ctx := context.Background()
	if _, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-checkpoint", metav1.GetOptions{}); err == nil {
		t.Fatal("a checkpoint pod runs before the reboot")
	}
	poweredOn := RebootNode(t, c, b, k)
	waitAPIReadyz(t, admin, 5*time.Minute)
	toReadyz = time.Since(poweredOn)
	// /readyz came from the checkpoint: no apiserver pod but the checkpoint
	// can run before some apiserver does (the kubelet gets the DaemonSet's
	// pod from the apiserver).
	ck, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-checkpoint", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("/readyz is back %s after the power-on, but bootlet runs no checkpoint: %v", toReadyz, err)
	}
	activated, err := time.Parse(time.RFC3339Nano, ck.Annotations["bootlet.dev/checkpoint-activated"])
	if err != nil || activated.Before(poweredOn) {
		t.Errorf("the checkpoint pod was not activated after the power-on (%s): %v %v", poweredOn.Format(time.RFC3339Nano), err, ck.Annotations)
	}
	if img := containerImage(&ck.Spec, "kube-apiserver"); img != image {
		t.Errorf("the checkpoint pod runs %s, want %s", img, image)
	}
	t.Logf("power-on -> checkpoint activated %s (owner %s) -> kube-apiserver /readyz %s after the power-on",
		activated.Sub(poweredOn).Round(time.Millisecond), ck.Annotations["bootlet.dev/owner"], toReadyz.Round(time.Millisecond))
	waitSelfHosted(t, admin, b, k.NodeName, poweredOn, true, image, 5*time.Minute)
	toSelfHosted = time.Since(poweredOn)
	waitCheckpointGone(t, b)
	t.Logf("the withdrawn checkpoint pod left bootlet %s after the power-on", time.Since(poweredOn).Round(time.Millisecond))
	// --manifests-dir was applied again at bootlet's start: the pivot's
	// record kept the withdrawn bootstrap pods out, etcd is still there.
	for _, n := range pivoted {
		if p, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the withdrawn bootstrap pod %s is back in bootlet after the reboot: %v %v", n, err, p)
		}
	}
	if etcd := b.Pod(t, "kube-system", "etcd"); !Running(etcd) {
		t.Errorf("etcd after the reboot: %s", statusSummary(etcd))
	}
	if log, _ := os.ReadFile(b.LogPath()); !strings.Contains(string(log), "Pivot to self-hosted already complete") {
		t.Errorf("the restarted bootlet did not find its record of the completed pivot:\n%s", tail(b.Log(), 3000))
	}
	if t.Failed() {
		t.FailNow()
	}
	return toReadyz, toSelfHosted
}

// waitSelfHosted waits until each pivoted component has a self-hosted pod
// Running and Ready on node, whose Ready condition turned true after since
// (a Ready status that etcd kept from before a reboot does not count; with
// sinceAll false, only the apiserver's must be that recent), the
// apiserver's on image when image is set, and bootlet withdrew its
// checkpoint pod (it may still be stopping: waitCheckpointGone).
func waitSelfHosted(t *testing.T, admin *kubernetes.Clientset, b *Bootlet, node string, since time.Time, sinceAll bool, image string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	Eventually(t, timeout, func() (bool, string) {
		var why []string
		for _, comp := range pivoted {
			pods, err := selfHostedPods(ctx, admin, node, comp)
			if err != nil {
				return false, err.Error()
			}
			ok := false
			for i := range pods {
				p := &pods[i]
				fresh := readyTransition(p).After(since) || (!sinceAll && comp != "kube-apiserver")
				if Running(p) && Ready(p) && p.DeletionTimestamp == nil && fresh &&
					(image == "" || comp != "kube-apiserver" || containerImage(&p.Spec, comp) == image) {
					ok = true
				}
			}
			if !ok {
				why = append(why, fmt.Sprintf("%s: no fresh Ready self-hosted pod:\n%s", comp, podsSummary(pods)))
			}
		}
		if p, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-checkpoint", metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
			why = append(why, "the checkpoint pod is not withdrawn: "+statusSummary(p))
		} else if err != nil && !apierrors.IsNotFound(err) {
			why = append(why, err.Error())
		}
		return len(why) == 0, strings.Join(why, "\n")
	})
}

// waitCheckpointGone waits until the withdrawn checkpoint pod has left
// bootlet's API (nothing of it runs any more; the apiserver's graceful stop
// can take its whole grace period).
func waitCheckpointGone(t *testing.T, b *Bootlet) {
	t.Helper()
	Eventually(t, 2*time.Minute, func() (bool, string) {
		p, err := b.Client.CoreV1().Pods("kube-system").Get(context.Background(), "kube-apiserver-checkpoint", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, "the withdrawn checkpoint pod is still in bootlet: " + statusSummary(p)
	})
}

// waitCheckpoint waits until bootlet's stored checkpoint of the apiserver
// DaemonSet is the one of a Ready self-hosted pod on image.
func waitCheckpoint(t *testing.T, b *Bootlet, admin *kubernetes.Clientset, node, image string, timeout time.Duration) *shim.Checkpoint {
	t.Helper()
	var ck *shim.Checkpoint
	Eventually(t, timeout, func() (bool, string) {
		ck = StoredCheckpoint(t, b, "kube-system", "kube-apiserver")
		if ck == nil {
			out, _ := b.CLI(t, "checkpoint", "ls", "--root-dir", b.Dir)
			return false, "no stored checkpoint of kube-system/kube-apiserver:\n" + out
		}
		got := containerImage(&ck.Pod.Spec, "kube-apiserver")
		return got == image && ck.OwnerKind == "DaemonSet", fmt.Sprintf("the checkpoint of kube-system/kube-apiserver is of %s (%s %s), want %s", got, ck.OwnerKind, ck.SourceName, image)
	})
	return ck
}

// kubectl runs _output/bin/kubectl with kubeconfig.
func kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	cmd := exec.Command(Bin(t, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
