//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/bootlet/bootlet/checkpointer"
	btypes "github.com/bootlet/bootlet/types"
)

// Helpers of TestLifecycle (lifecycle_master_test.go): the reboot of the
// whole node (containerd, bootlet and a registered kubelet), a second local
// tag of an image, and bootlet's stored checkpoint of a component.

// RebootNode is a power cycle of a node that runs containerd, bootlet and a
// kubelet: the kubelet and bootlet get SIGKILL, containerd is stopped and
// every container process is killed, containerd's /run state is wiped and
// persistent state (containerd's, bootlet's and the kubelet's roots, the
// static pod files) is kept (SimulateReboot). Then the services start in
// their boot order: containerd, bootlet, the kubelet, as their systemd units
// would. It returns the moment the power came back: the start of
// containerd.
func RebootNode(t testing.TB, c *Containerd, b *Bootlet, k *Kubelet) time.Time {
	t.Helper()
	return rebootNode(t, c, b, k).PoweredOn
}

// rebootNode is RebootNode, with the moments bootlet answered /readyz and
// the kubelet started.
func rebootNode(t testing.TB, c *Containerd, b *Bootlet, k *Kubelet) RebootTimes {
	t.Helper()
	if pid := k.PID(); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	k.Stop() // reaps the killed process and puts the host's sysctls back
	SimulateReboot(t, c, b)
	r := RebootTimes{PoweredOn: time.Now()}
	c.Restart(t)
	b.Start(t)
	r.BootletReady = time.Now()
	k.Start(t)
	r.KubeletStarted = time.Now()
	return r
}

// TagImage adds the name dst to the image src in c's CRI namespace, with
// containerd's own client (ctr), as `ctr images tag` does on a node with no
// registry: the CRI image service sees the new name at once.
func TagImage(t testing.TB, c *Containerd, src, dst string) {
	t.Helper()
	out, err := exec.Command(Bin(t, "ctr"), "--address", c.Socket, "--namespace", "k8s.io", "images", "tag", "--force", src, dst).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images tag %s %s: %v\n%s", src, dst, err, out)
	}
	Eventually(t, 30*time.Second, func() (bool, string) {
		st, err := c.IS.ImageStatus(context.Background(), &runtimeapi.ImageSpec{Image: dst}, false)
		return err == nil && st.GetImage() != nil, fmt.Sprintf("CRI ImageStatus %s after ctr images tag: %v %v", dst, err, st)
	})
}

// StoredCheckpoint reads bootlet's stored checkpoint of a component
// (`bootlet checkpoint show podcheckpoints NS/NAME`), nil when there is none.
func StoredCheckpoint(t testing.TB, b *Bootlet, ns, name string) *checkpointer.Checkpoint {
	t.Helper()
	out, err := b.CLI(t, "checkpoint", "show", "podcheckpoints", ns+"/"+name, "--root-dir", b.Dir)
	if err != nil {
		return nil
	}
	var ck checkpointer.Checkpoint
	if err := yaml.Unmarshal([]byte(out), &ck); err != nil {
		t.Fatalf("bootlet checkpoint show podcheckpoints %s/%s: %v\n%s", ns, name, err, out)
	}
	if ck.Pod == nil {
		t.Fatalf("the stored checkpoint of %s/%s has no pod:\n%s", ns, name, out)
	}
	return &ck
}

// containerImage is the image of the named container of a pod spec.
func containerImage(spec *v1.PodSpec, name string) string {
	for _, c := range spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// selfHostedPods lists this node's kube-system pods of a component (by its
// k8s-app label, which neither the bootstrap pods' nor the checkpoint's
// mirror pods carry).
func selfHostedPods(ctx context.Context, admin *kubernetes.Clientset, node, component string) ([]v1.Pod, error) {
	l, err := admin.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + node, LabelSelector: "k8s-app=" + component})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// readyTransition is when the pod's Ready condition last turned true.
