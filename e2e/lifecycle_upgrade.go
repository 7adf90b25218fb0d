//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	btypes "github.com/bootlet/bootlet/types"
)

// UpgradeResult is one rolling update of the self-hosted apiserver
// DaemonSet under the 50 ms probe clients (UpgradeAPIServer).
type UpgradeResult struct {
	From, To string
	// Took: `kubectl set image` to the new pod alone on the node, Running
	// and Ready, the old pod gone from the API (its containers stopped:
	// the kubelet deletes it only then).
	Took time.Duration
	// KeepAlive is the probe client that must see 0 failed requests
	// (HTTP/2, kept alive, no retries); NewConn opens a new connection per
	// request.
	KeepAlive, NewConn ProbeResult
}

// Failed is what the hand-over promises 0 of: the keep-alive client's
// failed requests and the new-connection client's requests no serving
// apiserver answered (a body slower than the 1 s timeout on a loaded
// machine is reported, not counted: docs/design/reuseport.md, "The probe client").
func (r UpgradeResult) Failed() int { return r.KeepAlive.Failed + r.NewConn.NotAnswered() }

// UpgradeAPIServer moves the self-hosted apiserver DaemonSet of lc's node
// to image with `kubectl set image` (maxSurge 1: the new pod starts beside
// the old one, which the DaemonSet controller deletes once the new one is
// Ready), under both 50 ms probe clients, from before the change to 1 s
// after the old pod is gone. Any failed request fails t
// (UpgradeResult.Failed). image must be in the node's containerd
// (TagImage).
func UpgradeAPIServer(t testing.TB, lc *LifecycleRun, image string) UpgradeResult {
	t.Helper()
	ctx := context.Background()
	pods, err := selfHostedPods(ctx, lc.AdminClient, lc.K.NodeName, "kube-apiserver")
	if err != nil || len(pods) != 1 {
		t.Fatalf("want one self-hosted apiserver pod before the upgrade: %v\n%s", err, podsSummary(pods))
	}
	r := UpgradeResult{From: containerImage(&pods[0].Spec, "kube-apiserver"), To: image}
	if r.From == image {
		t.Fatalf("the self-hosted apiserver already runs %s", image)
	}
	logFrom := fileSize(lc.B.logPath)
	probe := StartProber(t, "keep-alive during the upgrade", lc.Admin, true)
	fresh := StartProber(t, "new connection per request during the upgrade", lc.Admin, false)
	start := time.Now()
	kubectl(t, lc.Admin, "-n", "kube-system", "set", "image", "ds/kube-apiserver", "kube-apiserver="+image)
	Eventually(t, 5*time.Minute, func() (bool, string) {
		pods, err := selfHostedPods(ctx, lc.AdminClient, lc.K.NodeName, "kube-apiserver")
		if err != nil {
			return false, err.Error()
		}
		ok := len(pods) == 1 && containerImage(&pods[0].Spec, "kube-apiserver") == image && Running(&pods[0]) && Ready(&pods[0]) && pods[0].DeletionTimestamp == nil
		return ok, "self-hosted apiserver pods during the upgrade:\n" + podsSummary(pods)
	})
	r.Took = time.Since(start)
	time.Sleep(time.Second)
	r.KeepAlive, r.NewConn = probe.Stop(), fresh.Stop()
	checkServingGate(t, lc, logFrom)
	if r.KeepAlive.Requests < 100 || r.KeepAlive.Failed != 0 {
		t.Errorf("the keep-alive probe client saw %d failed requests of %d during the upgrade %s -> %s:\n%s",
			r.KeepAlive.Failed, r.KeepAlive.Requests, r.From, r.To, strings.Join(r.KeepAlive.Failures, "\n"))
	}
	if r.NewConn.Requests < 100 || r.NewConn.NotAnswered() != 0 {
		t.Errorf("the new-connection probe client saw %d requests no apiserver answered, of %d, during the upgrade %s -> %s:\n%s",
			r.NewConn.NotAnswered(), r.NewConn.Requests, r.From, r.To, strings.Join(r.NewConn.Failures, "\n"))
	}
	return r
}

// kubectl runs _output/bin/kubectl with kubeconfig.
func kubectl(t testing.TB, kubeconfig string, args ...string) string {
	t.Helper()
	cmd := exec.Command(Bin(t, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkServingGate: the new apiserver pod is Ready through its serving
// gate, which bootlet set True itself
// (docs/design/servinggate.md, "The rule book: `Decide`"), and logs its
// timeline: the container's start, the gate, Ready, and bootlet's log lines
// of the gate and the router since logFrom (the router retargets when the
// new process's own listener serves; the gate follows).
func checkServingGate(t testing.TB, lc *LifecycleRun, logFrom int64) {
	t.Helper()
	pods, err := selfHostedPods(context.Background(), lc.AdminClient, lc.K.NodeName, "kube-apiserver")
	if err != nil || len(pods) != 1 {
		t.Errorf("want one self-hosted apiserver pod after the upgrade: %v\n%s", err, podsSummary(pods))
		return
	}
	p := &pods[0]
	var started time.Time
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running != nil {
			started = cs.State.Running.StartedAt.Time
		}
	}
	var gate, ready *v1.PodCondition
	for i, c := range p.Status.Conditions {
		switch c.Type {
		case btypes.PodConditionServing:
			gate = &p.Status.Conditions[i]
		case v1.PodReady:
			ready = &p.Status.Conditions[i]
		}
	}
	if gate == nil || gate.Status != v1.ConditionTrue || ready == nil || ready.Status != v1.ConditionTrue {
		t.Errorf("pod %s after the upgrade: serving gate %+v, Ready %+v; want both True, the gate set by bootlet", p.Name, gate, ready)
		return
	}
	t.Logf("UPGRADE serving gate of %s: container started %s, gate True %s (+%s, %s: %s), Ready %s (+%s)", p.Name,
		started.Format(time.RFC3339), gate.LastTransitionTime.Format(time.RFC3339), gate.LastTransitionTime.Sub(started), gate.Reason, gate.Message,
		ready.LastTransitionTime.Format(time.RFC3339), ready.LastTransitionTime.Sub(started))
	data, _ := os.ReadFile(lc.B.logPath)
	if logFrom > int64(len(data)) {
		logFrom = 0
	}
	var lines []string
	for _, l := range strings.Split(string(data[logFrom:]), "\n") {
		if strings.Contains(l, "Serving gate") || strings.Contains(l, "reuseport: route") {
			lines = append(lines, l)
		}
	}
	t.Logf("UPGRADE bootlet's serving gate and router during the upgrade:\n%s", strings.Join(lines, "\n"))
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
