//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
func TestCheckpointerRunsCheckpointWithoutApiserver(t *testing.T) {
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)

	c := StartContainerd(t)
	ImportControlPlaneImages(t, c)
	const node = "e2e-node" // StartBootlet's node name
	assets := RenderControlPlane(t, filepath.Join(c.Dir, "assets"), filepath.Join(c.Dir, "etcd"), node, AdvertiseAddress(t))
	kubeconfig := filepath.Join(assets, "admin.conf")
	const activateAfter, withdrawAfter = 10 * time.Second, 5 * time.Second
	b := StartBootlet(t, c, "--checkpointer-kubeconfig", kubeconfig, "--checkpointer-kubelet-pods-url=",
		"--checkpointer-activate-after", activateAfter.String(), "--checkpointer-withdraw-after", withdrawAfter.String())
	if b.NodeName != node {
		t.Fatalf("bootlet's node name is %s, the assets were rendered for %s", b.NodeName, node)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpControlPlane(t, b)
			out, _ := b.CLI(t, "get", "events", "-A")
			t.Logf("bootlet events:\n%s", tail(out, 4000))
		}
	})
	if out, err := b.CLI(t, "apply", "-f", filepath.Join(assets, "bootstrap-manifests")); err != nil {
		t.Fatalf("bootlet apply: %v\n%s", err, out)
	}
	admin := AdminClient(t, assets)
	ctx := context.Background()
	waitReadyz := func(timeout time.Duration) {
		Eventually(t, timeout, func() (bool, string) {
			body, err := admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			return err == nil && string(body) == "ok", fmt.Sprintf("kube-apiserver /readyz: %v %s", err, body)
		})
	}
	waitReadyz(5 * time.Minute)

	// A Node object, so the pod GC does not delete the pod bound to a node
	// that does not exist.
	if _, err := admin.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	const ns, message = "default", "hello-from-the-checkpointed-secret"
	if _, err := admin.CoreV1().Secrets(ns).Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "greeting"},
		Data: map[string][]byte{"message": []byte(message)}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create secret: %v", err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "greeter", Annotations: map[string]string{"bootlet.dev/checkpoint": "true"}, Labels: map[string]string{"app": "greeter"}},
		Spec: v1.PodSpec{
			NodeName: node, HostNetwork: true, TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers: []v1.Container{{
				Name: "greeter", Image: busybox,
				Command: []string{"sh", "-c", `echo "file=$(cat /etc/greeting/message) env=$GREETING"; exec sleep 3600`},
				Env: []v1.EnvVar{{Name: "GREETING", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
					LocalObjectReference: v1.LocalObjectReference{Name: "greeting"}, Key: "message"}}}},
				VolumeMounts: []v1.VolumeMount{{Name: "greeting", MountPath: "/etc/greeting", ReadOnly: true}},
			}},
			Volumes: []v1.Volume{{Name: "greeting", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "greeting"}}}},
		},
	}
	// The ServiceAccount admission plugin needs the namespace's default
	// service account, which the controller-manager makes.
	var created *v1.Pod
	Eventually(t, 2*time.Minute, func() (bool, string) {
		var err error
		created, err = admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, fmt.Sprintf("create pod: %v", err)
	})
	reportReady := func() {
		t.Helper()
		Eventually(t, time.Minute, func() (bool, string) {
			cur, err := admin.CoreV1().Pods(ns).Get(ctx, "greeter", metav1.GetOptions{})
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
	reportReady()

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
	apiserverGone := time.Now()
	if out, err := b.CLI(t, "delete", "pod", "-n", "kube-system", "kube-apiserver", "--grace-period", "5"); err != nil {
		t.Fatalf("delete the bootstrap apiserver: %v\n%s", err, out)
	}
	running := b.WaitPod(t, ns, "greeter-checkpoint", 2*time.Minute, "Running", Running)
	toRunning := time.Since(apiserverGone)
	t.Logf("apiserver pod deleted -> checkpoint pod Running: %s (activate-after %s)", toRunning.Round(time.Millisecond), activateAfter)
	if running.Annotations["bootlet.dev/checkpoint-of"] != ns+"/greeter" {
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
