//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
)

// Repo is the repository root; binaries live in Repo/_output/bin.
var Repo = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}()

// Bin returns the path of a built binary, failing the test if it is missing.
func Bin(t testing.TB, name string) string {
	p := filepath.Join(Repo, "_output", "bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run `make toolchain images build` first (%v)", p, err)
	}
	return p
}

// RequireRoot fails (never skips) when the test cannot create containers.
func RequireRoot(t testing.TB) {
	if os.Geteuid() != 0 {
		t.Fatalf("e2e tests need root to run containers (euid %d)", os.Geteuid())
	}
}

var instance atomic.Int32

// Containerd is a private containerd for one test.
type Containerd struct {
	Dir, Socket, Root, State string
	// bridge is the built-in bridge network's device; "" when the pod
	// network is the cluster's CNI (StartContainerdCNI).
	bridge string
	// netArgs are hack/containerd.sh up's network flags, for Restart.
	netArgs []string
	RT      internalapi.RuntimeService
	IS      internalapi.ImageManagerService
}

// Endpoint is the CRI endpoint of the instance.
func (c *Containerd) Endpoint() string { return "unix://" + c.Socket }

// StartContainerd starts a private containerd with the images imported and
// registers its teardown. Each instance gets its own bridge and subnet.
func StartContainerd(t testing.TB) *Containerd {
	t.Helper()
	RequireRoot(t)
	n := int(instance.Add(1)) + os.Getpid()%50
	dir, err := os.MkdirTemp("", "bootlet-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Containerd{Dir: dir, Socket: filepath.Join(dir, "containerd.sock"), Root: filepath.Join(dir, "ctrd-root"), State: filepath.Join(dir, "ctrd-state"),
		bridge: fmt.Sprintf("be2e%d", n%200)}
	c.netArgs = []string{"--bridge", c.bridge, "--subnet", fmt.Sprintf("10.%d.0.0/16", 100+n%150)}
	c.start(t)
	return c
}

// CNI directories of a StartContainerdCNI instance, under its Dir.
func (c *Containerd) CNIBinDir() string  { return filepath.Join(c.Dir, "cni", "bin") }
func (c *Containerd) CNIConfDir() string { return filepath.Join(c.Dir, "cni", "net.d") }
func (c *Containerd) CNIDataDir() string { return filepath.Join(c.Dir, "cni") }

// StartContainerdCNI is StartContainerd for a node whose pod network is the
// cluster's CNI (the flannel add-on), as make up's: no bridge config; the
// CNI installs its plugin and config into CNIBinDir and CNIConfDir; pod
// traffic from podCIDR and to serviceCIDR never leaves the machine (the
// egress guard). One at a time: flannel's devices are the host's.
func StartContainerdCNI(t testing.TB, podCIDR, serviceCIDR string) *Containerd {
	t.Helper()
	RequireRoot(t)
	dir, err := os.MkdirTemp("", "bootlet-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Containerd{Dir: dir, Socket: filepath.Join(dir, "containerd.sock"), Root: filepath.Join(dir, "ctrd-root"), State: filepath.Join(dir, "ctrd-state")}
	c.netArgs = []string{"--cni-conf-dir", c.CNIConfDir(), "--cni-bin-dir", c.CNIBinDir(), "--pod-cidr", podCIDR, "--service-cidr", serviceCIDR}
	c.start(t)
	return c
}

// start runs the instance, connects RT and IS and imports the small images.
func (c *Containerd) start(t testing.TB) {
	t.Helper()
	var err error
	run(t, filepath.Join(Repo, "hack", "containerd.sh"), append([]string{"up", "--root", c.Root, "--state", c.State, "--address", c.Socket}, c.netArgs...)...)
	t.Cleanup(func() { c.Stop(t) })
	ctx := context.Background()
	if c.RT, err = remote.NewRemoteRuntimeService(ctx, c.Endpoint(), time.Minute, nil, false); err != nil {
		t.Fatal(err)
	}
	if c.IS, err = remote.NewRemoteImageService(ctx, c.Endpoint(), time.Minute, nil, false); err != nil {
		t.Fatal(err)
	}
	images, _ := filepath.Glob(filepath.Join(Repo, "_output", "images", "*.tar"))
	if len(images) == 0 {
		t.Fatal("no images in _output/images: run `make images`")
	}
	run(t, Bin(t, "bootlet"), append([]string{"images", "import", "--address", c.Socket}, images...)...)
}

// Stop tears the instance down, killing every container in it.
func (c *Containerd) Stop(t testing.TB) {
	run(t, filepath.Join(Repo, "hack", "containerd.sh"), "down", "--address", c.Socket, "--root", c.Root, "--state", c.State, "--purge")
	// A kubelet stopped under its pods leaves their volumes (and its root
	// dir's bind mount) mounted under c.Dir; with them, RemoveAll fails and
	// every such test used to leave its mounts on the host.
	unmountUnder(c.Dir)
	_ = os.RemoveAll(c.Dir)
}

// unmountUnder detaches every mount under dir, deepest first, so a test
// that stopped early leaves no tmpfs behind in its removed directory.
func unmountUnder(dir string) {
	data, _ := os.ReadFile("/proc/self/mounts")
	var points []string
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			points = append(points, f[1])
		}
	}
	slices.Sort(points)
	slices.Reverse(points)
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}

