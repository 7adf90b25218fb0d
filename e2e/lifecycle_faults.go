//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Fault trials (`make bench` faults.json): the single-master
// lifecycle with one process SIGKILLed at a random moment of one of its
// steps, restarted as the node's supervisor would, and the checks that the
// node still converges to self-hosted, that no acknowledged object is lost
// and that no container that should have kept running was restarted. The
// trial's node and its supervisor are lifecycle_faults_node.go, the writer
// whose acknowledged objects must survive lifecycle_faults_writer.go.

// FaultStep is a step of the lifecycle a trial strikes in.
type FaultStep string

// The steps, each with the window its fault falls in (from the step's
// start; Window).
const (
	StepFirstBoot  FaultStep = "first-boot"            // bootlet's start to the control plane Running and Ready
	StepAdoption   FaultStep = "adoption"              // the kubelet's start to the adoption of the bootstrap pods
	StepPivot      FaultStep = "pivot"                 // the adoption to the bootstrap pods withdrawn
	StepUpgrade    FaultStep = "upgrade"               // `kubectl set image ds/kube-apiserver` to the new pod alone
	StepReboot     FaultStep = "reboot"                // the power-on to /readyz through the checkpoint
	StepWithdrawal FaultStep = "checkpoint-withdrawal" // /readyz through the checkpoint to the checkpoint withdrawn
)

// FaultSteps are all the steps, in lifecycle order.
var FaultSteps = []FaultStep{StepFirstBoot, StepAdoption, StepPivot, StepUpgrade, StepReboot, StepWithdrawal}

// Window is how long after the step's start its fault may fall: about the
// step's own length on this 2-core machine.
func (s FaultStep) Window() time.Duration {
	switch s {
	case StepFirstBoot:
		return 8 * time.Second
	case StepAdoption:
		return 4 * time.Second
	case StepPivot, StepUpgrade:
		return 30 * time.Second
	case StepReboot:
		return 10 * time.Second
	default:
		return 15 * time.Second
	}
}

// The victims: the node's three services and a control-plane container.
const (
	VictimBootlet    = "bootlet"
	VictimKubelet    = "kubelet"
	VictimContainerd = "containerd"
	VictimContainer  = "container"
)

// FaultVictims are the victims a step can have: the kubelet does not run
// during the first boot.
func FaultVictims(s FaultStep) []string {
	if s == StepFirstBoot {
		return []string{VictimBootlet, VictimContainerd, VictimContainer}
	}
	return []string{VictimBootlet, VictimKubelet, VictimContainerd, VictimContainer}
}

// FaultConvergeBound is the bound a trial's node has, from the fault, to be
// self-hosted again. The slowest path of a lifecycle without faults is a
// reboot's checkpoint withdrawal, about a minute here; a supervisor's
// restart and a kubelet's crash-loop back-off (10 s, doubling) come on top.
const FaultConvergeBound = 5 * time.Minute

// FaultResult is one trial, as faults.json records it.
type FaultResult struct {
	Trial  int       `json:"trial"`
	Step   FaultStep `json:"step"`
	Victim string    `json:"victim"`
	// Target names what was killed: a container's pod/name and ID, a pid.
	Target string `json:"target"`
	// KilledAfter is the fault's moment from the step's start.
	KilledAfter float64 `json:"killed_after_step_start_seconds"`
	// Converged: self-hosted again within FaultConvergeBound of the fault;
	// ConvergeSeconds from the fault.
	Converged       bool    `json:"converged"`
	ConvergeSeconds float64 `json:"converge_seconds"`
	NotConverged    string  `json:"not_converged,omitempty"` // the last unmet condition
	// ConfigMapsAcked were acknowledged (201) by the apiserver before and
	// during the step; ConfigMapsLost of them are missing at the end.
	ConfigMapsAcked int      `json:"configmaps_acknowledged"`
	ConfigMapsLost  []string `json:"configmaps_lost,omitempty"`
	// RunningAtFault were running when the fault struck; Restarted of them
	// are not running any more although their pod still is (not the
	// victim's own container).
	RunningAtFault int      `json:"containers_running_at_fault"`
	Restarted      []string `json:"containers_restarted,omitempty"`
	// SupervisorRestarts are the services that exited after the fault's
	// own restart and that the supervisor started again.
	SupervisorRestarts []string `json:"supervisor_restarts,omitempty"`
	// Logs is where the node's logs were kept (a trial that is not OK).
	Logs    string  `json:"logs,omitempty"`
	Seconds float64 `json:"trial_seconds"`
}

// OK is a trial that converged, lost nothing and restarted nothing.
func (r FaultResult) OK() bool {
	return r.Converged && len(r.ConfigMapsLost) == 0 && len(r.Restarted) == 0
}

