//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Helpers shared by the tests and by the bench (e2e/bench), which cannot
// import _test.go files: what RunLifecycle (lifecycle_run.go) needs. They
// were in helpers_test.go, handoff_test.go, pivot_test.go,
// checkpointer_test.go and controlplane_test.go, unchanged but for taking a
// testing.TB.

const (
	podUIDKey  = "io.kubernetes.pod.uid"
	ctrNameKey = "io.kubernetes.container.name"
)

// criContainersOf lists the CRI containers of one pod UID, oldest first.
func criContainersOf(t testing.TB, c *Containerd, uid string) []*runtimeapi.Container {
	t.Helper()
	var out []*runtimeapi.Container
	for _, ctr := range c.Containers(t) {
		if ctr.Labels[podUIDKey] == uid {
			out = append(out, ctr)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out
}

// criSandboxesOf lists the CRI sandboxes of one pod UID, oldest first.
func criSandboxesOf(t testing.TB, c *Containerd, uid string) []*runtimeapi.PodSandbox {
	t.Helper()
	var out []*runtimeapi.PodSandbox
	for _, sb := range c.Sandboxes(t) {
		if sb.Metadata.GetUid() == uid {
			out = append(out, sb)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out
}

// handoffSnapshot describes every CRI object of the given pods.
func handoffSnapshot(t testing.TB, c *Containerd, uids map[string]string) string {
	t.Helper()
	var lines []string
	for n, uid := range uids {
		for _, sb := range criSandboxesOf(t, c, uid) {
			lines = append(lines, fmt.Sprintf("%s sandbox %s attempt=%d %s", n, sb.Id, sb.Metadata.Attempt, sb.State))
		}
		for _, ctr := range criContainersOf(t, c, uid) {
			state := ctr.State
			if state != runtimeapi.ContainerState_CONTAINER_RUNNING && state != runtimeapi.ContainerState_CONTAINER_EXITED {
				state = runtimeapi.ContainerState_CONTAINER_UNKNOWN
			}
			lines = append(lines, fmt.Sprintf("%s container %s/%s attempt=%d %s sandbox=%s", n, ctr.Labels[ctrNameKey], ctr.Id, ctr.Metadata.Attempt, state, ctr.PodSandboxId))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// kubeletPods is the kubelet's /pods (its pod manager, with the status
// manager's status of static pods) keyed by UID, from its authenticated
// port, with the kubelet's client certificate (ClientCert). A non-empty
// message says why it could not be read.
func kubeletPods(t testing.TB, k *Kubelet) (map[string]v1.Pod, string) {
	client := k.APIClient(t)
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/pods", k.Port), nil)
	resp, err := client.Do(req)
	if err != nil {
		return nil, "kubelet /pods: " + err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Sprintf("kubelet /pods: %s %s", resp.Status, body)
	}
	var list v1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, "kubelet /pods: " + err.Error()
	}
	out := map[string]v1.Pod{}
	for _, p := range list.Items {
		out[string(p.UID)] = p
	}
	return out, ""
}

// kubeletView waits until the kubelet's /pods reports every pod of uids
// running, and returns it.
func kubeletView(t testing.TB, k *Kubelet, uids map[string]string) map[string]v1.Pod {
	var view map[string]v1.Pod
	Eventually(t, time.Minute, func() (bool, string) {
		var msg string
		view, msg = kubeletPods(t, k)
		if msg != "" {
			return false, msg
		}
		for n, uid := range uids {
			p, ok := view[uid]
			if !ok || !Running(&p) || len(p.Status.ContainerStatuses) == 0 {
				return false, fmt.Sprintf("the kubelet does not report %s running", n)
			}
		}
		return true, ""
	})
	return view
}

// pivoted are the bootstrap pods the pivot withdraws; etcd stays pinned.
var pivoted = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// startControlPlaneDaemon starts a private containerd with the control-plane
// images and a daemon listening on TCP, and renders a control plane for it
// (not applied); when t fails, the control plane's state is dumped.
func startControlPlaneDaemon(t testing.TB) (*Containerd, *Bootlet, string) {
	t.Helper()
	c := StartContainerd(t)
	t.Logf("imported the control-plane images in %s", ImportControlPlaneImages(t, c).Round(time.Millisecond))
	b := StartBootlet(t, c, "--listen", "127.0.0.1:0")
	assets := RenderControlPlane(t, filepath.Join(c.Dir, "assets"), filepath.Join(c.Dir, "etcd"), b.NodeName, AdvertiseAddress(t))
	t.Cleanup(func() {
		if t.Failed() {
			dumpControlPlane(t, b)
		}
	})
	return c, b, assets
}

func waitAPIReadyz(t testing.TB, admin *kubernetes.Clientset, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func() (bool, string) {
		body, err := admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err == nil && string(body) == "ok", fmt.Sprintf("kube-apiserver /readyz: %v %s", err, body)
	})
}

// reportCheckpointerAtCleanup logs, when t ends, the daemon's checkpointer
// lines, and if t failed the control plane's state, bootlet's events and
// (k not nil) the kubelet's log tail.
func reportCheckpointerAtCleanup(t testing.TB, b *Bootlet, k *Kubelet) {
	t.Cleanup(func() {
		logCheckpointerLines(t, b)
		if t.Failed() {
			dumpControlPlane(t, b)
			out, _ := b.CLI(t, "get", "events", "-A")
			t.Logf("bootlet events:\n%s", tail(out, 4000))
			if k != nil {
				t.Logf("--- kubelet log tail:\n%s", tail(k.Log(), 4000))
			}
		}
	})
}

// logCheckpointerLines logs the daemon's checkpointer lines (when it saw
// the apiserver go and come back, what it decided and why), for the
// timings in docs/bench.md.
func logCheckpointerLines(t testing.TB, b *Bootlet) {
	data, err := os.ReadFile(b.LogPath())
	if err != nil {
		t.Logf("daemon log: %v", err)
		return
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, "heckpoint") && !strings.Contains(l, "Node event") {
			lines = append(lines, l)
		}
	}
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	t.Logf("daemon checkpointer log:\n%s", strings.Join(lines, "\n"))
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// dumpControlPlane logs what a failed run needs: the pods and the tail of
// each bootstrap pod's log.
func dumpControlPlane(t testing.TB, b *Bootlet) {
	out, _ := b.CLI(t, "get", "pods", "-A", "-o", "wide")
	t.Logf("bootlet get pods -A -o wide:\n%s", out)
	for _, p := range ControlPlanePods {
		out, _ := b.CLI(t, "logs", "-n", "kube-system", p, "--tail", "25")
		t.Logf("--- %s log tail:\n%s", p, out)
	}
	t.Logf("--- bootlet daemon log tail:\n%s", tail(b.Log(), 3000))
}
