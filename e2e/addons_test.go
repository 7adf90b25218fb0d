//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// TestClusterAddons is the cluster around the control plane (the pod
// network, kube-proxy, CoreDNS), on the
// lifecycle make up runs: first boot through bootlet, the kubelet's
// adoption, the pivot, which also creates the add-ons (flannel as the pod
// network, kube-proxy, CoreDNS); then a Deployment behind a Service, and a
// client pod that reaches it by ClusterIP, by name and by short name,
// resolves kubernetes.default and reaches https://kubernetes.default.svc
// with its service account's CA; every pod address is in the node's
// podCIDR. Then a simulated reboot, and all of it again, timed from the
// power-on. It binds the control plane's host ports and flannel's devices:
// no t.Parallel.
func TestClusterAddons(tt *testing.T) {
	t := NewFailureRecorder(tt)
	step := "0 setup"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("TestClusterAddons FAILED in step %s:\n%s", step, strings.Join(t.Failures(), "\n"))
		}
	})
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)
	ctx := context.Background()
	c, k, assets := StartAddonsNode(t)

	step = "1 first boot"
	start := time.Now()
	b := StartLifecycleBootlet(t, c, k, assets)
	adminClient := AdminClient(t, assets)
	waitAPIReadyz(t, adminClient, 5*time.Minute)
	uids := WaitControlPlaneReady(t, b)

	step = "2 adoption"
	adoption := AdoptControlPlane(t, b, c, k, uids)
	if adoption.Restarts != 0 || t.Failed() {
		t.Fatalf("the adoption restarted %d containers", adoption.Restarts)
	}

	step = "3 pivot"
	WaitBootstrapWithdrawn(t, b, adminClient, pivoted)
	waitSelfHosted(t, adminClient, b, k.NodeName, time.Time{}, true, "", 3*time.Minute)
	selfHosted := time.Since(start)

	step = "4 add-ons Ready"
	waitAddonsReady(t, adminClient, k.NodeName, time.Time{}, 5*time.Minute)
	addonsReady := time.Since(start)
	t.Logf("STEP 4: bootlet start -> self-hosted %s -> add-ons Ready %s", selfHosted.Round(time.Millisecond), addonsReady.Round(time.Millisecond))

	step = "5 Services and DNS"
	createWeb(t, adminClient)
	waitWebReady(t, adminClient, time.Time{})
	checkClusterNetwork(t, adminClient, k.NodeName, "first-boot")

	step = "6 reboot"
	ds, err := adminClient.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitCheckpoint(t, b, adminClient, k.NodeName, containerImage(&ds.Spec.Template.Spec, "kube-apiserver"), 2*time.Minute)
	beforeReboot := time.Now()
	rb := rebootAndComeBack(t, c, b, k, adminClient, containerImage(&ds.Spec.Template.Spec, "kube-apiserver"))
	toReadyz, toSelfHosted := rb.ToReadyz, rb.ToSelfHosted
	// The power-on is a moment after beforeReboot (the power-off takes a
	// few seconds); Ready conditions are compared with it.
	waitAddonsReady(t, adminClient, k.NodeName, beforeReboot, 5*time.Minute)
	waitWebReady(t, adminClient, beforeReboot)
	checkClusterNetwork(t, adminClient, k.NodeName, "after-reboot")
	t.Logf("STEP 6 reboot: power-off+on -> /readyz %s, -> self-hosted %s, -> Services and DNS work again %s (from the power-off)",
		toReadyz.Round(time.Millisecond), toSelfHosted.Round(time.Millisecond), time.Since(beforeReboot).Round(time.Millisecond))
	step = "done"
}

// waitAddonsReady waits until the node is Ready and flannel, kube-proxy
// and CoreDNS each have a pod Running and Ready on it whose Ready condition
// turned true after since.
func waitAddonsReady(t testing.TB, admin *kubernetes.Clientset, node string, since time.Time, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	Eventually(t, timeout, func() (bool, string) {
		var why []string
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if !nodeReady(n) {
			why = append(why, fmt.Sprintf("node %s is not Ready: %v", node, n.Status.Conditions))
		}
		for _, a := range []struct{ ns, selector string }{
			{"kube-flannel", "app=flannel"}, {"kube-system", "k8s-app=kube-proxy"}, {"kube-system", "k8s-app=kube-dns"},
		} {
			pods, err := admin.CoreV1().Pods(a.ns).List(ctx, metav1.ListOptions{LabelSelector: a.selector, FieldSelector: "spec.nodeName=" + node})
			if err != nil {
				return false, err.Error()
			}
			ok := false
			for i := range pods.Items {
				p := &pods.Items[i]
				if readySince(p, since) {
					ok = true
				}
			}
			if !ok {
				why = append(why, fmt.Sprintf("%s %s: no fresh Ready pod:\n%s", a.ns, a.selector, podsSummary(pods.Items)))
			}
		}
		return len(why) == 0, strings.Join(why, "\n")
	})
}

