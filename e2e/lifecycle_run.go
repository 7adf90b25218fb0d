//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/pivot"
	btypes "github.com/bootlet/bootlet/types"
)

// lifecycleUpgradeGateTimeout is bootlet's --upgrade-gate-timeout in the
// lifecycle: long enough for a real step under the race detector (the
// apiserver's takes about 45 s, the controller-manager's up to a minute),
// short enough for a rollback test to wait it out.
const lifecycleUpgradeGateTimeout = 2 * time.Minute

// lifecycleWithdrawAfter is bootlet's --checkpointer-withdraw-after in the
// lifecycle: how long a self-hosted apiserver must be Ready before its
// checkpoint is withdrawn.
const lifecycleWithdrawAfter = 10 * time.Second

// HandoffNumbers are the lifecycle's handoff numbers, as RunLifecycle measures
// and logs them (its STEP lines) and as the bench writes them
// (handoff.json).
type HandoffNumbers struct {
	// ColdBootstrap: bootlet's start to the bootstrap apiserver's /readyz,
	// images already imported (cold_bootstrap_seconds).
	ColdBootstrap time.Duration
	// Adoption: the kubelet's start to all four bootstrap pods owned by
	// kubelet-static.
	Adoption time.Duration
	// ContainerRestarts: the sum of the adopted containers' restartCounts
	// in the kubelet's view (container_restarts_on_adoption).
	ContainerRestarts int
	// ProbeRequests, FailedRequests: the 50 ms probe client's requests and
	// failures from before the adoption to 3 s after the pivot
	// (failed_requests_during_pivot).
	ProbeRequests, FailedRequests int
	// NewConnRequests, NewConnNotAnswered: the new-connection-per-request
	// probe client's requests over the same time, and those no serving
	// apiserver answered (ProbeResult.NotAnswered).
	NewConnRequests, NewConnNotAnswered int
	// Pivot: the adoption done to the last bootstrap pod withdrawn
	// (pivot_seconds).
	Pivot time.Duration
	// RebootToReadyz, RebootToSelfHosted: the power-on (containerd's
	// start) to /readyz through the checkpoint, and to the control plane
	// self-hosted again with the checkpoint apiserver no longer serving
	// (reboot_to_readyz_seconds, reboot_to_selfhosted_seconds).
	// RebootToWithdrawn: to the checkpoint pod withdrawn, the earlier
	// definition (reboot_to_withdrawn_seconds); RebootToCheckpointGone: to
	// the checkpoint pod gone from bootlet (reboot_to_checkpoint_gone_seconds).
	RebootToReadyz, RebootToSelfHosted, RebootToWithdrawn, RebootToCheckpointGone time.Duration
	// Reboot is where the reboot's time went.
	Reboot RebootTimes
}

// ColdToSelfHosted is the cold start to self-hosted the reboot compares
// with: the cold bootstrap, the adoption and the pivot, each measured from
// its own start (cold_to_selfhosted_seconds).
func (n HandoffNumbers) ColdToSelfHosted() time.Duration {
	return n.ColdBootstrap + n.Adoption + n.Pivot
}

// LifecycleRun is the node RunLifecycle leaves: self-hosted again after one
// reboot, its apiserver checkpointed. Everything in it stops with t's
// cleanups.
type LifecycleRun struct {
	C      *Containerd
	B      *Bootlet
	K      *Kubelet
	Assets string
	Admin  string // the admin kubeconfig
	// Unit is the kubelet's KubeletUnit (WithKubeletUnit), else nil.
	Unit        *KubeletUnit
	AdminClient *kubernetes.Clientset
	Image       string // the self-hosted apiserver's image, the checkpoint's
	Numbers     HandoffNumbers
}

