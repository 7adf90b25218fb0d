//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCrashLoopBackoff: a container that exits 1 after 2 s under
// restartPolicy Always is restarted at once the first time, then after the
// kubelet's crash-loop backoff (10 s, then 20 s), showing CrashLoopBackOff in
// between; restartCount, CRI attempts and lastState follow.
func TestCrashLoopBackoff(t *testing.T) {
	t.Parallel()
	c, b := startBootlet(t)
	b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: crash}
spec:
  restartPolicy: Always
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "echo run $(date +%s); sleep 2; exit 1"]
`)
	uid := podUID(t, b, "crash")

	type run struct {
		id                         string
		attempt                    uint32
		created, started, finished time.Time
	}
	runs := map[string]*run{}
	var (
		sawBackoff      bool
		backoffMsgs     []string
		sawLastState    bool
		maxRestarts     int32
		prevLogsChecked bool
		prevLogsOut     string
		deadline        = time.Now().Add(55 * time.Second)
		p               *v1.Pod
	)
	ordered := func() []*run {
		var out []*run
		for _, r := range runs {
			out = append(out, r)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].created.Before(out[j].created) })
		return out
	}
	for {
		// CRI: every container of the pod, with its start/finish times
		// (older runs are garbage collected, so record them as they come).
		for _, ctr := range criContainersOf(t, c, uid) {
			st := criStatus(c, ctr.Id)
			if st == nil {
				continue
			}
			r := runs[ctr.Id]
			if r == nil {
				r = &run{id: ctr.Id, attempt: ctr.Metadata.Attempt, created: time.Unix(0, st.CreatedAt)}
				runs[ctr.Id] = r
			}
			if st.StartedAt > 0 {
				r.started = time.Unix(0, st.StartedAt)
			}
			if st.FinishedAt > 0 {
				r.finished = time.Unix(0, st.FinishedAt)
			}
		}
		// API status.
		p = b.Pod(t, "default", "crash")
		if len(p.Status.ContainerStatuses) == 1 {
			cs := p.Status.ContainerStatuses[0]
			if cs.RestartCount > maxRestarts {
				maxRestarts = cs.RestartCount
			}
			if cs.RestartCount < maxRestarts {
				t.Fatalf("restartCount went backwards: %d after %d", cs.RestartCount, maxRestarts)
			}
			if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
				sawBackoff = true
				backoffMsgs = append(backoffMsgs, w.Message)
				if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
					t.Fatalf("CrashLoopBackOff without lastState.terminated exitCode 1: %+v", cs)
				}
				if p.Status.Phase != v1.PodRunning {
					t.Fatalf("phase during CrashLoopBackOff = %s, want Running (kubelet getPhase)", p.Status.Phase)
				}
			}
			if cs.State.Running != nil && cs.RestartCount >= 1 {
				// The kubelet keeps the previous dead container, so a
				// restarted container shows its last termination.
				if lt := cs.LastTerminationState.Terminated; lt != nil && lt.ExitCode == 1 {
					sawLastState = true
				}
				if !prevLogsChecked {
					out, err := b.CLI(t, "logs", "crash", "--previous")
					prevLogsChecked = err == nil && strings.Contains(out, "run ")
					prevLogsOut = fmt.Sprintf("%v: %s", err, out)
				}
			}
		}
		if len(runs) >= 4 && !ordered()[3].started.IsZero() && maxRestarts >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %d runs seen, maxRestarts=%d, status: %s\n%s", len(runs), maxRestarts, statusSummary(p), b.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}

	rs := ordered()
	for i, r := range rs {
		t.Logf("run %d: attempt=%d created=%s started=%s finished=%s", i, r.attempt, r.created.Format("15:04:05.000"),
			r.started.Format("15:04:05.000"), r.finished.Format("15:04:05.000"))
		if r.attempt != uint32(i) {
			t.Errorf("run %d has CRI attempt %d, want %d", i, r.attempt, i)
		}
	}
	// First restart: immediate (no backoff entry yet).
	if gap := rs[1].started.Sub(rs[0].finished); gap > 3*time.Second {
		t.Errorf("first restart came %s after the first exit, want immediate", gap)
	}
	// Second restart: 10 s after the second run ended.
	if gap := rs[2].started.Sub(rs[1].started); gap < 10*time.Second || gap > 2*time.Second+10*time.Second+4*time.Second {
		t.Errorf("gap between 2nd and 3rd start = %s, want >= 10s backoff (+2s run, +small slack)", gap)
	}
	if gap := rs[2].started.Sub(rs[1].finished); gap < 10*time.Second-200*time.Millisecond {
		t.Errorf("3rd start came %s after the 2nd exit, want >= 10s", gap)
	}
	// Third restart: backoff doubled to 20 s.
	if gap := rs[3].started.Sub(rs[2].finished); gap < 20*time.Second-200*time.Millisecond || gap > 24*time.Second {
		t.Errorf("4th start came %s after the 3rd exit, want ~20s (doubled backoff)", gap)
	}
	if !sawBackoff {
		t.Errorf("never saw waiting reason CrashLoopBackOff")
	}
	var saw10, saw20 bool
	for _, m := range backoffMsgs {
		saw10 = saw10 || strings.HasPrefix(m, "back-off 10s restarting failed container=main pod=crash-e2e-node_default(")
		saw20 = saw20 || strings.HasPrefix(m, "back-off 20s restarting failed container=main pod=crash-e2e-node_default(")
	}
	if !saw10 || !saw20 {
		t.Errorf("CrashLoopBackOff messages lack the 10s and 20s back-offs: %q", uniq(backoffMsgs))
	}
	if !sawLastState {
		t.Errorf("a restarted, running container never showed lastState.terminated (exitCode 1)")
	}
	if !prevLogsChecked {
		t.Errorf("`bootlet logs --previous` never showed the previous run's output; last try: %s", prevLogsOut)
	}
	if ev := findEvent(podEvents(t, b, "crash"), "BackOff", "Back-off restarting failed container main"); ev == nil {
		t.Errorf("no BackOff event:%s", eventsString(podEvents(t, b, "crash")))
	}
	// Only the running container and its last dead run may be kept.
	if n := len(criContainersOf(t, c, uid)); n > 2 {
		t.Errorf("%d CRI containers kept for the pod, want at most 2 (running + last dead)", n)
	}
}

func uniq(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// TestRestartPolicies: OnFailure + exit 0 → Succeeded, not restarted;
// Never + exit 1 → Failed, not restarted; OnFailure + exit 1 → restarted.
// Finished pods have their sandbox stopped and keep their one container.
func TestRestartPolicies(t *testing.T) {
	t.Parallel()
	c, b := startBootlet(t)
	b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: onfailure-ok}
spec:
  restartPolicy: OnFailure
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "echo done; exit 0"]
---
apiVersion: v1
kind: Pod
metadata: {name: never-fail}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "echo failing; exit 1"]
---
apiVersion: v1
kind: Pod
metadata: {name: onfailure-fail}
spec:
  restartPolicy: OnFailure
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "sleep 1; exit 2"]
`)
	ok := b.WaitPod(t, "default", "onfailure-ok", 30*time.Second, "Succeeded", phaseIs(v1.PodSucceeded))
	bad := b.WaitPod(t, "default", "never-fail", 30*time.Second, "Failed", phaseIs(v1.PodFailed))
	b.WaitPod(t, "default", "onfailure-fail", 30*time.Second, "restarted", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	// Give the daemon time to (wrongly) restart the finished pods.
	time.Sleep(4 * time.Second)

	for _, tc := range []struct {
		name     string
		first    *v1.Pod
		phase    v1.PodPhase
		exitCode int32
		reason   string
	}{
		{"onfailure-ok", ok, v1.PodSucceeded, 0, "Completed"},
		{"never-fail", bad, v1.PodFailed, 1, "Error"},
	} {
		p := b.Pod(t, "default", tc.name)
		if p.Status.Phase != tc.phase {
			t.Errorf("%s: phase %s, want %s (%s)", tc.name, p.Status.Phase, tc.phase, statusSummary(p))
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount != 0 {
			t.Errorf("%s: restartCount %d, want 0", tc.name, cs.RestartCount)
		}
		term := cs.State.Terminated
		if term == nil || term.ExitCode != tc.exitCode || term.Reason != tc.reason {
			t.Errorf("%s: state %+v, want terminated exitCode=%d reason=%s", tc.name, cs.State, tc.exitCode, tc.reason)
		}
		if cs.Ready || Ready(p) {
			t.Errorf("%s: finished pod reports ready", tc.name)
		}
		uid := string(p.UID)
		ctrs := criContainersOf(t, c, uid)
		if len(ctrs) != 1 || ctrs[0].State != runtimeapi.ContainerState_CONTAINER_EXITED || ctrs[0].Metadata.Attempt != 0 {
			t.Errorf("%s: CRI containers %v, want exactly one exited attempt-0 container", tc.name, ctrs)
		}
		sbs := criSandboxesOf(t, c, uid)
		if len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
			t.Errorf("%s: sandboxes %v, want the one sandbox, stopped", tc.name, sbs)
		}
	}
	waitLogs(t, b, 5*time.Second, []string{"onfailure-ok"}, "done")
	waitLogs(t, b, 5*time.Second, []string{"never-fail"}, "failing")
	if p := b.Pod(t, "default", "onfailure-fail"); p.Status.Phase == v1.PodFailed || p.Status.Phase == v1.PodSucceeded {
		t.Errorf("onfailure-fail: phase %s, want a restarting pod", p.Status.Phase)
	}
}

