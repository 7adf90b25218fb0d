//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	btypes "github.com/bootlet/bootlet/types"
)

// rebootManifest is ten pods of the shapes a node runs: Secret and ConfigMap
// consumers (volume files, projected, env, envFrom), probed servers, an init
// container, hostNetwork, two containers, plain ones.
func rebootManifest(password, color string) string {
	loop := `["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]`
	consumer := func(name, extra string) string {
		return `---
apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 1
` + extra + `  containers:
  - name: main
    image: ` + busybox + `
    command: ` + loop + `
    env:
    - name: PW
      valueFrom: {secretKeyRef: {name: creds, key: password}}
    - name: COLOR
      valueFrom: {configMapKeyRef: {name: settings, key: color}}
    envFrom:
    - {prefix: CFG_, configMapRef: {name: settings}}
    volumeMounts:
    - {name: secret, mountPath: /secret, readOnly: true}
    - {name: config, mountPath: /config}
    - {name: both, mountPath: /both}
  volumes:
  - name: secret
    secret: {secretName: creds}
  - name: config
    configMap: {name: settings}
  - name: both
    projected:
      sources:
      - secret: {name: creds, items: [{key: password, path: pw}]}
      - configMap: {name: settings, items: [{key: color, path: color}]}
`
	}
	plain := func(name, extra string) string {
		return `---
apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 1
` + extra + `  containers:
  - name: main
    image: ` + busybox + `
    command: ` + loop + `
`
	}
	web := func(name string) string {
		return `---
apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: server
    image: ` + testserver + `
    readinessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
`
	}
	return `
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: ` + password + `}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {color: ` + color + `, size: large}
` + consumer("cfg-a", "") + consumer("cfg-b", "") + consumer("cfg-host", "  hostNetwork: true\n") +
		web("web-a") + web("web-b") +
		plain("host", "  hostNetwork: true\n") + plain("plain", "") + `---
apiVersion: v1
kind: Pod
metadata: {name: init}
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: setup
    image: ` + busybox + `
    command: ["sh", "-c", "echo setup > /work/ready"]
    volumeMounts: [{name: work, mountPath: /work}]
  containers:
  - name: main
    image: ` + busybox + `
    command: ` + loop + `
    volumeMounts: [{name: work, mountPath: /work}]
  volumes:
  - {name: work, emptyDir: {}}
---
apiVersion: v1
kind: Pod
metadata: {name: multi}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: first
    image: ` + busybox + `
    command: ` + loop + `
  - name: second
    image: ` + busybox + `
    command: ` + loop + `
---
apiVersion: v1
kind: Pod
metadata: {name: plain-b}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + busybox + `
    command: ` + loop + `
`
}

var (
	rebootPods    = []string{"cfg-a", "cfg-b", "cfg-host", "web-a", "web-b", "host", "plain", "init", "multi", "plain-b"}
	rebootProbed  = map[string]bool{"web-a": true, "web-b": true}
	rebootConsume = []string{"cfg-a", "cfg-b", "cfg-host"}
)

// TestRebootSurvival: ten pods (three consume a Secret and a ConfigMap as
// volume files, projected files, env and envFrom) survive two simulated
// reboots (daemon SIGKILL, containerd stopped, every container SIGKILLed,
// containerd's state dir wiped, both root dirs kept). After each, every pod
// is Running (and Ready where probed) with the same UID in one new READY
// sandbox of attempt+1, restartCount continued from the last run, and the
// consumers see the latest Secret and ConfigMap content, written back from
// the checkpoint (the volume directories, tmpfs on a real node, are wiped
// too). Old sandboxes are garbage collected once they no longer hold the
// last dead run of a container.
func TestRebootSurvival(t *testing.T) {
	t.Parallel()
	c, b := startBootlet(t)
	b.Apply(t, rebootManifest("pw-v1", "blue"))
	uids := map[string]string{}
	for _, n := range rebootPods {
		p := b.WaitPod(t, "default", n, 60*time.Second, "Running", func(p *v1.Pod) bool { return Running(p) && (!rebootProbed[n] || Ready(p)) })
		uids[n] = string(p.UID)
	}
	// Changed content before the reboot: the files follow at once, env only
	// in the containers started after the reboot.
	b.Apply(t, `
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: pw-v2}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {color: red, size: large}
`)
	for _, n := range rebootConsume {
		Eventually(t, 20*time.Second, func() (bool, string) {
			out := execIn(t, c, b, n, "main", catFiles)
			return fields(out) == "pw-v2 red pw-v2 red", fmt.Sprintf("%s: files before the reboot: %q", n, out)
		})
	}
	secretRV := getSecret(t, b, "creds").ResourceVersion
	cmRV := getConfigMap(t, b, "settings").ResourceVersion

	for round := 1; round <= 2; round++ {
		start := time.Now()
		SimulateReboot(t, c, b)
		// Secret and ConfigMap volumes are tmpfs on a real node: gone.
		wipeObjectVolumes(t, b)
		c.Restart(t)
		b.Start(t)
		for _, n := range rebootPods {
			p := b.WaitPod(t, "default", n, 90*time.Second, fmt.Sprintf("Running after reboot %d", round), func(p *v1.Pod) bool {
				return Running(p) && (!rebootProbed[n] || Ready(p))
			})
			if string(p.UID) != uids[n] {
				t.Errorf("reboot %d: %s has UID %s, was %s", round, n, p.UID, uids[n])
			}
			for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
				if cs.RestartCount != int32(round) {
					t.Errorf("reboot %d: %s/%s restartCount %d, want %d", round, n, cs.Name, cs.RestartCount, round)
				}
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.LastTerminationState.Terminated == nil {
					t.Errorf("reboot %d: %s/%s has no lastState.terminated for the run the reboot ended", round, n, cs.Name)
				}
			}
		}
		t.Logf("reboot %d: every pod Running %s after the daemon was killed", round, time.Since(start).Round(100*time.Millisecond))
		for _, n := range rebootConsume {
			if out := execIn(t, c, b, n, "main", "echo $PW $COLOR $CFG_color; "+catFiles); fields(out) != "pw-v2 red red pw-v2 red pw-v2 red" {
				t.Errorf("reboot %d: %s sees %q, want pw-v2/red in env and files", round, n, out)
			}
		}
		if s := getSecret(t, b, "creds"); s.ResourceVersion != secretRV || string(s.Data["password"]) != "pw-v2" {
			t.Errorf("reboot %d: secret rv %s data %q, want rv %s pw-v2", round, s.ResourceVersion, s.Data["password"], secretRV)
		}
		if cm := getConfigMap(t, b, "settings"); cm.ResourceVersion != cmRV || cm.Data["color"] != "red" {
			t.Errorf("reboot %d: configmap rv %s data %v, want rv %s color=red", round, cm.ResourceVersion, cm.Data, cmRV)
		}
		// Settle: one sandbox generation per pod is left behind at most.
		for _, n := range rebootPods {
			Eventually(t, 20*time.Second, func() (bool, string) {
				ok, desc := rebootRuntimeShape(t, c, uids[n], uint32(round))
				return ok, fmt.Sprintf("reboot %d: %s runtime objects:\n%s", round, n, desc)
			})
		}
	}
	if t.Failed() {
		t.Logf("runtime:\n%s", describeRuntime(t, c))
	}
}

// rebootRuntimeShape checks a pod's CRI objects after reboot number attempt:
// one READY sandbox of that attempt, its containers RUNNING with CRI attempt
// (= restartCount) attempt; at most the previous sandbox generation kept,
// and only while it holds the last dead run of a container.
func rebootRuntimeShape(t *testing.T, c *Containerd, uid string, attempt uint32) (bool, string) {
	sbs := criSandboxesOf(t, c, uid)
	ctrs := criContainersOf(t, c, uid)
	var lines []string
	for _, sb := range sbs {
		lines = append(lines, fmt.Sprintf("  sandbox %.12s attempt=%d %s", sb.Id, sb.Metadata.Attempt, sb.State))
	}
	for _, ct := range ctrs {
		lines = append(lines, fmt.Sprintf("  container %s %.12s attempt=%d %s sandbox=%.12s", ct.Labels[ctrNameKey], ct.Id, ct.Metadata.Attempt, ct.State, ct.PodSandboxId))
	}
	desc := strings.Join(lines, "\n")
	ready := 0
	var readyID string
	for _, sb := range sbs {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
			readyID = sb.Id
			if sb.Metadata.Attempt != attempt {
				return false, desc
			}
		} else if sb.Metadata.Attempt+1 < attempt {
			return false, desc // an older generation than the previous one
		}
	}
	if ready != 1 {
		return false, desc
	}
	dead := map[string][]*runtimeapi.Container{}
	running := map[string]bool{}
	for _, ct := range ctrs {
		if ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			if ct.PodSandboxId != readyID || ct.Metadata.Attempt != attempt {
				return false, desc
			}
			running[ct.Labels[ctrNameKey]] = true
			continue
		}
		dead[ct.Labels[ctrNameKey]] = append(dead[ct.Labels[ctrNameKey]], ct)
	}
	for name, ds := range dead {
		if len(ds) > 1 {
			return false, desc
		}
		// The run before the reboot is kept (lastState, logs --previous),
		// and with it its sandbox of the previous attempt.
		if running[name] && ds[0].Metadata.Attempt != attempt-1 {
			return false, desc
		}
	}
	for name := range running {
		if len(dead[name]) != 1 {
			return false, desc
		}
	}
	// Every non-ready sandbox holds a container (the last dead run).
	for _, sb := range sbs {
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		holds := false
		for _, ct := range ctrs {
			holds = holds || ct.PodSandboxId == sb.Id
		}
		if !holds {
			return false, desc
		}
	}
	return true, desc
}

// catFiles prints the consumers' Secret and ConfigMap files, one a line.
const catFiles = "for f in /secret/password /config/color /both/pw /both/color; do cat $f; echo; done"

func fields(s string) string { return strings.Join(strings.Fields(s), " ") }

// wipeObjectVolumes removes the Secret, ConfigMap and projected volume
// directories of every pod under the daemon's root dir.
func wipeObjectVolumes(t testing.TB, b *Bootlet) {
	t.Helper()
	for _, plugin := range []string{"kubernetes.io~secret", "kubernetes.io~configmap", "kubernetes.io~projected"} {
		dirs, _ := filepath.Glob(filepath.Join(b.Dir, "pods", "*", "volumes", plugin))
		for _, d := range dirs {
			// Secret and projected volumes are tmpfs mounts, which a
			// reboot takes away: unmount them (lazily, as containers
			// may still hold them) before their directories go.
			vols, _ := filepath.Glob(filepath.Join(d, "*"))
			for _, v := range vols {
				if err := unix.Unmount(v, unix.MNT_DETACH); err != nil && err != unix.EINVAL {
					t.Fatalf("unmount %s: %v", v, err)
				}
			}
			if err := os.RemoveAll(d); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// execIn runs sh -c script in the running container of a pod through CRI
// ExecSync and returns its stdout.
func execIn(t testing.TB, c *Containerd, b *Bootlet, pod, container, script string) string {
	t.Helper()
	p := b.Pod(t, "default", pod)
	cs := containerStatus(p, container)
	if cs == nil || cs.ContainerID == "" {
		t.Fatalf("%s/%s has no container ID: %s", pod, container, statusSummary(p))
	}
	id := cs.ContainerID[strings.Index(cs.ContainerID, "://")+3:]
	stdout, stderr, err := c.RT.ExecSync(context.Background(), id, []string{"sh", "-c", script}, 10*time.Second)
	if err != nil {
		t.Fatalf("exec in %s/%s: %v %s", pod, container, err, stderr)
	}
	return string(stdout)
}

func getSecret(t testing.TB, b *Bootlet, name string) *v1.Secret {
	t.Helper()
	s, err := b.Client.CoreV1().Secrets("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get secret %s: %v", name, err)
	}
	return s
}

func getConfigMap(t testing.TB, b *Bootlet, name string) *v1.ConfigMap {
	t.Helper()
	cm, err := b.Client.CoreV1().ConfigMaps("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get configmap %s: %v", name, err)
	}
	return cm
}

// describeRuntime lists every sandbox and container of the instance.
func describeRuntime(t testing.TB, c *Containerd) string {
	var lines []string
	for _, sb := range c.Sandboxes(t) {
		lines = append(lines, fmt.Sprintf("sandbox %.12s %s uid=%s attempt=%d %s managed=%q", sb.Id, sb.Metadata.Name, sb.Metadata.Uid, sb.Metadata.Attempt, sb.State, sb.Annotations[btypes.AnnotationManagedBy]))
	}
	for _, ct := range c.Containers(t) {
		lines = append(lines, fmt.Sprintf("container %.12s %s uid=%s attempt=%d %s sandbox=%.12s", ct.Id, ct.Labels[ctrNameKey], ct.Labels[podUIDKey], ct.Metadata.Attempt, ct.State, ct.PodSandboxId))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// runForeignSandbox creates a sandbox directly through CRI, shaped like a
// kubelet pod (its labels and config.source annotation) but without
// bootlet's managed-by annotation, with a running container when withCtr;
// stopped stops the sandbox. It returns the sandbox and container IDs.
func runForeignSandbox(t *testing.T, c *Containerd, name string, withCtr, stopped bool) (string, string) {
	t.Helper()
	ctx := context.Background()
	uid := uuidLike(name)
	logDir := filepath.Join(c.Dir, "foreign-logs", name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{podUIDKey: uid, "io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": "default"}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Uid: uid, Namespace: "default"},
		LogDirectory: logDir,
		Labels:       labels,
		Annotations:  map[string]string{"kubernetes.io/config.source": "file", "kubernetes.io/config.hash": uid},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}},
	}
	sb, err := c.RT.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	ctr := ""
	if withCtr {
		ctr, err = c.RT.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
			Image:    &runtimeapi.ImageSpec{Image: busybox},
			Command:  []string{"sleep", "3600"},
			LogPath:  "main.log",
			Labels:   map[string]string{podUIDKey: uid, ctrNameKey: "main"},
		}, cfg)
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", name, err)
		}
		if err := c.RT.StartContainer(ctx, ctr); err != nil {
			t.Fatalf("StartContainer %s: %v", name, err)
		}
	}
	if stopped {
		if err := c.RT.StopPodSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
		// containerd reports the new state once it handled the exit.
		Eventually(t, 10*time.Second, func() (bool, string) {
			st, err := c.RT.PodSandboxStatus(ctx, sb, false)
			return err == nil && st.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_NOTREADY, fmt.Sprintf("sandbox %s not NOTREADY after StopPodSandbox: %v", name, err)
		})
	}
	return sb, ctr
}

func uuidLike(name string) string {
	return fmt.Sprintf("f0f0f0f0-0000-4000-8000-%012x", len(name)*7919+int(name[0]))
}

// snapshotOf describes the state of the given sandbox and container IDs.
func snapshotOf(t *testing.T, c *Containerd, ids ...string) string {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var lines []string
	for _, sb := range c.Sandboxes(t) {
		if want[sb.Id] {
			lines = append(lines, fmt.Sprintf("sandbox %s %s", sb.Id, sb.State))
		}
	}
	for _, ct := range c.Containers(t) {
		if want[ct.Id] {
			lines = append(lines, fmt.Sprintf("container %s %s", ct.Id, ct.State))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestStartupRecovery: what a daemon start does to the runtime and the
// store. CRI sandboxes bootlet did not create (no managed-by annotation,
// even when they look like kubelet pods; one running, one stopped) are left
// exactly as they were, also while workers sync. A bootlet sandbox whose pod
// is no longer in the checkpoint is removed. Damaged checkpoint records
// planted while the daemon is down (a truncated record, a garbage file, a
// well-formed envelope whose object does not decode) are moved to
// ROOT/quarantine with a log line and a CheckpointQuarantined Event each;
// the daemon starts and serves everything else; the running pod is adopted
// without a restart.
func TestStartupRecovery(t *testing.T) {
	t.Parallel()
	c := StartContainerd(t)
	fRun, fCtr := runForeignSandbox(t, c, "foreign-run", true, false)
	fStopped, _ := runForeignSandbox(t, c, "foreign-stopped", false, true)
	foreign := snapshotOf(t, c, fRun, fCtr, fStopped)
	if strings.Count(foreign, "\n") != 2 || !strings.Contains(foreign, fCtr+" CONTAINER_RUNNING") {
		t.Fatalf("foreign objects not set up:\n%s", foreign)
	}
	b := StartBootlet(t, c)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bootlet log (tail):\n%s\nruntime:\n%s", b.Log(), describeRuntime(t, c))
		}
	})
	b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: keep}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: `+busybox+`, command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]}
---
apiVersion: v1
kind: Pod
metadata: {name: orphan}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - {name: main, image: `+busybox+`, command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: intact}
data: {k: v}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: torn}
data: {k: this record gets truncated}
`)
	keep := b.WaitPod(t, "default", "keep", 30*time.Second, "Running", Running)
	orphan := b.WaitPod(t, "default", "orphan", 30*time.Second, "Running", Running)
	keepCtr := keep.Status.ContainerStatuses[0].ContainerID
	intactRV := getConfigMap(t, b, "intact").ResourceVersion
	if n := len(criSandboxesOf(t, c, string(orphan.UID))); n != 1 {
		t.Fatalf("orphan has %d sandboxes", n)
	}

	b.Kill9()
	b.WaitExit(t)
	store := filepath.Join(b.Dir, "checkpoint")
	// The orphan's pod is no longer desired (as after restoring an older
	// checkpoint): its record is gone.
	if err := os.Remove(filepath.Join(store, "pods", "default", "orphan.json")); err != nil {
		t.Fatal(err)
	}
	// A partial record: the first half of a real one.
	torn := filepath.Join(store, "configmaps", "default", "torn.json")
	data, err := os.ReadFile(torn)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(torn, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	// Garbage where a pod record would be.
	if err := os.WriteFile(filepath.Join(store, "pods", "default", "ghost.json"), []byte("\x00\x01garbage{{"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A well-formed envelope with a correct checksum whose object is not a
	// Secret (data must be a map).
	obj := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"undecodable","namespace":"default"},"data":"not-a-map"}`
	sum := sha256.Sum256([]byte(obj))
	env := fmt.Sprintf("{\n  \"formatVersion\": 1,\n  \"kind\": \"secrets\",\n  \"namespace\": \"default\",\n  \"name\": \"undecodable\",\n  \"revision\": 1,\n  \"sha256\": \"%s\",\n  \"object\": %s\n}\n", hex.EncodeToString(sum[:]), obj)
	if err := os.MkdirAll(filepath.Join(store, "secrets", "default"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(store, "secrets", "default", "undecodable.json"), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}

	b.Start(t)
	quarantined, _ := os.ReadDir(filepath.Join(b.Dir, "quarantine"))
	var qnames []string
	for _, q := range quarantined {
		qnames = append(qnames, q.Name())
	}
	for _, prefix := range []string{"configmaps_default_torn_", "pods_default_ghost_", "secrets_default_undecodable_"} {
		found := false
		for _, n := range qnames {
			found = found || strings.HasPrefix(n, prefix)
		}
		if !found {
			t.Errorf("no %s* in the quarantine: %v", prefix, qnames)
		}
	}
	if len(qnames) != 3 {
		t.Errorf("quarantine holds %v, want 3 files", qnames)
	}
	for _, f := range []string{torn, filepath.Join(store, "pods", "default", "ghost.json"), filepath.Join(store, "secrets", "default", "undecodable.json")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s still in the store (%v)", f, err)
		}
	}
	events := nodeEvents(t, b, "CheckpointQuarantined")
	for _, what := range []string{"torn", "ghost", "undecodable"} {
		if findEvent(events, "CheckpointQuarantined", what) == nil {
			t.Errorf("no CheckpointQuarantined event naming %s:%s", what, eventsString(events))
		}
	}
	if log := b.Log(); strings.Count(log, "Quarantined a damaged checkpoint record") != 3 {
		t.Errorf("want 3 log lines about quarantined records:\n%s", log)
	}
	// Everything else is served; the damaged objects are not.
	if cm := getConfigMap(t, b, "intact"); cm.ResourceVersion != intactRV || cm.Data["k"] != "v" {
		t.Errorf("configmap intact: rv %s data %v", cm.ResourceVersion, cm.Data)
	}
	for _, err := range []error{
		getErr(b.Client.CoreV1().ConfigMaps("default").Get(context.Background(), "torn", metav1.GetOptions{})),
		getErr(b.Client.CoreV1().Secrets("default").Get(context.Background(), "undecodable", metav1.GetOptions{})),
		getErr(b.Client.CoreV1().Pods("default").Get(context.Background(), "ghost", metav1.GetOptions{})),
		getErr(b.Client.CoreV1().Pods("default").Get(context.Background(), "orphan", metav1.GetOptions{})),
	} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("damaged or removed object served: %v", err)
		}
	}
	// The orphan's sandbox was bootlet's and is not desired: removed before
	// the daemon reported ready. keep is adopted.
	if sbs := criSandboxesOf(t, c, string(orphan.UID)); len(sbs) != 0 {
		t.Errorf("orphan still has %d sandboxes", len(sbs))
	}
	if ctrs := criContainersOf(t, c, string(orphan.UID)); len(ctrs) != 0 {
		t.Errorf("orphan still has %d containers", len(ctrs))
	}
	p := b.WaitPod(t, "default", "keep", 10*time.Second, "Running", Running)
	if cs := p.Status.ContainerStatuses[0]; cs.ContainerID != keepCtr || cs.RestartCount != 0 {
		t.Errorf("keep not adopted: %s restarts %d, was %s", cs.ContainerID, cs.RestartCount, keepCtr)
	}
	// Foreign objects: untouched at start and while the workers sync.
	time.Sleep(3 * time.Second)
	if now := snapshotOf(t, c, fRun, fCtr, fStopped); now != foreign {
		t.Errorf("foreign CRI objects changed:\nbefore:\n%s\nafter:\n%s", foreign, now)
	}
	// A second start reports nothing new.
	b.Kill9()
	b.WaitExit(t)
	b.Start(t)
	if ev := nodeEvents(t, b, "CheckpointQuarantined"); len(ev) != 0 {
		t.Errorf("quarantine reported again on the next start:%s", eventsString(ev))
	}
	if now := snapshotOf(t, c, fRun, fCtr, fStopped); now != foreign {
		t.Errorf("foreign CRI objects changed by the second start:\n%s", now)
	}
}

func getErr[T any](_ T, err error) error { return err }
