package handoff

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critesting "k8s.io/cri-api/pkg/apis/testing"
	allocationstate "k8s.io/kubernetes/pkg/kubelet/allocation/state"
	"sigs.k8s.io/yaml"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/runner"
	"github.com/bootlet/bootlet/runner/runnertest"
	btypes "github.com/bootlet/bootlet/types"
)

// handoffEnv is a runner.Manager on the fake CRI (runnertest) with a
// handoff.
type handoffEnv struct {
	env  *runnertest.Env
	root string
	rt   *critesting.FakeRuntimeService
	sink *runnertest.RecordingSink
	m    *runner.Manager
	h    *Handoff
}

func newHandoffEnv(t *testing.T) *handoffEnv {
	env := runnertest.New(t, nil)
	return &handoffEnv{env: env, root: env.Root, rt: env.RT, sink: env.Sink}
}

// start builds the manager with the handoff of cfg, objects and events
// serving both, and starts the handoff's poll loop.
func (e *handoffEnv) start(ctx context.Context, cfg Config, objects cri.ObjectSource, events EventSink) {
	cfg.Objects, cfg.Events = objects, events
	e.h = New(cfg)
	rootDir := filepath.Join(e.root, "root")
	rcfg := runner.Config{
		NodeName: runnertest.Node, RootDir: rootDir, PodRootDir: rootDir, PodLogsDir: filepath.Join(e.root, "logs"),
		CgroupDriver: cri.CgroupDriverCgroupfs, Runtime: e.env.Runtime, Status: e.sink, Objects: objects,
		HostIPs: []string{"10.0.0.1"}, ResolvConf: e.env.ResolvConf,
		MachineMemory: 8 << 30, // a burstable pod's OOM score adjustment needs it
		Handoff:       e.h, KubeletRootDir: cfg.KubeletRootDir,
	}
	if events != nil {
		rcfg.Events = events
	}
	e.m = runner.NewManager(ctx, rcfg)
	go e.h.Run(ctx, e.m)
}

func (e *handoffEnv) pod(name string, images ...string) *v1.Pod { return e.env.Pod(name, images...) }

// ownerLog is an OwnerSink that keeps every change.
type ownerLog struct {
	mu     sync.Mutex
	owners map[types.UID][]btypes.Owner
}

func (o *ownerLog) PodOwner(_ btypes.PodKey, uid types.UID, owner btypes.Owner) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owners[uid] = append(o.owners[uid], owner)
}

func (o *ownerLog) of(uid types.UID) []btypes.Owner {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]btypes.Owner(nil), o.owners[uid]...)
}

