//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/bootlet/bootlet/manifests"
	btypes "github.com/bootlet/bootlet/types"
)

// TestCheckpointerRunsCheckpointWithoutApiserver: bootlet brings up the
// bootstrap control plane and checkpoints a pod of the apiserver that is
// bound to its node and annotated bootlet.dev/checkpoint=true, with the
// Secret it uses. There is no kubelet: the test reports the pod Running and
// Ready itself, as a kubelet would. Then the apiserver goes away (its
// bootstrap pod is deleted from bootlet), and bootlet runs the checkpoint
// through CRI, with the Secret's content. When the apiserver is back and
// the self-hosted pod is reported Ready again, the checkpoint is withdrawn.
//
// Like TestControlPlane it binds fixed host ports and must not run beside
// another control-plane test.
// startCheckpointerControlPlane brings up the bootstrap control plane in a
// bootlet whose checkpointer uses its own rendered kubeconfig and RBAC Role
// (bootlet-checkpointer.conf, self-hosted/bootlet-checkpointer-rbac.yaml,
// created here: so every test of the checkpointer runs with exactly the
// rights render grants it, against the real apiserver), and creates the
// Node object of bootlet's node, so the pod GC leaves pods bound to it alone.
func startCheckpointerControlPlane(t *testing.T, activateAfter, withdrawAfter time.Duration) (*Bootlet, string, *kubernetes.Clientset) {
	t.Helper()
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)

	c := StartContainerd(t)
	ImportControlPlaneImages(t, c)
	const node = "e2e-node" // StartBootlet's node name
	assets := RenderControlPlane(t, filepath.Join(c.Dir, "assets"), filepath.Join(c.Dir, "etcd"), node, AdvertiseAddress(t))
	kubeconfig := filepath.Join(assets, manifests.CheckpointerKubeconfig)
	b := StartBootlet(t, c, "--checkpointer-kubeconfig", kubeconfig,
		"--checkpointer-activate-after", activateAfter.String(), "--checkpointer-withdraw-after", withdrawAfter.String())
	if b.NodeName != node {
		t.Fatalf("bootlet's node name is %s, the assets were rendered for %s", b.NodeName, node)
	}
	reportCheckpointerAtCleanup(t, b, nil)
	if out, err := b.CLI(t, "apply", "-f", filepath.Join(assets, "bootstrap-manifests")); err != nil {
		t.Fatalf("bootlet apply: %v\n%s", err, out)
	}
	applied := time.Now()
	admin := AdminClient(t, assets)
	waitAPIReadyz(t, admin, 5*time.Minute)
	t.Logf("cold bootstrap: apply -> kube-apiserver /readyz ok %s", time.Since(applied).Round(time.Millisecond))
	if _, err := admin.CoreV1().Nodes().Create(context.Background(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	createCheckpointerRBAC(t, admin, assets)
	return b, assets, admin
}

// reportPodReady sets a pod's status Running and Ready, with the Ready
// transition now, as the kubelet running it would.
// deleteBootstrapApiserver deletes the bootstrap apiserver's pod from
// bootlet (5 s grace) and waits until its /readyz stops answering ok, which
// it does at once on SIGTERM. It returns when the delete was sent and when
// the apiserver was first seen unreachable.
func deleteBootstrapApiserver(ctx context.Context, t *testing.T, b *Bootlet, admin *kubernetes.Clientset) (deleted, unreachable time.Time) {
	t.Helper()
	deleted = time.Now()
	if out, err := b.CLI(t, "delete", "pod", "-n", "kube-system", "kube-apiserver", "--grace-period", "5", "--wait=false"); err != nil {
		t.Fatalf("delete the bootstrap apiserver: %v\n%s", err, out)
	}
	Eventually(t, time.Minute, func() (bool, string) {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		body, err := admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		if err == nil && string(body) == "ok" {
			return false, "the apiserver still answers /readyz"
		}
		unreachable = time.Now()
		return true, ""
	})
	return deleted, unreachable
}

func reportPodReady(t *testing.T, admin *kubernetes.Clientset, ns, name string) {
	t.Helper()
	ctx := context.Background()
	Eventually(t, time.Minute, func() (bool, string) {
		cur, err := admin.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		now := metav1.Now()
		cur.Status.Phase = v1.PodRunning
		cur.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: now},
			{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: now}}
		_, err = admin.CoreV1().Pods(ns).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err == nil, fmt.Sprintf("update status: %v", err)
	})
}