// TestInitContainersOrder: init containers run one after the other, each to
// completion, before the main container, which sees their output in a
// shared emptyDir.
func TestInitContainersOrder(t *testing.T) {
	t.Parallel()
	c, b := startBootlet(t)
	b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: inits}
spec:
  initContainers:
  - name: init-1
    image: `+busybox+`
    command: ["sh", "-c", "sleep 1; echo first >> /work/order"]
    volumeMounts: [{name: work, mountPath: /work}]
  - name: init-2
    image: `+busybox+`
    command: ["sh", "-c", "echo second >> /work/order"]
    volumeMounts: [{name: work, mountPath: /work}]
  containers:
  - name: main
    image: `+busybox+`
    command: ["sh", "-c", "cat /work/order; echo end; exec sleep infinity"]
    volumeMounts: [{name: work, mountPath: /work}]
  volumes:
  - name: work
    emptyDir: {}
`)
	p := b.WaitPod(t, "default", "inits", 30*time.Second, "Running", Running)
	out := waitLogs(t, b, 10*time.Second, []string{"inits"}, "end")
	if strings.TrimSpace(out) != "first\nsecond\nend" {
		t.Fatalf("main container saw %q, want init-1 then init-2 output", out)
	}
	i1, i2 := containerStatus(p, "init-1"), containerStatus(p, "init-2")
	for _, cs := range []*v1.ContainerStatus{i1, i2} {
		if cs == nil || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 || cs.State.Terminated.Reason != "Completed" {
			t.Fatalf("init status %+v, want terminated Completed", cs)
		}
	}
	// CRI times: init-2 starts only after init-1 finished; main after init-2.
	uid := string(p.UID)
	times := map[string]*runtimeapi.ContainerStatus{}
	for _, ctr := range criContainersOf(t, c, uid) {
		times[ctr.Labels[ctrNameKey]] = criStatus(c, ctr.Id)
	}
	if len(times) != 3 || times["init-1"] == nil || times["init-2"] == nil || times["main"] == nil {
		t.Fatalf("CRI containers: %v", times)
	}
	if times["init-2"].StartedAt < times["init-1"].FinishedAt {
		t.Errorf("init-2 started before init-1 finished")
	}
	if times["main"].StartedAt < times["init-2"].FinishedAt {
		t.Errorf("main started before init-2 finished")
	}
	if condition(p, v1.PodInitialized) != v1.ConditionTrue {
		t.Errorf("Initialized condition is not True: %+v", p.Status.Conditions)
	}
}

// TestInitContainerFailsNever: a failing init container under restartPolicy
// Never fails the pod; the init container is not retried and the main
// container is never created.
func TestInitContainerFailsNever(t *testing.T) {
	t.Parallel()
	c, b := startBootlet(t)
	b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: initfail}
spec:
  restartPolicy: Never
  initContainers:
  - name: init
    image: `+busybox+`
    command: ["sh", "-c", "echo nope; exit 3"]
  containers:
  - name: main
    image: `+busybox+`
    command: ["sleep", "infinity"]
`)
	b.WaitPod(t, "default", "initfail", 30*time.Second, "Failed", phaseIs(v1.PodFailed))
	time.Sleep(3 * time.Second)
	p := b.Pod(t, "default", "initfail")
	if p.Status.Phase != v1.PodFailed {
		t.Fatalf("phase %s after failing, want Failed", p.Status.Phase)
	}
	ic := containerStatus(p, "init")
	if ic == nil || ic.State.Terminated == nil || ic.State.Terminated.ExitCode != 3 || ic.RestartCount != 0 {
		t.Errorf("init status %+v, want terminated exitCode 3, no restart", ic)
	}
	mc := containerStatus(p, "main")
	if mc == nil || mc.State.Waiting == nil || mc.State.Waiting.Reason != "PodInitializing" || mc.ContainerID != "" {
		t.Errorf("main status %+v, want waiting PodInitializing and no container", mc)
	}
	var names []string
	for _, ctr := range criContainersOf(t, c, string(p.UID)) {
		names = append(names, ctr.Labels[ctrNameKey]+"/"+strconv.Itoa(int(ctr.Metadata.Attempt)))
	}
	if strings.Join(names, ",") != "init/0" {
		t.Errorf("CRI containers of the pod: %v, want only init/0 (main never created, init not retried)", names)
	}
	if condition(p, v1.PodInitialized) == v1.ConditionTrue {
		t.Errorf("Initialized condition True for a pod whose init failed")
	}
}