// TestHandoffLifecycle drives one pod through the handoff against the fake
// CRI and a fake kubelet healthz: the static copy is written while no
// kubelet runs, along with the actuated checkpoint; once the kubelet
// answers and has synced the pod, the pod is kubelet-static and bootlet
// makes no mutating CRI call any more, even when a container dies; a delete
// withdraws the copy and waits for the kubelet to stop the pod.
func TestHandoffLifecycle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newHandoffEnv(t)
	var healthy atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			_, _ = w.Write([]byte("ok"))
			return
		}
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	owners := &ownerLog{owners: map[types.UID][]btypes.Owner{}}
	cfg := Config{HealthzURL: srv.URL, KubeletUID: os.Geteuid(), StaticPodPath: filepath.Join(e.root, "manifests"),
		KubeletRootDir: filepath.Join(e.root, "kubelet"), WriteActuated: true, Owners: owners}
	e.start(ctx, cfg, nil, nil)

	pod := e.pod("web", "busybox")
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}
	e.m.Sync(pod)
	runnertest.WaitFor(t, 10*time.Second, "the pod to run", func() bool { st, _ := e.sink.Status(pod.UID); return runnertest.Running(st) })

	// The static copy: complete, same UID, mode 0600, no temp file left.
	file := filepath.Join(cfg.StaticPodPath, "bootlet_default_web.yaml")
	runnertest.WaitFor(t, 10*time.Second, "the static copy", func() bool { _, err := os.Stat(file); return err == nil })
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var static v1.Pod
	if err := yaml.UnmarshalStrict(data, &static); err != nil {
		t.Fatalf("static copy: %v\n%s", err, data)
	}
	if static.UID != pod.UID || static.Name != "web" || static.Namespace != "default" {
		t.Errorf("static copy identity %s/%s %s", static.Namespace, static.Name, static.UID)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	entries, _ := os.ReadDir(cfg.StaticPodPath)
	if len(entries) != 1 {
		t.Errorf("staticPodPath holds %d entries, want only the copy", len(entries))
	}

	// The actuated checkpoint, read with the kubelet's own package.
	runnertest.WaitFor(t, 10*time.Second, "the actuated checkpoint", func() bool {
		_, err := os.Stat(filepath.Join(cfg.KubeletRootDir, "actuated_pods_state"))
		return err == nil
	})
	st, err := allocationstate.NewStateCheckpoint(cfg.KubeletRootDir, "actuated_pods_state")
	if err != nil {
		t.Fatal(err)
	}
	res, ok := st.GetContainerResources(pod.UID, "c0")
	if cpu := res.Requests[v1.ResourceCPU]; !ok || cpu.String() != "100m" {
		t.Errorf("actuated record of c0: %v %v", ok, res)
	}

	// The kubelet comes up: bootlet stops acting at once, even before the
	// kubelet synced the pod.
	healthy.Store(true)
	runnertest.WaitFor(t, 10*time.Second, "bootlet to see the kubelet", e.h.KubeletUp)
	if got := owners.of(pod.UID); len(got) != 0 {
		t.Errorf("owner changed before the kubelet synced the pod: %v", got)
	}
	// The kubelet synced it: its pod directory exists.
	if err := os.MkdirAll(filepath.Join(cfg.KubeletRootDir, "pods", string(pod.UID)), 0o750); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if got := owners.of(pod.UID); len(got) != 0 {
		t.Errorf("a bare pod directory (bootlet's own layout) counted as the kubelet's sync: %v", got)
	}
	if err := os.MkdirAll(filepath.Join(cfg.KubeletRootDir, "pods", string(pod.UID), "plugins"), 0o750); err != nil {
		t.Fatal(err)
	}
	runnertest.WaitFor(t, 10*time.Second, "kubelet-static", func() bool {
		got := owners.of(pod.UID)
		return len(got) == 1 && got[0] == btypes.OwnerKubeletStatic
	})
	// A container dies: the kubelet restarts it, bootlet must not.
	calls := len(e.rt.GetCalls())
	e.rt.Lock()
	for _, c := range e.rt.Containers {
		c.State, c.FinishedAt, c.ExitCode = runtimeapi.ContainerState_CONTAINER_EXITED, time.Now().UnixNano(), 1
	}
	e.rt.Unlock()
	runnertest.WaitFor(t, 10*time.Second, "the exit in status", func() bool { st, _ := e.sink.Status(pod.UID); return !runnertest.Running(st) })
	time.Sleep(2500 * time.Millisecond) // two resyncs
	for m, n := range runnertest.CallsSince(e.rt.GetCalls(), calls) {
		if runnertest.WriteCalls[m] {
			t.Errorf("bootlet called %s %d times on a kubelet-static pod", m, n)
		}
	}

	// Delete: the copy is withdrawn (released), bootlet waits for the
	// kubelet to stop the pod and removes nothing itself.
	e.m.Terminate(pod.UID, 0)
	runnertest.WaitFor(t, 10*time.Second, "the copy to be withdrawn", func() bool { _, err := os.Stat(file); return os.IsNotExist(err) })
	runnertest.WaitFor(t, 10*time.Second, "released", func() bool {
		got := owners.of(pod.UID)
		return len(got) == 2 && got[1] == btypes.OwnerReleased
	})
	time.Sleep(1500 * time.Millisecond)
	if e.sink.TerminatedCount() != 0 {
		t.Fatal("the pod finished while its sandbox was still ready")
	}
	e.rt.Lock()
	for _, sb := range e.rt.Sandboxes {
		sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	e.rt.Unlock()
	runnertest.WaitFor(t, 10*time.Second, "the deletion to finish", func() bool { return e.sink.TerminatedCount() == 1 })
	for m, n := range runnertest.CallsSince(e.rt.GetCalls(), calls) {
		if runnertest.WriteCalls[m] {
			t.Errorf("bootlet called %s %d times while the kubelet owned or stopped the pod", m, n)
		}
	}
}

// TestHandoffNewPodWhileKubeletRuns: a pod created while a kubelet runs is
// only written as a static copy: the kubelet starts it, bootlet creates
// nothing (two agents never race to create one sandbox).
func TestHandoffNewPodWhileKubeletRuns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newHandoffEnv(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	cfg := Config{HealthzURL: srv.URL, KubeletUID: os.Geteuid(), StaticPodPath: filepath.Join(e.root, "manifests"), KubeletRootDir: filepath.Join(e.root, "kubelet")}
	e.start(ctx, cfg, objects{secrets: map[string]*v1.Secret{"default/creds": {Data: map[string][]byte{"token": []byte("s3cret")}}}}, nil)
	runnertest.WaitFor(t, 10*time.Second, "bootlet to see the kubelet", e.h.KubeletUp)
	pod := e.pod("late", "busybox")
	pod.Spec.Volumes = []v1.Volume{{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds"}}}}
	pod = runnertest.Defaulted(pod)
	e.m.Sync(pod)
	file := filepath.Join(cfg.StaticPodPath, "bootlet_default_late.yaml")
	runnertest.WaitFor(t, 10*time.Second, "the static copy", func() bool { _, err := os.Stat(file); return err == nil })
	// The copy mounts bootlet's materialised Secret directory: it must be
	// there although bootlet never ran the pod, or the kubelet never can.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var static v1.Pod
	if err := yaml.UnmarshalStrict(data, &static); err != nil || len(static.Spec.Volumes) != 1 || static.Spec.Volumes[0].HostPath == nil {
		t.Fatalf("static copy: %v\n%s", err, data)
	}
	token := filepath.Join(static.Spec.Volumes[0].HostPath.Path, "token")
	// Secret volumes are tmpfs mounts when bootlet may mount.
	t.Cleanup(func() { _ = syscall.Unmount(static.Spec.Volumes[0].HostPath.Path, syscall.MNT_DETACH) })
	runnertest.WaitFor(t, 10*time.Second, "the Secret materialised for the static copy", func() bool {
		b, err := os.ReadFile(token)
		return err == nil && string(b) == "s3cret"
	})
	time.Sleep(1500 * time.Millisecond)
	for _, c := range e.rt.GetCalls() {
		if runnertest.WriteCalls[c] {
			t.Errorf("bootlet called %s for a pod the running kubelet starts", c)
		}
	}
	if _, err := os.Stat(filepath.Join(cfg.KubeletRootDir, "actuated_pods_state")); !os.IsNotExist(err) {
		t.Errorf("actuated checkpoint written while the kubelet runs (or WriteActuated off): %v", err)
	}
}

// TestWriteFileAtomic: the final name only ever holds a complete file, and
// no temp file is left beside it (the kubelet reads the directory).
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bootlet_ns_p.yaml")
	for i, content := range []string{"first", strings.Repeat("second ", 1000)} {
		if _, err := checkpoint.WriteFileAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("write %d: mode %v, %v; want 0600 (the copy may hold Secret values)", i, fi.Mode().Perm(), err)
		}
		got, _ := os.ReadFile(path)
		if string(got) != content {
			t.Errorf("write %d: read back %d bytes", i, len(got))
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d files in the dir, want 1", len(entries))
	}
}

// podEvents is an EventSink that keeps every pod event's reason and message.
type podEvents struct {
	mu  sync.Mutex
	got []string
}

func (p *podEvents) Event(_ *v1.Pod, eventType, reason, message string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, eventType+" "+reason+": "+message)
}

func (p *podEvents) with(reason string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, e := range p.got {
		if strings.Contains(e, " "+reason+": ") {
			out = append(out, e)
		}
	}
	return out
}

// TestHandoffNoStaticCopyForSecretEnv: a stored pod that takes a Secret
// value into env (from before the API refused them) never gets a static
// copy, so its value never reaches a file or a mirror pod: bootlet keeps
// running it itself, and says why in one Warning event.
func TestHandoffNoStaticCopyForSecretEnv(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newHandoffEnv(t)
	events := &podEvents{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	cfg := Config{HealthzURL: srv.URL, StaticPodPath: filepath.Join(e.root, "manifests"), KubeletRootDir: filepath.Join(e.root, "kubelet")}
	e.start(ctx, cfg, objects{secrets: map[string]*v1.Secret{"default/creds": {Data: map[string][]byte{"token": []byte("s3cret-value")}}}}, events)
	runnertest.WaitFor(t, 10*time.Second, "bootlet to see the kubelet", e.h.KubeletUp)
	pod := e.pod("leaky", "busybox")
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "creds"}, Key: "token"}}}}
	pod = runnertest.Defaulted(pod)
	e.m.Sync(pod)
	runnertest.WaitFor(t, 10*time.Second, "the NoStaticCopy event", func() bool { return len(events.with("NoStaticCopy")) > 0 })
	// bootlet runs it itself: the kubelet never got it.
	runnertest.WaitFor(t, 10*time.Second, "bootlet to start the container", func() bool {
		for _, c := range e.rt.GetCalls() {
			if c == "StartContainer" {
				return true
			}
		}
		return false
	})
	for i := 0; i < 3; i++ {
		e.m.Sync(pod)
		time.Sleep(100 * time.Millisecond)
	}
	entries, _ := os.ReadDir(cfg.StaticPodPath)
	if len(entries) != 0 {
		t.Errorf("staticPodPath holds %v", entries)
	}
	got := events.with("NoStaticCopy")
	if len(got) != 1 || !strings.Contains(got[0], "spec.containers[0].env[0].valueFrom.secretKeyRef") ||
		!strings.Contains(got[0], "mount the Secret as a volume") || strings.Contains(got[0], "s3cret-value") {
		t.Errorf("NoStaticCopy events: %q", got)
	}
	if o, _ := e.h.Owner(pod.UID); o != btypes.OwnerBootlet {
		t.Errorf("owner %s, want bootlet", o)
	}
}
