//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestControlPlane goes from nothing (a private containerd, a fresh bootlet,
// a temporary asset and etcd data directory) to a working control plane run
// as bootlet pods, with no kubelet and no temporary apiserver.
//
// It must not call t.Parallel: it binds fixed host ports, and `go test`
// runs a sequential top-level test alone (parallel tests wait until every
// sequential one has finished), so no other test of the suite runs beside
// it. Other processes are kept away by /tmp/bootlet-e2e.lock and the port
// check.
func TestControlPlane(t *testing.T) {
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)

	_, b, assets := startControlPlaneDaemon(t)

	started := time.Now()
	if out, err := b.CLI(t, "apply", "-f", filepath.Join(assets, "bootstrap-manifests")); err != nil {
		t.Fatalf("bootlet apply: %v\n%s", err, out)
	}

	admin := AdminClient(t, assets)
	ctx := context.Background()
	waitAPIReadyz(t, admin, 5*time.Minute)
	t.Logf("kube-apiserver /readyz ok %s after the apply", time.Since(started).Round(time.Millisecond))

	// The real kubectl, with the rendered admin kubeconfig.
	kubectl := Bin(t, "kubectl")
	kc := filepath.Join(assets, "admin.conf")
	if out, err := exec.Command(kubectl, "--kubeconfig", kc, "create", "namespace", "e2e-cp").CombinedOutput(); err != nil {
		t.Fatalf("kubectl create namespace: %v\n%s", err, out)
	}
	if _, err := admin.CoreV1().Namespaces().Get(ctx, "e2e-cp", metav1.GetOptions{}); err != nil {
		t.Fatalf("namespace e2e-cp after kubectl create: %v", err)
	}

	// Leases: both controllers elected themselves leader.
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		Eventually(t, 3*time.Minute, func() (bool, string) {
			l, err := admin.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Sprintf("lease kube-system/%s: %v", name, err)
			}
			holder := ptr.Deref(l.Spec.HolderIdentity, "")
			return holder != "", fmt.Sprintf("lease kube-system/%s has no holder", name)
		})
	}

	// The controller-manager's deployment controller makes the ReplicaSet.
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "e2e-cp"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "web", Image: busybox, Command: []string{"sleep", "infinity"}}}},
			},
		},
	}
	created, err := admin.AppsV1().Deployments("e2e-cp").Create(ctx, dep, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	Eventually(t, 2*time.Minute, func() (bool, string) {
		rss, err := admin.AppsV1().ReplicaSets("e2e-cp").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		for _, rs := range rss.Items {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == created.UID {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no ReplicaSet owned by deployment e2e-cp/web (%d ReplicaSets)", len(rss.Items))
	})

	// All four bootstrap pods Running and Ready, in bootlet's own API and CLI.
	var out string
	Eventually(t, 2*time.Minute, func() (bool, string) {
		out, err = b.CLI(t, "get", "pods", "-n", "kube-system")
		if err != nil {
			return false, fmt.Sprintf("bootlet get pods: %v\n%s", err, out)
		}
		return allRunningReady(out) == nil, fmt.Sprintf("%v\n%s", allRunningReady(out), out)
	})
	t.Logf("bootlet get pods -n kube-system:\n%s", out)
	for _, p := range ControlPlanePods {
		pod := b.Pod(t, "kube-system", p)
		if !Running(pod) || !Ready(pod) {
			t.Errorf("pod %s: want Running and Ready in bootlet's API, got %s", pod.Name, statusSummary(pod))
		}
	}

	// kubectl logs through bootlet's API (bootlet's kubeconfig, not the
	// apiserver's: the apiserver knows no node to proxy logs from).
	k := newKubectlEnv(t, b)
	logs := k.must(t, "", "logs", "-n", "kube-system", "kube-apiserver")
	if !strings.Contains(logs, "Serving securely on") {
		t.Fatalf("kubectl logs kube-apiserver through bootlet: no \"Serving securely on\" line in:\n%s", tail(logs, 3000))
	}
}

// allRunningReady checks `bootlet get pods` output: every bootstrap pod is
// listed with READY 1/1 and STATUS Running.
func allRunningReady(out string) error {
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 3 {
			rows[f[0]] = f
		}
	}
	for _, p := range ControlPlanePods {
		f, ok := rows[p]
		if !ok {
			return fmt.Errorf("pod %s not listed", p)
		}
		if f[1] != "1/1" || f[2] != "Running" {
			return fmt.Errorf("pod %s: READY %s STATUS %s, want 1/1 Running", p, f[1], f[2])
		}
	}
	return nil
}

func TestAllRunningReady(t *testing.T) {
	const header = "NAME                      READY   STATUS    RESTARTS   AGE\n"
	all := header + "etcd                      1/1     Running   0          1m\n" +
		"kube-apiserver            1/1     Running   0          1m\n" +
		"kube-controller-manager   1/1     Running   1          1m\n" +
		"kube-scheduler            1/1     Running   0          1m\n"
	for _, tc := range []struct {
		name, out string
		ok        bool
	}{
		{"all four", all, true},
		{"one not ready", strings.Replace(all, "kube-scheduler            1/1", "kube-scheduler            0/1", 1), false},
		{"one pending", strings.Replace(all, "etcd                      1/1     Running", "etcd                      0/1     Pending", 1), false},
		{"one missing", strings.Replace(all, "kube-apiserver            1/1     Running   0          1m\n", "", 1), false},
		{"runtime names are not API names", strings.ReplaceAll(all, "etcd ", "etcd-n "), false},
		{"header only", header, false},
	} {
		if err := allRunningReady(tc.out); (err == nil) != tc.ok {
			t.Errorf("%s: allRunningReady = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