// Containers lists every CRI container of the instance.
func (c *Containerd) Containers(t testing.TB) []*runtimeapi.Container {
	t.Helper()
	cs, err := c.RT.ListContainers(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Sandboxes lists every CRI sandbox of the instance.
func (c *Containerd) Sandboxes(t testing.TB) []*runtimeapi.PodSandbox {
	t.Helper()
	sbs, err := c.RT.ListPodSandbox(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return sbs
}

// Bootlet is a running `bootlet daemon`.
type Bootlet struct {
	Ctrd     *Containerd
	Dir      string // root dir
	LogDir   string // pod log dir
	Socket   string
	NodeName string
	Args     []string
	Client   *kubernetes.Clientset
	cmd      *exec.Cmd
	logPath  string
	started  int
}

// StartBootlet runs a daemon against c with its own root dir and socket.
func StartBootlet(t testing.TB, c *Containerd, extra ...string) *Bootlet {
	t.Helper()
	b := NewBootlet(t, c, extra...)
	b.Start(t)
	return b
}

// NewBootlet prepares (but does not start: Start or Spawn) a daemon against
// c with its own root dir and socket, and registers its stop and race check.
func NewBootlet(t testing.TB, c *Containerd, extra ...string) *Bootlet {
	t.Helper()
	b := &Bootlet{Ctrd: c, Dir: filepath.Join(c.Dir, "bootlet"), LogDir: filepath.Join(c.Dir, "pod-logs"),
		Socket: filepath.Join(c.Dir, "bootlet.sock"), NodeName: "e2e-node", Args: extra}
	t.Cleanup(func() {
		b.Stop()
		b.CheckRaces(t)
	})
	return b
}

// raceMarker starts every report of the race detector. With a binary built
// by `make build RACE=1` the daemon runs with GORACE=halt_on_error=0 (see
// Spawn): it keeps running and reports each race on stderr, its log.
const raceMarker = "WARNING: DATA RACE"

// CheckRaces fails t for every data race report in any of the daemon's
// logs (one per start). A binary built without -race never reports.
func (b *Bootlet) CheckRaces(t testing.TB) {
	t.Helper()
	for i := 1; i <= b.started; i++ {
		p := filepath.Join(b.Ctrd.Dir, fmt.Sprintf("bootlet-%d.log", i))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("reading daemon log %s for race reports: %v", p, err)
			continue
		}
		if n := bytes.Count(data, []byte(raceMarker)); n > 0 {
			first := data[bytes.Index(data, []byte(raceMarker)):]
			if len(first) > 6000 {
				first = first[:6000]
			}
			t.Errorf("daemon log %s holds %d data race report(s); the first:\n%s", p, n, first)
		}
	}
}

// Start (re)starts the daemon process and waits for /readyz.
func (b *Bootlet) Start(t testing.TB) {
	t.Helper()
	b.Spawn(t)
	b.WaitReady(t, 30*time.Second)
}

// Kill9 kills the daemon with SIGKILL (pods keep running).
func (b *Bootlet) Kill9() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Kill()
		time.Sleep(100 * time.Millisecond)
	}
}

// PowerOff kills the daemon's whole process group with SIGKILL, as the
// power does: a command it runs (the node agent's kubelet restart, say)
// dies with it. Kill9 kills the daemon alone, as `kill -9` does.
func (b *Bootlet) PowerOff() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop stops the daemon with SIGTERM.
func (b *Bootlet) Stop() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() {
			for b.cmd.ProcessState == nil {
				time.Sleep(20 * time.Millisecond)
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
		}
	}
}

// Log returns the daemon's current log.
func (b *Bootlet) Log() string {
	data, _ := os.ReadFile(b.logPath)
	if len(data) > 8000 {
		data = data[len(data)-8000:]
	}
	return string(data)
}

