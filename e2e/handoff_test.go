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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	btypes "github.com/bootlet/bootlet/types"
)

// handoffManifests are bootlet's pods for the handoff tests: one with an
// init container, one with a Secret volume, a ConfigMap volume, an
// emptyDir and env from the ConfigMap (a Secret in env is refused while
// the handoff is on: its static copy would show the value), one on the
// host network. Every running
// container has resources, so a kubelet that finds no actuated record for
// it "resizes" it (computePodResizeAction).
const handoffManifests = `
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: handoff}
stringData: {user: admin, password: "s3cr$(HOME)t"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: conf, namespace: handoff}
data: {LEVEL: debug, app.conf: "mode=fast\n", user: admin, password: "s3cr$(HOME)t"}
---
apiVersion: v1
kind: Pod
metadata: {name: withinit, namespace: handoff}
spec:
  initContainers:
  - name: init
    image: docker.io/library/busybox:1.36
    command: ["sh", "-c", "echo init > /work/init.txt"]
    volumeMounts: [{name: work, mountPath: /work}]
  containers:
  - name: main
    image: docker.io/library/busybox:1.36
    command: ["sh", "-c", "cat /work/init.txt; exec sleep infinity"]
    resources:
      requests: {cpu: 50m, memory: 32Mi}
      limits: {cpu: 100m, memory: 64Mi}
    volumeMounts: [{name: work, mountPath: /work}]
  volumes: [{name: work, emptyDir: {}}]
---
apiVersion: v1
kind: Pod
metadata: {name: withvolumes, namespace: handoff}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: docker.io/library/busybox:1.36
    command: ["sh", "-c", "echo user=$(USER) level=$LEVEL pw=$PASSWORD; cat /conf/app.conf /creds/user; echo; echo x > /scratch/x; exec sleep infinity"]
    env:
    - name: USER
      valueFrom: {configMapKeyRef: {name: conf, key: user}}
    - name: PASSWORD
      valueFrom: {configMapKeyRef: {name: conf, key: password}}
    envFrom:
    - configMapRef: {name: conf}
    resources:
      limits: {cpu: 100m, memory: 64Mi}
    volumeMounts:
    - {name: creds, mountPath: /creds, readOnly: true}
    - {name: conf, mountPath: /conf}
    - {name: scratch, mountPath: /scratch}
  - name: sidecar
    image: docker.io/library/busybox:1.36
    command: ["sleep", "infinity"]
    resources:
      requests: {cpu: 10m, memory: 16Mi}
  volumes:
  - {name: creds, secret: {secretName: creds}}
  - {name: conf, configMap: {name: conf}}
  - {name: scratch, emptyDir: {}}
---
apiVersion: v1
kind: Pod
metadata: {name: hostnet, namespace: handoff}
spec:
  hostNetwork: true
  containers:
  - name: main
    image: docker.io/library/busybox:1.36
    command: ["sleep", "infinity"]
    resources:
      requests: {cpu: 20m, memory: 8Mi}
`

var handoffPods = []string{"withinit", "withvolumes", "hostnet"}

// TestHandoffKubeletAdoptsRunningPods: bootlet runs three pods, then a real
// kubelet starts on the node (its sources ready about a second later, when
// it kills every runtime pod no source knows). bootlet's static copies are
// already in its staticPodPath, so it adopts them: every sandbox and
// container ID unchanged, restartCount 0 in the kubelet's own view, no
// container created, and bootlet shows them as kubelet-static. bootlet
// recorded the containers as actuated in the kubelet's checkpoint, so the
// kubelet logs no "Missing actuated resource record" and resizes nothing.
func TestHandoffKubeletAdoptsRunningPods(t *testing.T) { testHandoff(t, true) }

// TestHandoffWithoutActuatedCheckpoint is the same without the actuated
// checkpoint: the adoption still restarts nothing, but the kubelet finds no
// actuated record for any running container with resources and "resizes"
// them in place. It shows what --kubelet-actuated-checkpoint prevents.
func TestHandoffWithoutActuatedCheckpoint(t *testing.T) { testHandoff(t, false) }