// RunFaultTrial runs the lifecycle up to step, starts the step, and at
// killAfter into it SIGKILLs victim (a random running control-plane
// container for VictimContainer, chosen with rng); a second later the
// supervisor starts the killed service again. Then it waits for the node to
// be self-hosted and checks what was written and what ran. Setup failures
// before the fault fail t; what happens after it is the result.
func RunFaultTrial(t testing.TB, rng *rand.Rand, trial int, step FaultStep, victim string, killAfter time.Duration) FaultResult {
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)
	began := time.Now()
	res := FaultResult{Trial: trial, Step: step, Victim: victim, KilledAfter: killAfter.Seconds()}
	n := &faultNode{t: t, restartSec: shippedRestartSec(t)}
	n.c, n.k, n.assets = StartControlPlaneNode(t)
	n.admin = faultAdminClient(t, n.assets)
	n.b = NewBootlet(t, n.c, lifecycleBootletArgs(n.k, n.assets)...)
	reportCheckpointerAtCleanup(t, n.b, n.k)
	w := startConfigMapWriter(n.admin)
	defer w.stop()

	// The lifecycle up to the step, each part checked as RunLifecycle does.
	if step != StepFirstBoot {
		n.b.Start(t)
		waitAPIReadyz(t, n.admin, 5*time.Minute)
		uids := WaitControlPlaneReady(t, n.b)
		if step != StepAdoption {
			AdoptControlPlane(t, n.b, n.c, n.k, uids)
			n.kubeletUp = true
		}
	}
	if step == StepUpgrade || step == StepReboot || step == StepWithdrawal {
		WaitBootstrapWithdrawn(t, n.b, n.admin, pivoted)
		waitSelfHosted(t, n.admin, n.b, n.k.NodeName, time.Time{}, true, "", 3*time.Minute)
		ds, err := n.admin.AppsV1().DaemonSets("kube-system").Get(context.Background(), "kube-apiserver", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.image = containerImage(&ds.Spec.Template.Spec, "kube-apiserver")
		waitCheckpoint(t, n.b, n.admin, n.k.NodeName, n.image, 2*time.Minute)
	}
	if step != StepFirstBoot {
		w.waitAcked(t, 5) // written before the step
	}

	// The step's start.
	var start time.Time
	switch step {
	case StepFirstBoot:
		start = time.Now()
		n.b.Spawn(t)
	case StepAdoption:
		time.Sleep(2 * time.Second) // as AdoptControlPlane: status and init GC settle
		start = time.Now()
		n.k.Spawn(t)
		n.kubeletUp = true
	case StepPivot:
		start = time.Now() // the adoption is done: the pivot runs
	case StepUpgrade:
		newImage := n.image + "-fault"
		TagImage(t, n.c, n.image, newImage)
		start = time.Now()
		kubectl(t, filepath.Join(n.assets, "admin.conf"), "-n", "kube-system", "set", "image", "ds/kube-apiserver", "kube-apiserver="+newImage)
		n.image = newImage
	case StepReboot, StepWithdrawal:
		n.k.Kill9()
		SimulateReboot(t, n.c, n.b)
		start = time.Now()
		n.c.Restart(t)
		n.b.Spawn(t)
		n.k.Spawn(t)
		if step == StepWithdrawal {
			waitAPIReadyz(t, n.admin, 5*time.Minute)
			start = time.Now()
		}
	}

	// The fault, then the supervisor's restart.
	time.Sleep(time.Until(start.Add(killAfter)))
	faultAt := time.Now()
	res.KilledAfter = round2(faultAt.Sub(start).Seconds())
	before := runningNow(n.c)
	res.RunningAtFault = len(before)
	var victimID string
	res.Target, victimID = n.kill(rng, victim)
	if victim != VictimContainer {
		time.Sleep(n.restartSec[victim])
	}
	n.restart(victim)

	// Converge: self-hosted again, the rest of the lifecycle included.
	var why string
	res.Converged, why = n.converge(faultAt.Add(FaultConvergeBound))
	if !res.Converged {
		res.NotConverged = why
	}
	res.ConvergeSeconds = round2(time.Since(faultAt).Seconds())
	res.SupervisorRestarts = n.restarts
	w.stop()
	res.ConfigMapsAcked, res.ConfigMapsLost = w.verify(n.admin)
	if res.Converged {
		res.Restarted = n.restartedSince(before, victimID)
	}
	if !res.OK() {
		res.Logs = keepLogs(n.c.Dir, fmt.Sprintf("trial-%d", trial))
	}
	res.Seconds = round2(time.Since(began).Seconds())
	return res
}

// keepLogs copies the node's logs (bootlet's and the kubelet's, one per
// start, and bootlet's pod logs) to _output/bench/faults-logs/NAME before
// the trial's cleanup removes the node's directory.
func keepLogs(dir, name string) string {
	dst := filepath.Join(Repo, "_output", "bench", "faults-logs", name)
	_ = os.RemoveAll(dst)
	_ = os.MkdirAll(dst, 0o755)
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, l := range logs {
		if data, err := os.ReadFile(l); err == nil {
			_ = os.WriteFile(filepath.Join(dst, filepath.Base(l)), data, 0o644)
		}
	}
	_ = exec.Command("cp", "-a", filepath.Join(dir, "pod-logs"), dst).Run()
	return dst
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

// shippedRestartSec reads each service's RestartSec from the systemd units
// bootlet ships (dist/systemd), so the trial's supervisor waits as a node's
// systemd would.
func shippedRestartSec(t testing.TB) map[string]time.Duration {
	out := map[string]time.Duration{}
	for svc, unit := range map[string]string{VictimBootlet: "bootlet.service", VictimContainerd: "bootlet-containerd.service", VictimKubelet: "bootlet-kubelet.service"} {
		data, err := os.ReadFile(filepath.Join(Repo, "dist", "systemd", unit))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "RestartSec="); ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					d, err = time.ParseDuration(v + "s") // systemd's unitless seconds
				}
				if err != nil {
					t.Fatalf("%s: RestartSec=%s: %v", unit, v, err)
				}
				out[svc] = d
			}
		}
		if _, ok := out[svc]; !ok {
			t.Fatalf("%s has no RestartSec", unit)
		}
	}
	return out
}

// faultAdminClient is the admin client of the trial's checks and writes:
// a short timeout and no client-side rate limit, so that an outage shows as
// errors, not as a queue.
func faultAdminClient(t testing.TB, assets string) *kubernetes.Clientset {
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(assets, "admin.conf"))
	if err != nil {
		t.Fatalf("admin.conf: %v", err)
	}
	cfg.Timeout = 3 * time.Second
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}