// RunLifecycle is steps 1 to 5 of the single-master lifecycle with
// the real kubelet (TestLifecycle's doc comment says what each checks):
// first boot, adoption with 0 restarts, the pivot under the 50 ms probe
// client (RunPivot), the self-hosted apiserver's checkpoint stored, one
// reboot back to self-hosted. Every check fails t; step names the step it
// is in, for the caller's failure report. TestLifecycle goes on from here;
// the bench (e2e/bench, handoff.json) reports the numbers. It binds fixed
// host ports: no t.Parallel.
func RunLifecycle(t testing.TB, step *string) *LifecycleRun {
	lc := RunPivot(t, step)
	ctx := context.Background()
	c, b, k, adminClient := lc.C, lc.B, lc.K, lc.AdminClient

	// 4. The checkpoint of the self-hosted apiserver.
	*step = "4 checkpoint stored"
	ds, err := adminClient.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Spec.Template.Annotations[btypes.AnnotationCheckpoint] != "true" {
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
	*step = "5 reboot"
	rb := rebootAndComeBack(t, c, b, k, adminClient, origImage)
	n := &lc.Numbers
	n.RebootToReadyz, n.RebootToSelfHosted, n.RebootToWithdrawn, n.RebootToCheckpointGone, n.Reboot = rb.ToReadyz, rb.ToSelfHosted, rb.ToWithdrawn, rb.ToGone, rb.Times
	t.Logf("STEP 5 reboot: reboot_to_readyz_seconds=%.1f reboot_to_selfhosted_seconds=%.1f (withdrawn %.1f, gone %.1f) cold_bootstrap_seconds=%.1f cold_to_selfhosted_seconds=%.1f ratio %.2f",
		rb.ToReadyz.Seconds(), rb.ToSelfHosted.Seconds(), rb.ToWithdrawn.Seconds(), rb.ToGone.Seconds(), n.ColdBootstrap.Seconds(),
		n.ColdToSelfHosted().Seconds(), rb.ToSelfHosted.Seconds()/n.ColdToSelfHosted().Seconds())

	lc.Image = origImage
	return lc
}

// PivotOption changes how RunPivot sets the node up.
type PivotOption func(*pivotOptions)

type pivotOptions struct{ kubeletUnit bool }

// WithKubeletUnit runs the kubelet as a KubeletUnit's, and bootlet with
// its node agent on that unit: the upgrade tests' node.
func WithKubeletUnit() PivotOption { return func(o *pivotOptions) { o.kubeletUnit = true } }

// RunPivot is steps 1 to 3 of RunLifecycle: a fresh node's first boot, the
// adoption with 0 restarts, and the pivot to self-hosted under the 50 ms
// probe clients, asserted at 0 failed requests. It returns the
// self-hosted node (Image and the reboot's numbers empty); the bench
// (handoff.json, "pivots") runs it once per pivot.
func RunPivot(t testing.TB, step *string, opts ...PivotOption) *LifecycleRun {
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)
	var o pivotOptions
	for _, opt := range opts {
		opt(&o)
	}

	c, k, assets := StartControlPlaneNode(t)
	var unit *KubeletUnit
	if o.kubeletUnit {
		unit = k.AsUnit(t)
	}
	admin := filepath.Join(assets, "admin.conf")

	// 1. First boot.
	*step = "1 first boot"
	bootletStart := time.Now()
	b := StartLifecycleBootlet(t, c, k, assets)
	// The bootstrap pods come from --manifests-dir, as in the bootstrap
	// bench: every start applies it, also after the reboots, when the
	// pivot's record must keep the withdrawn bootstrap pods out.
	adminClient := AdminClient(t, assets)
	waitAPIReadyz(t, adminClient, 5*time.Minute)
	coldBootstrap := time.Since(bootletStart)
	uids := WaitControlPlaneReady(t, b)
	t.Logf("STEP 1 first boot: bootlet start -> kube-apiserver /readyz %s (cold_bootstrap_seconds)", coldBootstrap.Round(time.Millisecond))

	// 2. Adoption, 0 restarts. The probes and the endpoints watch run from
	// here to the end of the pivot.
	*step = "2 adoption"
	cpu := StartCPUSampler(t, 250*time.Millisecond)
	probesStart := time.Now()
	probe := StartProber(t, "keep-alive", admin, true)
	fresh := StartProber(t, "new connection per request", admin, false)
	eps := WatchKubernetesEndpoints(t, admin)
	adoption := AdoptControlPlane(t, b, c, k, uids)
	kubeletStart, adopted, restarts := adoption.KubeletStart, adoption.Adopted, adoption.Restarts
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("STEP 2 adoption: the kubelet adopted the 4 bootstrap pods %s after its start, container_restarts_on_adoption=%d",
		adopted.Sub(kubeletStart).Round(time.Millisecond), restarts)

	// 3. The pivot.
	*step = "3 pivot"
	WaitBootstrapWithdrawn(t, b, adminClient, pivoted)
	pivotDone := time.Now()
	time.Sleep(3 * time.Second)
	res, freshRes := probe.Stop(), fresh.Stop()
	cpu.Stop()
	eps.Stop()
	_, _, _, empties, werrs := eps.Report()
	if res.Requests < 100 || res.Failed != 0 {
		t.Errorf("the keep-alive probe client saw %d failed requests of %d during the adoption and the pivot:\n%s%s", res.Failed, res.Requests, strings.Join(res.Failures, "\n"), explainWindows(cpu, res))
	}
	// The client that connects anew for each request: no connection may
	// reach a listener that does not serve (the port hand-over). A body
	// slower than its 1 s timeout from an apiserver that answered is the
	// machine's load, reported, not the hand-over's failure.
	if freshRes.Requests < 100 || freshRes.NotAnswered() != 0 {
		t.Errorf("the new-connection probe client saw %d requests no apiserver answered, of %d, during the adoption and the pivot:\n%s%s", freshRes.NotAnswered(), freshRes.Requests, strings.Join(freshRes.Failures, "\n"), explainWindows(cpu, freshRes))
	}
	if len(empties) > 0 || len(werrs) > 0 {
		t.Errorf("default/kubernetes listed no address during the pivot: %v (watch errors %v)", empties, werrs)
	}
	waitSelfHosted(t, adminClient, b, k.NodeName, time.Time{}, true, "", 3*time.Minute)
	if t.Failed() {
		t.FailNow()
	}
	if r, err := pivot.ReadDone(pivot.RecordPath(b.Dir)); err != nil || r == nil || len(r.Components) != len(pivoted) {
		t.Fatalf("bootlet recorded no completed pivot in %s: %+v %v", pivot.RecordPath(b.Dir), r, err)
	}
	t.Logf("STEP 3 pivot: pivot_seconds=%.1f failed_requests_during_pivot=%d of %d (keep-alive), %d of %d (new connection per request; %d of them answered, but slower than 1 s)%s",
		pivotDone.Sub(adopted).Seconds(), res.Failed, res.Requests, freshRes.Failed, freshRes.Requests, freshRes.SlowAnswers, failuresSuffix(freshRes))
	t.Logf("CPU during the adoption and the pivot: %s", cpu.Around(probesStart, pivotDone, 8))
	t.Logf("bootlet status after the pivot:\n%s", WaitNodePhase(t, b, "self-hosted", 30*time.Second))

	return &LifecycleRun{C: c, B: b, K: k, Unit: unit, Assets: assets, Admin: admin, AdminClient: adminClient,
		Numbers: HandoffNumbers{ColdBootstrap: coldBootstrap, Adoption: adopted.Sub(kubeletStart), ContainerRestarts: restarts,
			ProbeRequests: res.Requests, FailedRequests: res.Failed, NewConnRequests: freshRes.Requests, NewConnNotAnswered: freshRes.NotAnswered(),
			Pivot: pivotDone.Sub(adopted)}}
}