func TestCheckpointerRunsCheckpointWithoutApiserver(t *testing.T) {
	const activateAfter, withdrawAfter = 10 * time.Second, 5 * time.Second
	b, assets, admin := startCheckpointerControlPlane(t, activateAfter, withdrawAfter)
	ctx := context.Background()
	waitReadyz := func(timeout time.Duration) { waitAPIReadyz(t, admin, timeout) }
	// Only a DaemonSet's or Deployment's pod in kube-system whose template
	// asks is checkpointed: a checkpoint runs at every apiserver outage,
	// so only who may already run privileged pods on every node may ask
	// (docs/security.md, "What bootlet trusts, and why"). greeter is a
	// DaemonSet's.
	const ns, message = "kube-system", "hello-from-the-checkpointed-secret"
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "greeting"},
		Data: map[string][]byte{"message": []byte(message)}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create secret: %v", err)
	}
	spec := v1.PodSpec{
		HostNetwork: true, TerminationGracePeriodSeconds: ptr.To[int64](2),
		Containers: []v1.Container{{
			Name: "greeter", Image: busybox,
			Command: []string{"sh", "-c", `echo "file=$(cat /etc/greeting/message) env=$GREETING"; exec sleep 3600`},
			Env: []v1.EnvVar{{Name: "GREETING", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "greeting"}, Key: "message"}}}},
			VolumeMounts: []v1.VolumeMount{{Name: "greeting", MountPath: "/etc/greeting", ReadOnly: true}},
		}},
		Volumes: []v1.Volume{{Name: "greeting", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "greeting"}}}},
	}
	makeNodeSchedulable(t, admin, b.NodeName)
	created := checkpointedDaemonSetOf(t, admin, ns, "greeter", b.NodeName, spec)
	reportReady := func() { t.Helper(); reportPodReady(t, admin, ns, created.Name) }

	// bootlet checkpoints it: the store holds it (read from disk, as
	// `bootlet checkpoint` does while the daemon runs).
	storedAt := time.Now()
	Eventually(t, time.Minute, func() (bool, string) {
		out, err := b.CLI(t, "checkpoint", "ls", "--root-dir", b.Dir)
		return err == nil && strings.Contains(out, "podcheckpoints") && strings.Contains(out, "greeter"), "no checkpoint of greeter:\n" + out
	})
	t.Logf("checkpoint stored %s after the pod was reported Ready", time.Since(storedAt).Round(time.Millisecond))
	show, err := b.CLI(t, "checkpoint", "show", "podcheckpoints", ns+"/greeter", "--root-dir", b.Dir)
	if err != nil || !strings.Contains(show, string(created.UID)) || !strings.Contains(show, "kind: PodCheckpoint") {
		t.Fatalf("checkpoint show: %v\n%s", err, show)
	}
	if _, err := b.Client.CoreV1().Pods(ns).Get(ctx, "greeter-checkpoint", metav1.GetOptions{}); err == nil {
		t.Fatal("the checkpoint runs while the apiserver is up")
	}

	// The apiserver goes away.
	apiserverGone, unreachable := deleteBootstrapApiserver(ctx, t, b, admin)
	running := b.WaitPod(t, ns, "greeter-checkpoint", 2*time.Minute, "Running", Running)
	toRunning := time.Since(apiserverGone)
	activated, err := time.Parse(time.RFC3339Nano, running.Annotations[btypes.AnnotationCheckpointActivated])
	if err != nil {
		t.Fatalf("checkpoint pod has no activation time: %v", running.Annotations)
	}
	t.Logf("apiserver pod deleted -> checkpoint pod Running: %s (/readyz failing after %s; unreachable -> activated %s, activate-after %s; activated -> Running seen %s)",
		toRunning.Round(time.Millisecond), unreachable.Sub(apiserverGone).Round(time.Millisecond),
		activated.Sub(unreachable).Round(time.Millisecond), activateAfter, time.Since(activated).Round(time.Millisecond))
	if running.Annotations[btypes.AnnotationCheckpointOf] != ns+"/greeter" {
		t.Errorf("checkpoint pod annotations: %v", running.Annotations)
	}
	if _, err := admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err == nil {
		t.Fatal("the apiserver still answers: the test did not take it away")
	}
	// With the Secret's content, in the file and in the env.
	want := "file=" + message + " env=" + message
	Eventually(t, 30*time.Second, func() (bool, string) {
		out, err := b.CLI(t, "logs", "-n", ns, "greeter-checkpoint")
		return err == nil && strings.Contains(out, want), fmt.Sprintf("checkpoint pod log %q (%v), want %q", out, err, want)
	})
	out, err := b.CLI(t, "get", "pods", "-n", ns)
	if err != nil || !strings.Contains(out, "checkpoint-of="+ns+"/greeter") {
		t.Errorf("bootlet get pods does not mark the checkpoint pod: %v\n%s", err, out)
	}
	t.Logf("bootlet get pods -n %s:\n%s", ns, out)

	// The apiserver comes back. The pod's Ready status in etcd is from
	// before the checkpoint ran: no withdrawal on that alone.
	Eventually(t, time.Minute, func() (bool, string) {
		_, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
		return err != nil, "bootstrap kube-apiserver still terminating"
	})
	manifest, err := os.ReadFile(filepath.Join(assets, "bootstrap-manifests", "kube-apiserver.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b.Apply(t, string(manifest))
	waitReadyz(3 * time.Minute)
	back := time.Now()
	time.Sleep(withdrawAfter + 3*time.Second)
	if p, err := b.Client.CoreV1().Pods(ns).Get(ctx, "greeter-checkpoint", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("checkpoint withdrawn on a stale Ready status: %v", err)
	}
	// A "kubelet" reports the pod Ready again: withdrawn after withdrawAfter.
	reportReady()
	reported := time.Now()
	var withdrawn time.Duration
	Eventually(t, time.Minute, func() (bool, string) {
		p, err := b.Client.CoreV1().Pods(ns).Get(ctx, "greeter-checkpoint", metav1.GetOptions{})
		if withdrawn == 0 && (err != nil || p.DeletionTimestamp != nil) {
			withdrawn = time.Since(reported)
		}
		return err != nil, "checkpoint pod still in bootlet's API"
	})
	t.Logf("apiserver back %s before the Ready report; Ready reported -> checkpoint pod deleted: %s, gone: %s (withdraw-after %s, grace period 2 s)",
		reported.Sub(back).Round(time.Millisecond), withdrawn.Round(time.Millisecond), time.Since(reported).Round(time.Millisecond), withdrawAfter)
	// The checkpoint itself stays for the next outage.
	if out, err := b.CLI(t, "checkpoint", "ls", "--root-dir", b.Dir); err != nil || !strings.Contains(out, "greeter") {
		t.Fatalf("checkpoint dropped after the withdrawal: %v\n%s", err, out)
	}
}

// TestCheckpointerApiserverStepsIn checkpoints the apiserver itself: a
// kube-apiserver DaemonSet whose template is the bootstrap kube-apiserver's
// pod, annotated, is created in the apiserver, as a self-hosted apiserver
// would be, and its pod is bound to this node (the test reports it Ready,
// as its kubelet would). Deleting the apiserver from
// bootlet leaves no apiserver at all: bootlet runs the checkpoint through
// CRI and /readyz comes back, served by it. Then the "self-hosted"
// apiserver comes back (the bootstrap pod again, both on 6443 with
// --permit-port-sharing) and is reported Ready: the checkpoint is
// withdrawn, while a client sends GET /version every 50 ms.
func TestCheckpointerApiserverStepsIn(t *testing.T) {
	const activateAfter, withdrawAfter = 10 * time.Second, 10 * time.Second
	b, assets, admin := startCheckpointerControlPlane(t, activateAfter, withdrawAfter)
	ctx := context.Background()

	manifest, checkpointed := checkpointTheApiserver(t, b, assets, admin)

	// The only apiserver goes away.
	gone, unreachable := deleteBootstrapApiserver(ctx, t, b, admin)
	waitAPIReadyz(t, admin, 3*time.Minute)
	back := time.Now()
	ck := b.Pod(t, "kube-system", "kube-apiserver-checkpoint")
	activated, err := time.Parse(time.RFC3339Nano, ck.Annotations[btypes.AnnotationCheckpointActivated])
	if err != nil {
		t.Fatalf("checkpoint pod: %v %v", err, ck.Annotations)
	}
	if by := ck.Annotations[btypes.AnnotationCheckpointActivatedBy]; by != "outage" {
		t.Errorf("the checkpoint that stood in for an apiserver gone under a running bootlet is annotated %s=%q, want outage", btypes.AnnotationCheckpointActivatedBy, by)
	}
	t.Logf("apiserver deleted -> /readyz failing %s -> checkpoint activated %s (activate-after %s) -> /readyz ok %s; deleted -> /readyz ok: %s",
		unreachable.Sub(gone).Round(time.Millisecond), activated.Sub(unreachable).Round(time.Millisecond), activateAfter,
		back.Sub(activated).Round(time.Millisecond), back.Sub(gone).Round(time.Millisecond))
	if _, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{}); err == nil {
		t.Fatal("the bootstrap apiserver still runs: /readyz may not come from the checkpoint")
	}
	if _, err := admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("the checkpointed apiserver does not serve: %v", err)
	}
	out, _ := b.CLI(t, "get", "pods", "-n", "kube-system")
	t.Logf("bootlet get pods -n kube-system:\n%s", out)

	// The "self-hosted" apiserver comes back beside the checkpoint, with
	// the UID of its pod in the apiserver, as a kubelet would run that pod:
	// the checkpointer finds the pod's own process by the cgroup of that
	// UID (the probe port is shared, so its Ready condition proves
	// nothing).
	apiPod := daemonSetPodOn(t, admin, "kube-system", "kube-apiserver", b.NodeName)
	if apiPod.UID != checkpointed.UID {
		t.Fatalf("the self-hosted apiserver pod in the apiserver is %s (%s), the checkpoint was of %s (%s)", apiPod.Name, apiPod.UID, checkpointed.Name, checkpointed.UID)
	}
	var selfHosted v1.Pod
	if err := yaml.Unmarshal(manifest, &selfHosted); err != nil {
		t.Fatal(err)
	}
	selfHosted.UID = apiPod.UID
	withUID, err := yaml.Marshal(&selfHosted)
	if err != nil {
		t.Fatal(err)
	}
	// Both probe clients (keep-alive and a new connection per request,
	// 50 ms, no retries) from before the self-hosted apiserver starts on
	// the checkpoint's port through the withdrawal: the router and the
	// drained port hand-over lose no request.
	probes := startHandoverProbes(t, filepath.Join(assets, "admin.conf"))
	b.Apply(t, string(withUID))
	b.WaitPod(t, "kube-system", "kube-apiserver", 3*time.Minute, "Running and Ready", func(p *v1.Pod) bool { return Running(p) && Ready(p) })
	reportPodReady(t, admin, "kube-system", apiPod.Name)
	reported := time.Now()
	var withdrawn time.Duration
	Eventually(t, 2*time.Minute, func() (bool, string) {
		p, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-checkpoint", metav1.GetOptions{})
		if withdrawn == 0 && (err != nil || p.DeletionTimestamp != nil) {
			withdrawn = time.Since(reported)
		}
		return err != nil, "checkpoint apiserver still in bootlet's API"
	})
	goneAt := time.Since(reported)
	time.Sleep(2 * time.Second) // a few more probes against the self-hosted apiserver alone
	t.Logf("self-hosted apiserver reported Ready -> checkpoint deleted %s (withdraw-after %s) -> gone %s",
		withdrawn.Round(time.Millisecond), withdrawAfter, goneAt.Round(time.Millisecond))
	probes.assertNoFailure(t, "the outage checkpoint's withdrawal")
	waitAPIReadyz(t, admin, time.Minute)
	// An outage's checkpoint keeps the anti-flap delay: the decision waited
	// withdrawAfter of the self-hosted pod's own answers.
	if why := withdrawalWhy(t, b); !strings.Contains(why, fmt.Sprintf("for %s: checkpoint withdrawn", withdrawAfter)) {
		t.Errorf("the outage's checkpoint was not withdrawn after the withdrawal delay (%s): %s", withdrawAfter, why)
	}
}

