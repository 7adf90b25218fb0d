//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/bootlet/bootlet/pivot"
)

// Fault trials (issue 20, `make bench` faults.json): the single-master
// lifecycle with one process SIGKILLed at a random moment of one of its
// steps, restarted as the node's supervisor would, and the checks that the
// node still converges to self-hosted, that no acknowledged object is lost
// and that no container that should have kept running was restarted.

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

// faultNode is a trial's node and what the trial knows of it.
type faultNode struct {
	t      testing.TB
	c      *Containerd
	b      *Bootlet
	k      *Kubelet
	assets string
	admin  *kubernetes.Clientset
	image  string // the apiserver image the node must end on
	// kubeletUp: the kubelet has been started in this lifecycle (the
	// supervisor restarts it only then).
	kubeletUp bool
	// downSince: when supervise first saw a service down; restarts: the
	// services it started again.
	downSince map[string]time.Time
	restarts  []string
	// restartSec is each service's RestartSec, from the shipped units.
	restartSec map[string]time.Duration
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

// kill SIGKILLs the victim and returns what it killed and, for a
// container, its ID.
func (n *faultNode) kill(rng *rand.Rand, victim string) (target, containerID string) {
	switch victim {
	case VictimBootlet:
		pid := n.b.PID()
		n.b.Kill9()
		n.b.WaitExit(n.t)
		return fmt.Sprintf("bootlet pid %d", pid), ""
	case VictimKubelet:
		pid := n.k.PID()
		n.k.Kill9()
		return fmt.Sprintf("kubelet pid %d", pid), ""
	case VictimContainerd:
		pid := n.c.PID()
		n.c.KillContainerd(n.t, syscall.SIGKILL)
		return fmt.Sprintf("containerd pid %d", pid), ""
	}
	// A running control-plane container, its process SIGKILLed (the
	// container's init: the component itself).
	var cands []*runtimeapi.Container
	for _, c := range runningNow(n.c) {
		if slices.Contains(ControlPlanePods, c.Metadata.GetName()) {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return "no control-plane container was running", ""
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Id < cands[j].Id })
	c := cands[rng.Intn(len(cands))]
	pid := containerPID(n.c, c.Id)
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return fmt.Sprintf("%s/%s container %s pid %d", c.Labels["io.kubernetes.pod.name"], c.Metadata.GetName(), c.Id[:12], pid), c.Id
}

// restart is the supervisor: it starts the killed service again (a killed
// container is its runner's business: bootlet's or the kubelet's).
func (n *faultNode) restart(victim string) {
	switch victim {
	case VictimBootlet:
		n.b.Spawn(n.t)
	case VictimKubelet:
		if n.kubeletUp {
			n.k.Spawn(n.t)
		}
	case VictimContainerd:
		n.c.Restart(n.t)
	}
}

// supervise is the node's supervisor after the fault (systemd's
// Restart=always): a service whose process has ended since is started
// again once it has been down for its unit's RestartSec, whichever the
// cause (a kubelet that could not reach the killed containerd at its start
// exits).
func (n *faultNode) supervise() {
	down := map[string]bool{
		VictimContainerd: n.c.PID() == 0,
		VictimBootlet:    n.b.Exited(),
		VictimKubelet:    n.kubeletUp && n.k.Exited(),
	}
	for _, svc := range []string{VictimContainerd, VictimBootlet, VictimKubelet} { // boot order
		if !down[svc] {
			delete(n.downSince, svc)
			continue
		}
		if n.downSince == nil {
			n.downSince = map[string]time.Time{}
		}
		since, seen := n.downSince[svc]
		if !seen {
			n.downSince[svc] = time.Now()
			continue
		}
		if time.Since(since) >= n.restartSec[svc] {
			n.t.Logf("supervisor: %s has exited; starting it again", svc)
			n.restarts = append(n.restarts, svc)
			n.restart(svc)
			delete(n.downSince, svc)
		}
	}
}

// converge drives the rest of the lifecycle (the kubelet's start after a
// first boot) and waits until the node is self-hosted: every pivoted
// component's DaemonSet or Deployment pod Running and Ready on the node
// (the apiserver's on the trial's image), no bootstrap or checkpoint pod
// left in bootlet, etcd running, the pivot recorded, /readyz ok. It
// returns false and the last unmet condition at the deadline.
func (n *faultNode) converge(deadline time.Time) (bool, string) {
	ctx := context.Background()
	why := ""
	until := func(cond func() (bool, string)) bool {
		for {
			n.supervise()
			ok, w := cond()
			if ok {
				return true
			}
			why = w
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	if !n.kubeletUp {
		// A first boot: the kubelet starts once the control plane runs,
		// as RunLifecycle starts it.
		if !until(func() (bool, string) {
			for _, name := range ControlPlanePods {
				p, err := n.b.Client.CoreV1().Pods("kube-system").Get(ctx, name, metav1.GetOptions{})
				if err != nil || !Running(p) || !Ready(p) {
					return false, fmt.Sprintf("first boot: %s not Running and Ready in bootlet: %v", name, err)
				}
			}
			return true, ""
		}) {
			return false, why
		}
		n.k.Spawn(n.t)
		n.kubeletUp = true
	}
	ok := until(func() (bool, string) {
		body, err := n.admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil || string(body) != "ok" {
			return false, fmt.Sprintf("/readyz: %v %s", err, body)
		}
		// Any Ready pod counts (a Ready transition after the zero time).
		if why, err := selfHostedMissing(ctx, n.admin, n.k.NodeName, time.Time{}, true, n.image); err != nil || len(why) > 0 {
			return false, fmt.Sprintf("%v %s", err, strings.Join(why, "\n"))
		}
		l, err := n.b.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "bootlet: " + err.Error()
		}
		etcd := false
		for i := range l.Items {
			p := &l.Items[i]
			switch {
			case p.Name == "etcd":
				etcd = Running(p)
			case slices.Contains(pivoted, p.Name) || strings.HasSuffix(p.Name, "-checkpoint"):
				return false, "bootlet still runs " + p.Name + ": " + statusSummary(p)
			}
		}
		if !etcd {
			return false, "etcd is not running in bootlet"
		}
		if r, err := pivot.ReadDone(pivot.RecordPath(n.b.Dir)); err != nil || r == nil {
			return false, fmt.Sprintf("no pivot record: %v", err)
		}
		return true, ""
	})
	return ok, why
}

// restartedSince lists the containers of before that are not running any
// more although their pod still runs on the node (the kubelet's /pods or
// bootlet's registry hold its UID): a restart the fault caused. The
// victim's own container is expected to restart; a pod the lifecycle
// stopped (a withdrawn bootstrap pod or checkpoint, an upgraded
// DaemonSet's old pod) is gone from both.
func (n *faultNode) restartedSince(before []*runtimeapi.Container, victimID string) []string {
	now := map[string]bool{}
	for _, c := range runningNow(n.c) {
		now[c.Id] = true
	}
	live := map[string]bool{}
	if pods, msg := kubeletPods(n.t, n.k); msg == "" {
		for uid := range pods {
			live[uid] = true
		}
	}
	if l, err := n.b.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, p := range l.Items {
			live[string(p.UID)] = true
		}
	}
	var out []string
	for _, c := range before {
		uid := c.Labels["io.kubernetes.pod.uid"]
		if c.Id == victimID || now[c.Id] || !live[uid] {
			continue
		}
		out = append(out, fmt.Sprintf("%s/%s (%s)", c.Labels["io.kubernetes.pod.name"], c.Metadata.GetName(), c.Id[:12]))
	}
	return out
}

// runningNow lists the runtime's running containers (none while
// containerd does not answer).
func runningNow(c *Containerd) []*runtimeapi.Container {
	cs, _ := listRunning(c)
	return cs
}

// listRunning is the CRI's list of running containers.
func listRunning(c *Containerd) ([]*runtimeapi.Container, error) {
	return c.RT.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
}

// containerPID is the host pid of a container's init process, from
// containerd's verbose CRI status (0 when unknown).
func containerPID(c *Containerd, id string) int {
	st, err := c.RT.ContainerStatus(context.Background(), id, true)
	if err != nil {
		return 0
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil {
		return 0
	}
	return info.Pid
}

// configMapWriter creates a ConfigMap every 100 ms in default, one request
// each with no retry, and remembers those the apiserver acknowledged.
type configMapWriter struct {
	admin  *kubernetes.Clientset
	mu     sync.Mutex
	acked  []string
	done   chan struct{}
	once   sync.Once
	exited chan struct{}
}

func startConfigMapWriter(admin *kubernetes.Clientset) *configMapWriter {
	w := &configMapWriter{admin: admin, done: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		defer close(w.exited)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			name := fmt.Sprintf("fault-%05d", i)
			cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"n": fmt.Sprint(i)}}
			if _, err := w.admin.CoreV1().ConfigMaps("default").Create(context.Background(), cm, metav1.CreateOptions{}); err == nil {
				w.mu.Lock()
				w.acked = append(w.acked, name)
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// waitAcked waits until at least n writes were acknowledged.
func (w *configMapWriter) waitAcked(t testing.TB, n int) {
	Eventually(t, time.Minute, func() (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.acked) >= n, fmt.Sprintf("%d ConfigMaps acknowledged, want %d", len(w.acked), n)
	})
}

func (w *configMapWriter) stop() {
	w.once.Do(func() { close(w.done) })
	<-w.exited
}

// verify returns the number of acknowledged ConfigMaps and those missing
// now (read with retries: the node has converged, but a read may still
// time out).
func (w *configMapWriter) verify(admin *kubernetes.Clientset) (int, []string) {
	w.mu.Lock()
	acked := slices.Clone(w.acked)
	w.mu.Unlock()
	var have map[string]bool
	for try := 0; try < 20; try++ {
		l, err := admin.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
		if err == nil {
			have = map[string]bool{}
			for _, cm := range l.Items {
				have[cm.Name] = true
			}
			break
		}
		if apierrors.IsForbidden(err) {
			break
		}
		time.Sleep(time.Second)
	}
	if have == nil {
		return len(acked), []string{"could not list the ConfigMaps"}
	}
	var lost []string
	for _, n := range acked {
		if !have[n] {
			lost = append(lost, n)
		}
	}
	return len(acked), lost
}