// TestGracefulDelete: `bootlet delete pod` runs the preStop hook, then sends
// SIGTERM and waits for the container to exit within the grace period,
// removes every runtime object of the pod, and returns once it is gone.
// --grace-period=0 stops a pod that ignores SIGTERM at once.
func TestGracefulDelete(t *testing.T) {
	t.Parallel()
	c, b := startBootlet(t)
	dir := t.TempDir()
	mk := func(name string, grace, trapSleep int) string {
		return `
apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: ` + strconv.Itoa(grace) + `
  containers:
  - name: main
    image: ` + busybox + `
    command: ["sh", "-c", "trap 'echo term >> /marker/order; sleep ` + strconv.Itoa(trapSleep) + `; echo bye > /marker/bye; exit 0' TERM; echo up > /marker/up; while true; do sleep 0.1; done"]
    volumeMounts: [{name: marker, mountPath: /marker}]
    lifecycle:
      preStop:
        exec: {command: ["sh", "-c", "echo prestop >> /marker/order"]}
  volumes:
  - name: marker
    hostPath: {path: ` + filepath.Join(dir, name) + `, type: DirectoryOrCreate}
`
	}
	b.Apply(t, mk("graceful", 5, 2)+"---"+mk("grace0", 30, 30))
	for _, name := range []string{"graceful", "grace0"} {
		b.WaitPod(t, "default", name, 30*time.Second, "Running", Running)
		Eventually(t, 10*time.Second, func() (bool, string) {
			_, err := os.Stat(filepath.Join(dir, name, "up"))
			return err == nil, name + ": container never wrote its up marker"
		})
	}

	checkGone := func(name, uid string) {
		t.Helper()
		if _, err := b.Client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: pod still in the API after delete returned: %v", name, err)
		}
		if ctrs := criContainersOf(t, c, uid); len(ctrs) != 0 {
			t.Errorf("%s: %d CRI containers left after delete", name, len(ctrs))
		}
		if sbs := criSandboxesOf(t, c, uid); len(sbs) != 0 {
			t.Errorf("%s: %d CRI sandboxes left after delete", name, len(sbs))
		}
		if _, err := os.Stat(filepath.Join(b.Dir, "pods", uid)); !os.IsNotExist(err) {
			t.Errorf("%s: pod dir %s left behind (%v)", name, filepath.Join(b.Dir, "pods", uid), err)
		}
	}

	// Graceful: preStop, then SIGTERM; the trap needs 2 s of the 5 s grace.
	uid := podUID(t, b, "graceful")
	start := time.Now()
	out, err := b.CLI(t, "delete", "pod", "graceful")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	t.Logf("graceful delete took %s", took)
	if took < 2*time.Second || took > 5*time.Second+3*time.Second {
		t.Errorf("graceful delete took %s, want >= 2s (the SIGTERM trap) and < grace 5s + margin", took)
	}
	order, err := os.ReadFile(filepath.Join(dir, "graceful", "order"))
	if err != nil || string(order) != "prestop\nterm\n" {
		t.Errorf("hook/signal order %q (%v), want the preStop hook to run before SIGTERM reaches the container", order, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "graceful", "bye")); err != nil {
		t.Errorf("the container was killed before its SIGTERM handler finished: %v", err)
	}
	checkGone("graceful", uid)

	// Grace 0: the 30 s trap must not hold the delete.
	uid = podUID(t, b, "grace0")
	start = time.Now()
	out, err = b.CLI(t, "delete", "pod", "grace0", "--grace-period=0")
	took = time.Since(start)
	if err != nil {
		t.Fatalf("delete --grace-period=0: %v\n%s", err, out)
	}
	t.Logf("grace-period=0 delete took %s", took)
	if took > 6*time.Second {
		t.Errorf("delete --grace-period=0 took %s, want a prompt kill", took)
	}
	if _, err := os.Stat(filepath.Join(dir, "grace0", "bye")); err == nil {
		t.Errorf("grace0: the 30 s SIGTERM handler completed, so the container was not killed promptly")
	}
	checkGone("grace0", uid)
}