// withdrawalWhy is the checkpointer's reason for its last withdrawal in
// the daemon's log ("" none).
func withdrawalWhy(t *testing.T, b *Bootlet) string {
	t.Helper()
	data, err := os.ReadFile(b.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	why := ""
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, `"Checkpointer"`) && strings.Contains(l, `decision=["withdraw"]`) {
			why = l
		}
	}
	return why
}

// checkpointTheApiserver creates a kube-apiserver DaemonSet in kube-system
// whose template is the bootstrap apiserver's pod, annotated
// bootlet.dev/checkpoint=true, as a self-hosted apiserver would be (only a
// DaemonSet's or Deployment's pod is ever checkpointed), waits
// for its pod bound to bootlet's node, reports it Ready (as its kubelet
// would), and waits until bootlet has checkpointed it. It returns the
// bootstrap manifest and the DaemonSet's pod.
func checkpointTheApiserver(t *testing.T, b *Bootlet, assets string, admin *kubernetes.Clientset) ([]byte, *v1.Pod) {
	t.Helper()
	manifest, err := os.ReadFile(filepath.Join(assets, "bootstrap-manifests", "kube-apiserver.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pod v1.Pod
	if err := yaml.Unmarshal(manifest, &pod); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pod.Spec.Containers[0].Command, "--permit-port-sharing=true") {
		t.Fatalf("the rendered apiserver has no --permit-port-sharing: %v", pod.Spec.Containers[0].Command)
	}
	if pod.Namespace == "" {
		pod.Namespace = "kube-system"
	}
	if pod.Namespace != "kube-system" || pod.Name != "kube-apiserver" {
		t.Fatalf("the rendered apiserver pod is %s/%s, want kube-system/kube-apiserver", pod.Namespace, pod.Name)
	}
	spec := pod.Spec
	spec.NodeName = ""  // the DaemonSet controller and the scheduler bind it
	spec.Priority = nil // the Priority admission plugin sets it from the class
	makeNodeSchedulable(t, admin, b.NodeName)
	apiPod := checkpointedDaemonSetOf(t, admin, pod.Namespace, pod.Name, b.NodeName, spec)
	if got := daemonSetPodOn(t, admin, pod.Namespace, pod.Name, b.NodeName); got.UID != apiPod.UID {
		t.Fatalf("the DaemonSet's pod on %s is %s (%s), want %s (%s)", b.NodeName, got.Name, got.UID, apiPod.Name, apiPod.UID)
	}
	Eventually(t, time.Minute, func() (bool, string) {
		out, err := b.CLI(t, "checkpoint", "ls", "--root-dir", b.Dir)
		return err == nil && hasPodCheckpoint(out, pod.Namespace, pod.Name), "no checkpoint of the apiserver:\n" + out
	})
	show, err := b.CLI(t, "checkpoint", "show", "podcheckpoints", pod.Namespace+"/"+pod.Name, "--root-dir", b.Dir)
	if err != nil || !strings.Contains(show, string(apiPod.UID)) {
		t.Fatalf("the apiserver's checkpoint is not of the DaemonSet's pod %s (%s): %v\n%s", apiPod.Name, apiPod.UID, err, show)
	}
	return manifest, apiPod
}

// daemonSetPodOn returns the pod of DaemonSet ns/name bound to node, found
// by the DaemonSet's labels and the pod's controller reference (its name is
// generated).
func daemonSetPodOn(t *testing.T, admin *kubernetes.Clientset, ns, name, node string) *v1.Pod {
	t.Helper()
	ctx := context.Background()
	ds, err := admin.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("DaemonSet %s/%s: %v", ns, name, err)
	}
	l, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
	if err != nil {
		t.Fatalf("pods of DaemonSet %s/%s: %v", ns, name, err)
	}
	var found []*v1.Pod
	for i := range l.Items {
		p := &l.Items[i]
		if owner := metav1.GetControllerOf(p); owner != nil && owner.Kind == "DaemonSet" && owner.UID == ds.UID && p.Spec.NodeName == node {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("DaemonSet %s/%s has %d pods on %s, want 1", ns, name, len(found), node)
	}
	return found[0]
}

// TestCheckpointerRebootBringsApiserverBack: the apiserver is checkpointed
// and its pod is deleted from bootlet (the self-hosted one is gone, as after
// a pivot) just before the node loses power: every process is killed,
// containerd's /run state is wiped, bootlet's and containerd's roots are
// kept. After the "reboot" nothing runs the apiserver but the checkpoint:
// bootlet starts it once the apiserver has been unreachable for the
// activation delay, and /readyz comes back.
func TestCheckpointerRebootBringsApiserverBack(t *testing.T) {
	// A withdrawal delay far longer than the test: a checkpoint activated
	// by a reboot must not wait for it.
	const activateAfter, withdrawAfter = 10 * time.Second, 10 * time.Minute
	b, assets, admin := startCheckpointerControlPlane(t, activateAfter, withdrawAfter)
	manifest, checkpointed := checkpointTheApiserver(t, b, assets, admin)

	// The deletion is durable before the API answers; the reboot comes
	// before the activation delay is over.
	if out, err := b.CLI(t, "delete", "pod", "-n", "kube-system", "kube-apiserver", "--grace-period", "5", "--wait=false"); err != nil {
		t.Fatalf("delete the bootstrap apiserver: %v\n%s", err, out)
	}
	if _, err := b.Client.CoreV1().Pods("kube-system").Get(context.Background(), "kube-apiserver-checkpoint", metav1.GetOptions{}); err == nil {
		t.Fatal("the checkpoint already runs before the reboot")
	}
	SimulateReboot(t, b.Ctrd, b)
	rebooted := time.Now()
	b.Ctrd.Restart(t)
	b.Start(t)
	bootletReady := time.Since(rebooted)
	waitAPIReadyz(t, admin, 3*time.Minute)
	readyAt := time.Now()
	readyz := readyAt.Sub(rebooted)
	ck := b.Pod(t, "kube-system", "kube-apiserver-checkpoint")
	if !Running(ck) {
		t.Fatalf("/readyz is ok but the checkpoint pod is %s", statusSummary(ck))
	}
	if _, err := b.Client.CoreV1().Pods("kube-system").Get(context.Background(), "kube-apiserver", metav1.GetOptions{}); err == nil {
		t.Fatal("the deleted bootstrap apiserver came back: /readyz may not come from the checkpoint")
	}
	activated, err := time.Parse(time.RFC3339Nano, ck.Annotations[btypes.AnnotationCheckpointActivated])
	if err != nil {
		t.Fatalf("checkpoint pod: %v %v", err, ck.Annotations)
	}
	t.Logf("reboot (containerd restarted) -> bootlet ready %s -> checkpoint activated %s (activate-after %s) -> kube-apiserver /readyz ok %s; reboot -> /readyz: %s",
		bootletReady.Round(time.Millisecond), activated.Sub(rebooted.Add(bootletReady)).Round(time.Millisecond), activateAfter,
		readyAt.Sub(activated).Round(time.Millisecond), readyz.Round(time.Millisecond))
	out, _ := b.CLI(t, "get", "pods", "-n", "kube-system")
	t.Logf("bootlet get pods -n kube-system:\n%s", out)
	if by := ck.Annotations[btypes.AnnotationCheckpointActivatedBy]; by != "start" {
		t.Fatalf("the checkpoint activated after the reboot is annotated %s=%q, want start", btypes.AnnotationCheckpointActivatedBy, by)
	}
	// From the moment the checkpointed apiserver serves until the
	// self-hosted one has taken over and the checkpoint is gone: the
	// reboot's hand-over is the drained port hand-over, 0 failed.
	probes := startHandoverProbes(t, filepath.Join(assets, "admin.conf"))

	// The self-hosted apiserver comes back beside the checkpoint, with the
	// UID of its pod in the apiserver, as its kubelet would start it after
	// the reboot; its Ready status is the one etcd kept from before. The
	// checkpoint is withdrawn once that pod's own process answers /readyz,
	// not 10 minutes later.
	var selfHosted v1.Pod
	if err := yaml.Unmarshal(manifest, &selfHosted); err != nil {
		t.Fatal(err)
	}
	selfHosted.UID = checkpointed.UID
	withUID, err := yaml.Marshal(&selfHosted)
	if err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	b.Apply(t, string(withUID))
	var withdrawn time.Duration
	Eventually(t, 3*time.Minute, func() (bool, string) {
		p, err := b.Client.CoreV1().Pods("kube-system").Get(context.Background(), "kube-apiserver-checkpoint", metav1.GetOptions{})
		if withdrawn == 0 && (err != nil || p.DeletionTimestamp != nil) {
			withdrawn = time.Since(applied)
		}
		return err != nil, "checkpoint apiserver still in bootlet's API"
	})
	gone := time.Since(applied)
	time.Sleep(2 * time.Second) // a few more probes against the self-hosted apiserver alone
	probes.assertNoFailure(t, "the reboot's checkpoint -> self-hosted hand-over")
	waitAPIReadyz(t, admin, time.Minute)
	why := withdrawalWhy(t, b)
	if !strings.Contains(why, "checkpoint activated at bootlet's start, and the self-hosted pod's own process answers") {
		t.Errorf("the reboot's checkpoint was not withdrawn on the self-hosted pod's own answer: %q", why)
	}
	decided := RebootTimes{PoweredOn: applied}
	checkpointerLogTimes(b.LogPath(), &decided)
	t.Logf("self-hosted apiserver started again -> withdrawal decided %s -> checkpoint deleted %s (drained hand-over) -> gone %s (withdraw-after %s, not waited)",
		decided.Decided.Sub(applied).Round(time.Millisecond), withdrawn.Round(time.Millisecond), gone.Round(time.Millisecond), withdrawAfter)
}