// readySince: p runs, is not being deleted, and turned Ready after since
// (a Ready status etcd kept from before a reboot does not count).
func readySince(p *v1.Pod, since time.Time) bool {
	return Running(p) && Ready(p) && p.DeletionTimestamp == nil && readyTransition(p).After(since)
}

func nodeReady(n *v1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

var webLabels = map[string]string{"app": "web"}

// createWeb is `kubectl create deployment web` (two testservers) and
// `kubectl expose deployment web --port 80 --target-port 8080`.
func createWeb(t testing.TB, admin *kubernetes.Clientset) {
	t.Helper()
	ctx := context.Background()
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: webLabels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: webLabels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: webLabels},
				Spec: v1.PodSpec{Containers: []v1.Container{{
					Name: "web", Image: "bootlet.dev/testserver:1", ImagePullPolicy: v1.PullNever,
					Ports: []v1.ContainerPort{{ContainerPort: 8080}},
					ReadinessProbe: &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{
						HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)},
					}},
				}}},
			},
		},
	}
	if _, err := admin.AppsV1().Deployments("default").Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the web Deployment: %v", err)
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: webLabels},
		Spec:       v1.ServiceSpec{Selector: webLabels, Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the web Service: %v", err)
	}
}

// waitWebReady waits until both web pods are Running and Ready, Ready
// after since.
func waitWebReady(t testing.TB, admin *kubernetes.Clientset, since time.Time) {
	t.Helper()
	Eventually(t, 5*time.Minute, func() (bool, string) {
		pods, err := admin.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if readySince(p, since) {
				ready++
			}
		}
		return ready == 2, "the web pods:\n" + podsSummary(pods.Items)
	})
}

// clientScript is what the client pod runs: each check retried for up to a
// minute (kube-proxy's and CoreDNS's first sync after a reboot), each
// answer printed under its heading; it exits non-zero at the first check
// that never passes.
const clientScript = `
try() { n=0; until "$@"; do n=$((n+1)); [ $n -ge 30 ] && echo "FAILED: $*" && return 1; sleep 2; done; }
set -e
echo "== by ClusterIP $WEB_IP"; try /testserver get -timeout 3s http://$WEB_IP/hostname
echo "== by name"; try /testserver get -timeout 3s http://web.default.svc.cluster.local/hostname
echo "== by short name"; try /testserver get -timeout 3s http://web/hostname
echo "== nslookup"; try nslookup kubernetes.default.svc.cluster.local
echo "== https://kubernetes.default.svc"; try /testserver get -timeout 3s -ca /var/run/secrets/kubernetes.io/serviceaccount/ca.crt -token-file /var/run/secrets/kubernetes.io/serviceaccount/token https://kubernetes.default.svc/version
echo "== all checks passed"
`

// checkClusterNetwork runs the client pod (clientScript) to completion and
// checks that it, and the web pods, have addresses in the node's podCIDR.
func checkClusterNetwork(t testing.TB, admin *kubernetes.Clientset, node, name string) {
	t.Helper()
	ctx := context.Background()
	svc, err := admin.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client-" + name},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever,
			Containers: []v1.Container{{
				Name: "client", Image: "bootlet.dev/testserver:1", ImagePullPolicy: v1.PullNever,
				Command: []string{"sh", "-c", clientScript},
				Env:     []v1.EnvVar{{Name: "WEB_IP", Value: svc.Spec.ClusterIP}},
			}},
		},
	}
	started := time.Now()
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the client pod: %v", err)
	}
	var done *v1.Pod
	Eventually(t, 5*time.Minute, func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		done = p
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed, "the client pod: " + statusSummary(p)
	})
	logs, err := admin.CoreV1().Pods("default").GetLogs(pod.Name, &v1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Errorf("the client pod's logs: %v", err)
	}
	if done.Status.Phase != v1.PodSucceeded {
		t.Fatalf("the client pod %s %s after %s:\n%s", pod.Name, done.Status.Phase, time.Since(started).Round(time.Millisecond), logs)
	}
	t.Logf("client pod %s: every check passed %s after its creation:\n%s", pod.Name, time.Since(started).Round(time.Millisecond), logs)

	n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, cidr, err := net.ParseCIDR(n.Spec.PodCIDR)
	if err != nil {
		t.Fatalf("node %s has no podCIDR (%q): the controller-manager allocates none", node, n.Spec.PodCIDR)
	}
	pods, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range pods.Items {
		if p.Name != pod.Name && p.Labels["app"] != "web" {
			continue
		}
		if p.Labels["app"] == "web" && !Running(&p) {
			continue
		}
		checked++
		if ip := net.ParseIP(p.Status.PodIP); ip == nil || !cidr.Contains(ip) {
			t.Errorf("pod %s has address %q, not in node %s's podCIDR %s", p.Name, p.Status.PodIP, node, cidr)
		}
	}
	if checked < 3 {
		t.Errorf("checked the addresses of %d pods, want the client and two web pods", checked)
	}
	if err := admin.CoreV1().Pods("default").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting the client pod: %v", err)
	}
}