func testHandoff(t *testing.T, actuated bool) {
	c := StartContainerd(t)
	k := NewKubelet(t, c)
	t.Cleanup(k.Stop)
	b := StartBootlet(t, c,
		"--kubelet-healthz-url", fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort),
		"--kubelet-static-pod-path", k.ManifestDir,
		"--kubelet-root-dir", k.RootDir,
		"--kubelet-actuated-checkpoint="+strconv.FormatBool(actuated))
	b.Apply(t, handoffManifests)
	uids := map[string]string{}
	for _, n := range handoffPods {
		p := b.WaitPod(t, "handoff", n, 60*time.Second, "Running and Ready", func(p *v1.Pod) bool { return Running(p) && Ready(p) })
		uids[n] = string(p.UID)
	}
	waitLogs(t, b, 20*time.Second, []string{"-n", "handoff", "withvolumes", "-c", "app"}, "user=admin level=debug pw=s3cr$(HOME)t")
	waitLogs(t, b, 20*time.Second, []string{"-n", "handoff", "withvolumes", "-c", "app"}, "mode=fast")
	waitLogs(t, b, 20*time.Second, []string{"-n", "handoff", "withinit", "-c", "main"}, "init")

	// The static copies are in place before any kubelet runs, complete
	// (no dotfile left), 0600, with bootlet's UIDs.
	entries, err := os.ReadDir(k.ManifestDir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	sort.Strings(files)
	want := []string{"bootlet_handoff_hostnet.yaml", "bootlet_handoff_withinit.yaml", "bootlet_handoff_withvolumes.yaml"}
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Fatalf("staticPodPath holds %v, want %v", files, want)
	}
	for _, n := range handoffPods {
		path := filepath.Join(k.ManifestDir, "bootlet_handoff_"+n+".yaml")
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "uid: "+uids[n]) {
			t.Errorf("%s does not carry the pod's UID %s:\n%s", path, uids[n], data)
		}
		if strings.Contains(string(data), "secretKeyRef") || strings.Contains(string(data), "configMapRef") || strings.Contains(string(data), "secretName") {
			t.Errorf("%s still references API objects:\n%s", path, data)
		}
		if fi, _ := os.Stat(path); fi == nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", path, fi.Mode())
		}
	}
	checkpointFile := filepath.Join(k.RootDir, "actuated_pods_state")
	if _, err := os.Stat(checkpointFile); (err == nil) != actuated {
		t.Fatalf("actuated checkpoint %s: stat err %v, want it written=%v", checkpointFile, err, actuated)
	}

	time.Sleep(2 * time.Second) // let init GC and probes settle
	before := handoffSnapshot(t, c, uids)
	t.Logf("runtime before the kubelet:\n%s", before)
	if got := strings.Count(before, " sandbox "); got != 3 {
		t.Fatalf("%d sandboxes before the kubelet, want 3", got)
	}
	if got := strings.Count(before, " container "); got != 5 {
		t.Fatalf("%d containers before the kubelet, want 5 (4 running + the exited init)", got)
	}
	totalContainers := len(c.Containers(t))

	// The handoff's race: the kubelet starts while bootlet's pods run, and
	// must adopt them rather than kill them as unknown.
	kubeletStart := time.Now()
	k.Start(t)
	healthy := time.Since(kubeletStart)
	Eventually(t, 60*time.Second, func() (bool, string) {
		var not []string
		for _, n := range handoffPods {
			p := b.Pod(t, "handoff", n)
			if p.Annotations[btypes.AnnotationOwner] != "kubelet-static" {
				not = append(not, n+"="+p.Annotations[btypes.AnnotationOwner])
			}
		}
		return len(not) == 0, fmt.Sprintf("not adopted: %v\nbootlet:\n%s\nkubelet:\n%s", not, tail(b.Log(), 3000), tail(k.Log(), 3000))
	})
	adopted := time.Since(kubeletStart)
	var kubeletView map[string]v1.Pod
	Eventually(t, 60*time.Second, func() (bool, string) {
		var msg string
		kubeletView, msg = kubeletPods(t, k)
		if msg != "" {
			return false, msg
		}
		for _, n := range handoffPods {
			p, ok := kubeletView[uids[n]]
			if !ok || !Running(&p) {
				return false, fmt.Sprintf("the kubelet does not report %s running: %v", n, ok)
			}
		}
		return true, ""
	})
	running := time.Since(kubeletStart)
	t.Logf("kubelet started: healthz after %s, bootlet saw every pod adopted after %s, the kubelet reported them all running after %s",
		healthy.Round(time.Millisecond), adopted.Round(time.Millisecond), running.Round(time.Millisecond))

	// Several housekeeping (2 s) and resync (1 s) rounds of the kubelet.
	time.Sleep(10 * time.Second)
	after := handoffSnapshot(t, c, uids)
	if after != before {
		t.Errorf("the adoption changed the runtime objects:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if n := len(c.Containers(t)); n != totalContainers {
		t.Errorf("the runtime has %d containers, had %d", n, totalContainers)
	}
	for _, ctr := range c.Containers(t) {
		if created := time.Unix(0, ctr.CreatedAt); created.After(kubeletStart) {
			t.Errorf("container %s (%s) was created at %s, after the kubelet started", ctr.Id, ctr.Metadata.Name, created)
		}
	}

	// The kubelet's own view: same IDs, no restart.
	kubeletView, msg := kubeletPods(t, k)
	if msg != "" {
		t.Fatal(msg)
	}
	crIDs := map[string]string{} // uid/container → ID
	for _, n := range handoffPods {
		for _, ctr := range criContainersOf(t, c, uids[n]) {
			crIDs[uids[n]+"/"+ctr.Labels[ctrNameKey]] = ctr.Id
		}
	}
	checked := 0
	for _, n := range handoffPods {
		p, ok := kubeletView[uids[n]]
		if !ok {
			t.Errorf("the kubelet does not know %s (uid %s)", n, uids[n])
			continue
		}
		if p.Name != n+"-"+k.NodeName || p.Namespace != "handoff" {
			t.Errorf("the kubelet names %s %s/%s", n, p.Namespace, p.Name)
		}
		for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			checked++
			id := strings.TrimPrefix(cs.ContainerID, "containerd://")
			if cs.RestartCount != 0 {
				t.Errorf("kubelet view %s/%s: restartCount %d", n, cs.Name, cs.RestartCount)
			}
			if want := crIDs[uids[n]+"/"+cs.Name]; id != want || id == "" {
				t.Errorf("kubelet view %s/%s: container %q, bootlet's is %q", n, cs.Name, id, want)
			}
		}
	}
	if checked != 5 {
		t.Errorf("the kubelet reported %d container statuses, want 5", checked)
	}
	for _, n := range handoffPods {
		for _, ctr := range criContainersOf(t, c, uids[n]) {
			if ctr.Annotations["io.kubernetes.container.restartCount"] != "0" {
				t.Errorf("%s/%s: CRI restartCount annotation %q", n, ctr.Labels[ctrNameKey], ctr.Annotations["io.kubernetes.container.restartCount"])
			}
		}
	}

	// bootlet shows the owner, in the CLI and on the object.
	out, err := b.CLI(t, "get", "pods", "-n", "handoff")
	if err != nil {
		t.Fatalf("get pods: %v\n%s", err, out)
	}
	t.Logf("bootlet get pods -n handoff:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if f := strings.Fields(lines[0]); f[len(f)-1] != "OWNER" {
		t.Errorf("no OWNER column: %q", lines[0])
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); f[len(f)-1] != "kubelet-static" || f[2] != "Running" {
			t.Errorf("pod line %q: want Running, owner kubelet-static", l)
		}
	}
	// bootlet status: the daemon says the node is in the handoff, and lists
	// every pod with its owner.
	out, err = b.CLI(t, "status")
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	t.Logf("bootlet status:\n%s", out)
	if !strings.Contains(out, "\nphase: handoff (for ") || !strings.Contains(out, "\nreason: the kubelet answers; pods: 3 kubelet-static; no pivot configured") {
		t.Errorf("bootlet status does not show phase handoff with 3 kubelet-static pods")
	}
	if e := findEvent(namespacedEvents(t, b, metav1.NamespaceDefault, b.NodeName), "NodePhaseChanged", "handoff (was bootstrap): "); e == nil {
		t.Errorf("no NodePhaseChanged event to handoff:%s", eventsString(namespacedEvents(t, b, metav1.NamespaceDefault, b.NodeName)))
	}
	for _, n := range handoffPods {
		found := false
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == "handoff" && f[1] == n {
				found = f[len(f)-1] == "kubelet-static"
			}
		}
		if !found {
			t.Errorf("bootlet status: no line for handoff/%s with owner kubelet-static", n)
		}
	}
	for _, n := range handoffPods {
		if e := findEvent(namespacedEvents(t, b, "handoff", n), "AdoptedByKubelet", ""); e == nil {
			t.Errorf("%s: no AdoptedByKubelet event", n)
		}
	}

	// What the kubelet said about resources of the adopted containers.
	klog, err := os.ReadFile(k.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	missing := strings.Count(string(klog), "Missing actuated resource record")
	resize := strings.Count(string(klog), "UpdatePodSandboxResources") + strings.Count(string(klog), "updatePodSandboxResources")
	ctrdLog, _ := os.ReadFile(c.Socket + ".log")
	ctrdResize := strings.Count(string(ctrdLog), "UpdatePodSandboxResources")
	ctrdUpdate := strings.Count(string(ctrdLog), "UpdateContainerResources")
	t.Logf("kubelet log: %d \"Missing actuated resource record\", %d UpdatePodSandboxResources; containerd log: %d UpdatePodSandboxResources, %d UpdateContainerResources (actuated checkpoint written: %v)",
		missing, resize, ctrdResize, ctrdUpdate, actuated)
	if actuated && missing != 0 {
		t.Errorf("the kubelet logged \"Missing actuated resource record\" %d times although bootlet wrote its actuated checkpoint", missing)
	}
	if !actuated && missing == 0 {
		t.Errorf("without the actuated checkpoint the kubelet was expected to miss the actuated records of the 4 running containers with resources, and logged nothing")
	}
	if actuated && ctrdUpdate != 0 {
		t.Errorf("containerd got %d UpdateContainerResources calls although nothing needed a resize", ctrdUpdate)
	}

	// The adopted pods still serve: logs of the adopted containers.
	waitLogs(t, b, 10*time.Second, []string{"-n", "handoff", "withvolumes", "-c", "app"}, "mode=fast")
	if !actuated {
		return
	}

	// A Secret changes after the adoption: bootlet rewrites the volume
	// files the static copy mounts, and the kubelet restarts nothing. The
	// Secret's value never reaches the static copy (docs/security.md): the
	// copy mounts the directory, it holds no Secret value.
	b.Apply(t, `
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: handoff}
stringData: {user: root, password: "s3cr$(HOME)t"}
`)
	appID := crIDs[uids["withvolumes"]+"/app"]
	Eventually(t, 30*time.Second, func() (bool, string) {
		stdout, _, err := c.RT.ExecSync(context.Background(), appID, []string{"cat", "/creds/user"}, 5*time.Second)
		if err != nil {
			return false, err.Error()
		}
		return string(stdout) == "root", fmt.Sprintf("the container reads %q from /creds/user", stdout)
	})
	if data, err := os.ReadFile(filepath.Join(k.ManifestDir, "bootlet_handoff_withvolumes.yaml")); err != nil {
		t.Fatal(err)
	} else if strings.Contains(string(data), "root") {
		t.Errorf("the static copy holds the Secret's value:\n%s", data)
	}
	time.Sleep(5 * time.Second)
	if again := handoffSnapshot(t, c, uids); again != before {
		t.Errorf("a Secret update after the adoption changed the runtime objects:\nbefore:\n%s\nafter:\n%s", before, again)
	}

	// A restarted bootlet keeps its hands off: the owner is in the
	// checkpoint.
	b.Kill9()
	b.Start(t)
	time.Sleep(5 * time.Second)
	for _, n := range handoffPods {
		p := b.Pod(t, "handoff", n)
		if p.Annotations[btypes.AnnotationOwner] != "kubelet-static" || !Running(p) {
			t.Errorf("%s after a bootlet restart: owner %q, %s", n, p.Annotations[btypes.AnnotationOwner], statusSummary(p))
		}
	}
	if again := handoffSnapshot(t, c, uids); again != before {
		t.Errorf("the runtime changed across a bootlet restart:\nbefore:\n%s\nafter:\n%s", before, again)
	}

	// Deleting an adopted pod withdraws its static copy: the kubelet stops
	// it, then the pod leaves bootlet's API. The others are untouched.
	deleted := time.Now()
	if out, err := b.CLI(t, "delete", "pod", "-n", "handoff", "withvolumes"); err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	Eventually(t, 60*time.Second, func() (bool, string) {
		_, err := b.Client.CoreV1().Pods("handoff").Get(context.Background(), "withvolumes", metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), fmt.Sprintf("withvolumes still in the API: %v\n%s", err, tail(b.Log(), 2000))
	})
	t.Logf("deleting the adopted pod withvolumes took %s (static copy withdrawn, the kubelet stopped it)", time.Since(deleted).Round(time.Millisecond))
	if _, err := os.Stat(filepath.Join(k.ManifestDir, "bootlet_handoff_withvolumes.yaml")); !os.IsNotExist(err) {
		t.Errorf("the static copy of the deleted pod is still there: %v", err)
	}
	for _, ctr := range criContainersOf(t, c, uids["withvolumes"]) {
		if ctr.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s of the deleted pod still runs", ctr.Metadata.Name)
		}
	}
	rest := map[string]string{"withinit": uids["withinit"], "hostnet": uids["hostnet"]}
	var kept []string
	for _, l := range strings.Split(before, "\n") {
		if !strings.HasPrefix(l, "withvolumes ") {
			kept = append(kept, l)
		}
	}
	if got := handoffSnapshot(t, c, rest); got != strings.Join(kept, "\n") {
		t.Errorf("deleting one pod changed the others:\n%s", got)
	}
}

func namespacedEvents(t *testing.T, b *Bootlet, ns, name string) []v1.Event {
	t.Helper()
	l, err := b.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	return l.Items
}