// CLI runs the bootlet CLI against this daemon.
func (b *Bootlet) CLI(t testing.TB, args ...string) (string, error) {
	cmd := exec.Command(Bin(t, "bootlet"), append([]string{"--server", "unix://" + b.Socket}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Apply applies a manifest through the CLI.
func (b *Bootlet) Apply(t testing.TB, manifest string) {
	t.Helper()
	f := filepath.Join(b.Ctrd.Dir, fmt.Sprintf("manifest-%d.yaml", time.Now().UnixNano()))
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := b.CLI(t, "apply", "-f", f); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
}

// Pod gets a pod from the API.
func (b *Bootlet) Pod(t testing.TB, ns, name string) *v1.Pod {
	t.Helper()
	p, err := b.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s/%s: %v", ns, name, err)
	}
	return p
}

// WaitPod waits until cond holds for the pod.
func (b *Bootlet) WaitPod(t testing.TB, ns, name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var last *v1.Pod
	Eventually(t, timeout, func() (bool, string) {
		p, err := b.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		last = p
		return cond(p), fmt.Sprintf("pod %s/%s never became %s; status: %s", ns, name, what, statusSummary(p))
	})
	return last
}

// Running reports whether every container of the pod runs.
func Running(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.State.Running == nil {
			return false
		}
	}
	return true
}

// Ready reports the pod's Ready condition.
func Ready(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func statusSummary(p *v1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s", p.Status.Phase)
	for _, c := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		fmt.Fprintf(&b, " [%s restarts=%d ready=%v", c.Name, c.RestartCount, c.Ready)
		switch {
		case c.State.Running != nil:
			b.WriteString(" running")
		case c.State.Waiting != nil:
			fmt.Fprintf(&b, " waiting:%s %s", c.State.Waiting.Reason, c.State.Waiting.Message)
		case c.State.Terminated != nil:
			fmt.Fprintf(&b, " terminated:%d", c.State.Terminated.ExitCode)
		}
		b.WriteString("]")
	}
	return b.String()
}

// Eventually polls cond every 100ms until it holds or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	EventuallyEvery(t, timeout, 100*time.Millisecond, cond)
}

// EventuallyEvery is Eventually with another interval, for a wait whose
// polls must not add much load to what it measures.
func EventuallyEvery(t testing.TB, timeout, interval time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var msg string
	for {
		var ok bool
		ok, msg = cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %s", timeout, msg)
		}
		time.Sleep(interval)
	}
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// FailureRecorder is a testing.TB that keeps the first lines of every
// Error and Fatal it passes on, so that a long test can repeat them as its
// very last output: CI shows only the tail of a failed test's output, and
// the dumps a failure triggers (the kubelet's log, the control plane's
// state) would otherwise push the reason out of it.
type FailureRecorder struct {
	testing.TB
	mu       sync.Mutex
	failures []string
}

// NewFailureRecorder wraps t.
func NewFailureRecorder(t testing.TB) *FailureRecorder { return &FailureRecorder{TB: t} }

func (r *FailureRecorder) record(msg string) {
	where := ""
	if _, file, line, ok := runtime.Caller(2); ok {
		where = fmt.Sprintf("%s:%d: ", filepath.Base(file), line)
	}
	if len(msg) > 1500 {
		msg = msg[:1500] + " […]"
	}
	r.mu.Lock()
	r.failures = append(r.failures, where+msg)
	r.mu.Unlock()
}

// Errorf records, then fails r's test.
func (r *FailureRecorder) Errorf(format string, args ...any) {
	r.TB.Helper()
	r.record(fmt.Sprintf(format, args...))
	r.TB.Errorf(format, args...)
}

// Error records, then fails r's test.
func (r *FailureRecorder) Error(args ...any) {
	r.TB.Helper()
	r.record(fmt.Sprint(args...))
	r.TB.Error(args...)
}

// Fatalf records, then fails and stops r's test.
func (r *FailureRecorder) Fatalf(format string, args ...any) {
	r.TB.Helper()
	r.record(fmt.Sprintf(format, args...))
	r.TB.Fatalf(format, args...)
}

// Fatal records, then fails and stops r's test.
func (r *FailureRecorder) Fatal(args ...any) {
	r.TB.Helper()
	r.record(fmt.Sprint(args...))
	r.TB.Fatal(args...)
}

// Failures is what was recorded, oldest first.
func (r *FailureRecorder) Failures() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.failures...)
}