func readyTransition(p *v1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// podsSummary is one line per pod: name, image of its first container,
// status.
func podsSummary(pods []v1.Pod) string {
	var out []string
	for i := range pods {
		p := &pods[i]
		img := ""
		if len(p.Spec.Containers) > 0 {
			img = p.Spec.Containers[0].Image
		}
		del := ""
		if p.DeletionTimestamp != nil {
			del = " (deleting)"
		}
		out = append(out, fmt.Sprintf("%s %s %s%s", p.Name, img, statusSummary(p), del))
	}
	return strings.Join(out, "\n")
}

// RebootNumbers are one reboot's times from the power-on.
type RebootNumbers struct {
	// ToReadyz: to the admin client's /readyz ok, through the checkpoint.
	ToReadyz time.Duration
	// ToSelfHosted: to every pivoted component self-hosted (Ready after the
	// power-on) and the checkpoint apiserver no longer serving (its
	// listener gone, or withdrawn and holding no connection on the port):
	// reboot_to_selfhosted_seconds.
	ToSelfHosted time.Duration
	// ToWithdrawn: to the same pods Ready and the checkpoint pod withdrawn
	// (deleting, after the port hand-over), an earlier end point than "no
	// longer serving", kept for comparison: reboot_to_withdrawn_seconds.
	ToWithdrawn time.Duration
	// ToGone: to the checkpoint pod gone from bootlet (its graceful stop
	// ended): reboot_to_checkpoint_gone_seconds.
	ToGone time.Duration
	Times  RebootTimes
}

// rebootAndComeBack reboots the node and waits until the apiserver answers
// /readyz through the checkpoint (of image), then until the control plane
// is self-hosted again (on image), the checkpoint withdrawn and no longer
// serving, then gone. It logs where the time went.
func rebootAndComeBack(t testing.TB, c *Containerd, b *Bootlet, k *Kubelet, admin *kubernetes.Clientset, image string) RebootNumbers {
	t.Helper()
	ctx := context.Background()
	if _, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-checkpoint", metav1.GetOptions{}); err == nil {
		t.Fatal("a checkpoint pod runs before the reboot")
	}
	times := rebootNode(t, c, b, k)
	poweredOn := times.PoweredOn
	watch := watchCheckpointServing(b, "kube-system", "kube-apiserver-checkpoint")
	defer watch.end()
	waitAPIReadyz(t, admin, 5*time.Minute)
	var n RebootNumbers
	n.ToReadyz = time.Since(poweredOn)
	times.Readyz = poweredOn.Add(n.ToReadyz)
	// /readyz came from the checkpoint: no apiserver pod but the checkpoint
	// can run before some apiserver does (the kubelet gets the DaemonSet's
	// pod from the apiserver).
	ck, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-checkpoint", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("/readyz is back %s after the power-on, but bootlet runs no checkpoint: %v", n.ToReadyz, err)
	}
	activated, err := time.Parse(time.RFC3339Nano, ck.Annotations[btypes.AnnotationCheckpointActivated])
	if err != nil || activated.Before(poweredOn) {
		t.Errorf("the checkpoint pod was not activated after the power-on (%s): %v %v", poweredOn.Format(time.RFC3339Nano), err, ck.Annotations)
	}
	if img := containerImage(&ck.Spec, "kube-apiserver"); img != image {
		t.Errorf("the checkpoint pod runs %s, want %s", img, image)
	}
	t.Logf("power-on -> checkpoint activated %s (owner %s) -> kube-apiserver /readyz %s after the power-on",
		activated.Sub(poweredOn).Round(time.Millisecond), ck.Annotations[btypes.AnnotationOwner], n.ToReadyz.Round(time.Millisecond))
	waitSelfHosted(t, admin, b, k.NodeName, poweredOn, true, image, 5*time.Minute)
	n.ToWithdrawn = time.Since(poweredOn)
	// Self-hosted again: the pods above Ready and the checkpoint apiserver
	// no longer serving (the watcher saw it, at most 200 ms late).
	w := watch.waitStoppedServing(t, 2*time.Minute)
	n.ToSelfHosted = max(n.ToWithdrawn, w.StoppedServing.Sub(poweredOn))
	waitCheckpointGone(t, b)
	n.ToGone = time.Since(poweredOn)
	w = watch.end()
	times.Activated, times.Listening, times.Withdrawn, times.StoppedServing, times.Gone, times.LeftAtWithdrawal =
		activated, w.Listening, w.Withdrawn, w.StoppedServing, w.Gone, w.LeftAtWithdrawal
	if times.Gone.IsZero() {
		times.Gone = poweredOn.Add(n.ToGone)
	}
	selfHostedApiserverTimes(admin, k.NodeName, &times)
	checkpointerLogTimes(b.LogPath(), &times)
	n.Times = times
	t.Logf("REBOOT %s", times.Breakdown())
	t.Logf("the checkpoint apiserver's connections when it was withdrawn: %s", w.LeftClients)
	t.Logf("the withdrawn checkpoint pod left bootlet %s after the power-on", n.ToGone.Round(time.Millisecond))
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
	return n
}