// WaitControlPlaneReady waits until each of bootlet's ControlPlanePods is
// Running and Ready and returns their UIDs, by name.
func WaitControlPlaneReady(t testing.TB, b *Bootlet) map[string]string {
	t.Helper()
	uids := map[string]string{}
	for _, n := range ControlPlanePods {
		p := b.WaitPod(t, "kube-system", n, 3*time.Minute, "Running and Ready", func(p *v1.Pod) bool { return Running(p) && Ready(p) })
		uids[n] = string(p.UID)
	}
	return uids
}

// lifecycleBootletArgs are the daemon's flags in the lifecycle: the
// bootstrap pods from render's bootstrap-manifests, the handoff to k, the
// pivot to render's self-hosted objects, the checkpointer.
func lifecycleBootletArgs(k *Kubelet, assets string) []string {
	return []string{
		"--kubelet-healthz-url", fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort),
		"--kubelet-static-pod-path", k.ManifestDir,
		"--kubelet-root-dir", k.RootDir,
		"--pivot-kubeconfig", filepath.Join(assets, "admin.conf"),
		"--self-hosted-assets", filepath.Join(assets, "self-hosted"),
		"--checkpointer-kubeconfig", filepath.Join(assets, manifests.CheckpointerKubeconfig),
		"--checkpointer-withdraw-after", lifecycleWithdrawAfter.String(),
		"--upgrade-gate-timeout", lifecycleUpgradeGateTimeout.String(),
		"--kubelet-binary", kubeletUnitBinary(k),
		"--kubelet-restart-command", kubeletUnitRestart(k),
		"--manifests-dir", filepath.Join(assets, "bootstrap-manifests")}
}

