//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	btypes "github.com/bootlet/bootlet/types"
)

// TestLifecycle is the full single-master lifecycle with the real
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
//  6. `kubectl set image ds/kube-apiserver` to a second local tag under
//     the 50 ms probe clients, 0 failed requests; the checkpoint follows;
//  7. another reboot: back on the upgraded tag, through the checkpoint of
//     the upgraded tag; then the last self-hosted apiserver pod is deleted
//     (the node loses its control-plane label, so the DaemonSet deletes its
//     pod and makes no other): the checkpoint steps in and stays; the node
//     labelled again, the DaemonSet's new pod takes over and the checkpoint
//     is withdrawn.
//
// A failure names the step it happened in. Like TestPivotSelfHosted it binds
// fixed host ports and must not call t.Parallel.
func TestLifecycle(tt *testing.T) {
	t := NewFailureRecorder(tt)
	step := "0 setup"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("TestLifecycle FAILED in step %s:\n%s", step, strings.Join(t.Failures(), "\n"))
		}
	})
	ctx := context.Background()
	const withdrawAfter = lifecycleWithdrawAfter

	// 1. to 5.: first boot, adoption, pivot, checkpoint stored, a reboot.
	lc := RunLifecycle(t, &step)
	c, b, k, admin, adminClient, origImage := lc.C, lc.B, lc.K, lc.Admin, lc.AdminClient, lc.Image
	n := lc.Numbers

	// 6. Upgrade to a second local tag: the checkpoint follows.
	step = "6 upgrade"
	newImage := origImage + "-lifecycle"
	if i := strings.LastIndex(origImage, ":"); i < 0 || strings.Contains(origImage[i:], "/") {
		t.Fatalf("the apiserver image %q has no tag", origImage)
	}
	TagImage(t, c, origImage, newImage)
	// The upgrade under both 50 ms probe clients, asserted at 0 failed
	// requests (the old pod's preStop:
	// docs/design/reuseport.md, "Rolling updates: the preStop sleep").
	up := UpgradeAPIServer(t, lc, newImage)
	ck := waitCheckpoint(t, b, adminClient, k.NodeName, newImage, 2*time.Minute)
	t.Logf("STEP 6 upgrade: set image -> the new pod alone, Running and Ready, the old one gone %s; checkpoint moved to %s (source %s) at %s; probe: keep-alive %d failed of %d, new connection %d not answered of %d%s%s",
		up.Took.Round(time.Millisecond), newImage, ck.SourceName, ck.StoredAt.Format(time.RFC3339Nano),
		up.KeepAlive.Failed, up.KeepAlive.Requests, up.NewConn.NotAnswered(), up.NewConn.Requests, failuresSuffix(up.KeepAlive), failuresSuffix(up.NewConn))

	// 7. Another reboot: back on the upgraded tag.
	step = "7 second reboot"
	rb2 := rebootAndComeBack(t, c, b, k, adminClient, newImage)
	rebootToReadyz2, rebootToSelfHosted2 := rb2.ToReadyz, rb2.ToSelfHosted
	t.Logf("STEP 7 second reboot, on %s: reboot_to_readyz_seconds=%.1f reboot_to_selfhosted_seconds=%.1f (withdrawn %.1f, gone %.1f)",
		newImage, rebootToReadyz2.Seconds(), rebootToSelfHosted2.Seconds(), rb2.ToWithdrawn.Seconds(), rb2.ToGone.Seconds())

	// 7b. The last self-hosted apiserver pod deleted. A plain `kubectl
	// delete pod` is no such thing: the DaemonSet surges (maxSurge 1), so
	// its controller creates the replacement as soon as the pod is marked
	// for deletion (podsShouldBeOnNode: "we need to have at least one
	// non-deleted pod on the node"), and the outage is the new apiserver's
	// start, shorter than the activation delay. The last pod is the one the
	// DaemonSet itself deletes and does not replace: the node loses both
	// its control-plane labels (an operator's mistake: the node-role label
	// alone demotes nothing on the last master, which the masters'
	// controller refuses, and the label the DaemonSets select is the
	// controller's, which it puts back on a labelled master). The owner is
	// still there, with the annotation, so the checkpoint is kept; the
	// apiserver goes; the checkpoint steps in, and stays while nothing else
	// serves. Labelling the node again (through the checkpoint) has the
	// controller put back the DaemonSets' label, which brings the
	// DaemonSet's pod back, and the checkpoint is withdrawn.
	step = "7b last self-hosted apiserver deleted"
	pods, err := selfHostedPods(ctx, adminClient, k.NodeName, "kube-apiserver")
	if err != nil || len(pods) != 1 {
		t.Fatalf("want one self-hosted apiserver pod before deleting it: %v\n%s", err, podsSummary(pods))
	}
	oldUID := pods[0].UID
	kubectl(t, admin, "label", "node", k.NodeName, btypes.LabelControlPlane+"-", btypes.LabelControlPlanePods+"-")
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
	activated, _ := time.Parse(time.RFC3339Nano, ckPod.Annotations[btypes.AnnotationCheckpointActivated])
	t.Logf("STEP 7b: node unlabelled, the DaemonSet deletes its pod -> checkpoint activated +%s, Running +%s (owner %q), kube-apiserver /readyz +%s",
		activated.Sub(deleted).Round(time.Millisecond), stepIn.Round(time.Millisecond), ckPod.Annotations[btypes.AnnotationOwner], back.Round(time.Millisecond))
	WaitNodePhase(t, b, "checkpoint-active", 30*time.Second)
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
	kubectl(t, admin, "label", "node", k.NodeName, btypes.LabelControlPlane+"=")
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
	WaitNodePhase(t, b, "self-hosted", 30*time.Second)
	t.Logf("STEP 7c: node labelled again -> the DaemonSet's new pod took over and the checkpoint was withdrawn %s later, gone %s later",
		selfHostedAgain.Round(time.Millisecond), time.Since(relabelled).Round(time.Millisecond))
	step = "done"
	t.Logf("LIFECYCLE cold_bootstrap_seconds=%.1f container_restarts_on_adoption=%d failed_requests_during_pivot=%d pivot_seconds=%.1f reboot_to_readyz_seconds=%.1f reboot_to_selfhosted_seconds=%.1f reboot2_to_readyz_seconds=%.1f reboot2_to_selfhosted_seconds=%.1f cold_to_selfhosted_seconds=%.1f",
		n.ColdBootstrap.Seconds(), n.ContainerRestarts, n.FailedRequests, n.Pivot.Seconds(), n.RebootToReadyz.Seconds(), n.RebootToSelfHosted.Seconds(),
		rebootToReadyz2.Seconds(), rebootToSelfHosted2.Seconds(), n.ColdToSelfHosted().Seconds())
}