// waitSelfHosted waits until each pivoted component has a self-hosted pod
// Running and Ready on node, whose Ready condition turned true after since
// (a Ready status that etcd kept from before a reboot does not count; with
// sinceAll false, only the apiserver's must be that recent), the
// apiserver's on image when image is set, and bootlet withdrew its
// checkpoint pod (it may still be stopping: waitCheckpointGone).
func waitSelfHosted(t testing.TB, admin *kubernetes.Clientset, b *Bootlet, node string, since time.Time, sinceAll bool, image string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	Eventually(t, timeout, func() (bool, string) {
		why, err := selfHostedMissing(ctx, admin, node, since, sinceAll, image)
		if err != nil {
			return false, err.Error()
		}
		if p, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-checkpoint", metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
			why = append(why, "the checkpoint pod is not withdrawn: "+statusSummary(p))
		} else if err != nil && !apierrors.IsNotFound(err) {
			why = append(why, err.Error())
		}
		return len(why) == 0, strings.Join(why, "\n")
	})
}

// selfHostedMissing says, for each pivoted component that has none, why it
// has no self-hosted pod on node Running, Ready and not being deleted, whose
// Ready condition turned true after since (with sinceAll false only the
// apiserver's must), the apiserver's on image when image is set.
func selfHostedMissing(ctx context.Context, admin *kubernetes.Clientset, node string, since time.Time, sinceAll bool, image string) ([]string, error) {
	var why []string
	for _, comp := range pivoted {
		pods, err := selfHostedPods(ctx, admin, node, comp)
		if err != nil {
			return nil, err
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
	return why, nil
}

// waitCheckpointGone waits until the withdrawn checkpoint pod has left
// bootlet's API (nothing of it runs any more; the apiserver's graceful stop
// can take its whole grace period).
func waitCheckpointGone(t testing.TB, b *Bootlet) {
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
func waitCheckpoint(t testing.TB, b *Bootlet, admin *kubernetes.Clientset, node, image string, timeout time.Duration) *checkpointer.Checkpoint {
	t.Helper()
	var ck *checkpointer.Checkpoint
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

// WaitNodePhase waits until `bootlet status` shows the node's phase (the
// daemon's Node, nodephase.Decide) and returns its output. status exits
// non-zero while /readyz fails, after printing: only its output counts.
func WaitNodePhase(t testing.TB, b *Bootlet, phase string, timeout time.Duration) string {
	t.Helper()
	var out string
	Eventually(t, timeout, func() (bool, string) {
		out, _ = b.CLI(t, "status")
		return strings.Contains(out, "\nphase: "+phase+" ("), "bootlet status, want phase " + phase + ":\n" + out
	})
	return out
}