// StartLifecycleBootlet starts bootlet as the lifecycle runs it: the
// bootstrap pods from render's bootstrap-manifests, the handoff to k, the
// pivot to render's self-hosted objects, the checkpointer.
func StartLifecycleBootlet(t testing.TB, c *Containerd, k *Kubelet, assets string) *Bootlet {
	t.Helper()
	b := StartBootlet(t, c, lifecycleBootletArgs(k, assets)...)
	if b.NodeName != k.NodeName {
		t.Fatalf("bootlet's node %s is not the kubelet's %s", b.NodeName, k.NodeName)
	}
	reportCheckpointerAtCleanup(t, b, k)
	return b
}

// AdoptControlPlane starts the kubelet k beside the control plane bootlet
// runs (uids: each of ControlPlanePods' UID) and waits until the kubelet has
// adopted every pod (owner kubelet-static). Any container restart, or any
// change of the runtime's sandboxes and containers, fails t. It returns the
// kubelet's start, the moment of the adoption, the restart count and the
// runtime's objects before the kubelet started (handoffSnapshot).
func AdoptControlPlane(t testing.TB, b *Bootlet, c *Containerd, k *Kubelet, uids map[string]string) Adoption {
	t.Helper()
	time.Sleep(2 * time.Second) // let status and init GC settle
	before := handoffSnapshot(t, c, uids)
	kubeletStart := time.Now()
	k.Start(t)
	Eventually(t, 2*time.Minute, func() (bool, string) {
		var not []string
		for _, n := range ControlPlanePods {
			if o := b.Pod(t, "kube-system", n).Annotations[btypes.AnnotationOwner]; o != "kubelet-static" {
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
	return Adoption{KubeletStart: kubeletStart, Adopted: adopted, Restarts: restarts, Before: before}
}

// Adoption is what AdoptControlPlane measured.
type Adoption struct {
	KubeletStart, Adopted time.Time
	Restarts              int
	Before                string
}

// WaitBootstrapWithdrawn waits for the pivot: each pivoted bootstrap pod
// withdrawn once its self-hosted pod took over, and gone from bootlet's API
// once nothing of it runs.
func WaitBootstrapWithdrawn(t testing.TB, b *Bootlet, adminClient kubernetes.Interface, pivoted []string) {
	t.Helper()
	ctx := context.Background()
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
}
