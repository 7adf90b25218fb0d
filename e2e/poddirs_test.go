//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	btypes "github.com/bootlet/bootlet/types"
)

// podDirsManifest is a pod whose container keeps state in two emptyDirs (on
// disk and on a tmpfs) across its restarts: its first run (no /data/starts
// yet) writes a random marker into both, and no later run writes it, every run appends a line to /data/starts, and a run
// ends, with a termination message and exit code 3, when /data/exit
// appears. Backquotes, not $(...): the kubelet expands $(VAR) in commands.
const podDirsManifest = `
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: dirs}
stringData: {user: admin}
---
apiVersion: v1
kind: Pod
metadata: {name: state, namespace: dirs}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: docker.io/library/busybox:1.36
    command:
    - sh
    - -c
    - |
      if [ ! -f /data/starts ]; then
        cat /proc/sys/kernel/random/uuid > /data/marker
        cp /data/marker /mem/marker
      fi
      echo start >> /data/starts
      while [ ! -f /data/exit ]; do sleep 0.2; done
      rm /data/exit
      echo "run ` + "`wc -l < /data/starts`" + ` done ` + "`cat /data/marker`" + `" > /dev/termination-log
      exit 3
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: mem, mountPath: /mem}
    - {name: creds, mountPath: /creds, readOnly: true}
  volumes:
  - {name: data, emptyDir: {}}
  - {name: mem, emptyDir: {medium: Memory, sizeLimit: 16Mi}}
  - {name: creds, secret: {secretName: creds}}
`

// TestHandoffPodDirsLineUp: bootlet keeps a pod's etc-hosts, termination
// logs and emptyDirs in the kubelet's root dir layout, and its Secret volume
// under its own root dir. A real kubelet adopts the running pod (0
// restarts), and its volume manager takes bootlet's emptyDirs as they are:
// it reconstructs them from its pods dir, finds them in the static copy,
// tears nothing down. When the container then exits, the *kubelet*
// restarts it, and the new container finds the first run's marker in both
// emptyDirs, the same etc-hosts file, and the Secret; the kubelet reports
// the first run's termination message. Deleting the pod through bootlet
// leaves the kubelet's pod directory to the kubelet, which removes it.
func TestHandoffPodDirsLineUp(t *testing.T) {
	c := StartContainerd(t)
	t.Cleanup(func() { unmountUnder(c.Dir) })
	k := NewKubelet(t, c)
	t.Cleanup(k.Stop)
	b := StartBootlet(t, c,
		"--kubelet-healthz-url", fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort),
		"--kubelet-static-pod-path", k.ManifestDir,
		"--kubelet-root-dir", k.RootDir)
	ctx := context.Background()
	b.Apply(t, podDirsManifest)
	p := b.WaitPod(t, "dirs", "state", 60*time.Second, "Running and Ready", func(p *v1.Pod) bool { return Running(p) && Ready(p) })
	uid := string(p.UID)
	kpod := filepath.Join(k.RootDir, "pods", uid)

	first := onlyContainer(t, c, uid)
	mounts := mountsOf(t, c, first.Id)
	want := map[string]string{
		"/etc/hosts": filepath.Join(kpod, "etc-hosts"),
		"/data":      filepath.Join(kpod, "volumes", "kubernetes.io~empty-dir", "data"),
		"/mem":       filepath.Join(kpod, "volumes", "kubernetes.io~empty-dir", "mem"),
		"/creds":     filepath.Join(b.Dir, "pods", uid, "volumes", "kubernetes.io~secret", "creds"),
	}
	for path, host := range want {
		if mounts[path] != host {
			t.Errorf("bootlet's container mounts %s from %q, want %q", path, mounts[path], host)
		}
	}
	if dir := filepath.Dir(mounts["/dev/termination-log"]); dir != filepath.Join(kpod, "containers", "app") {
		t.Errorf("termination log in %s, want the kubelet's %s", dir, filepath.Join(kpod, "containers", "app"))
	}
	if fs := mountFSType(t, want["/mem"]); fs != "tmpfs" || mountCount(want["/mem"]) != 1 {
		t.Errorf("memory emptyDir %s is on %q (%d mounts), want one tmpfs", want["/mem"], fs, mountCount(want["/mem"]))
	}
	if _, err := os.Stat(filepath.Join(kpod, "plugins")); !os.IsNotExist(err) {
		t.Fatalf("bootlet made %s/plugins, the kubelet's sign that it synced the pod: %v", kpod, err)
	}
	var marker string
	Eventually(t, 20*time.Second, func() (bool, string) {
		marker = strings.TrimSpace(execOut(t, c, first.Id, "cat", "/data/marker"))
		return marker != "", "no marker in /data yet"
	})
	hostsBefore := execOut(t, c, first.Id, "cat", "/etc/hosts")
	if !strings.Contains(hostsBefore, p.Status.PodIP) || p.Status.PodIP == "" {
		t.Errorf("/etc/hosts does not name the pod IP %q:\n%s", p.Status.PodIP, hostsBefore)
	}

	// The kubelet starts while the pod runs, and adopts it.
	k.Start(t)
	Eventually(t, 60*time.Second, func() (bool, string) {
		p := b.Pod(t, "dirs", "state")
		return p.Annotations[btypes.AnnotationOwner] == "kubelet-static", fmt.Sprintf("owner %q\nkubelet:\n%s", p.Annotations[btypes.AnnotationOwner], tail(k.Log(), 3000))
	})
	var kp v1.Pod
	Eventually(t, 60*time.Second, func() (bool, string) {
		view, msg := kubeletPods(t, k)
		if msg != "" {
			return false, msg
		}
		kp = view[uid]
		cs := containerStatus(&kp, "app")
		return cs != nil && cs.State.Running != nil && strings.TrimPrefix(cs.ContainerID, "containerd://") == first.Id && cs.RestartCount == 0,
			fmt.Sprintf("the kubelet's view: %+v", cs)
	})
	// Housekeeping (2 s), the volume manager's reconciler and the pod
	// resync (1 s) all run several times: nothing of bootlet's dirs may
	// be torn down, the running container must not notice.
	time.Sleep(8 * time.Second)
	if got := strings.TrimSpace(execOut(t, c, first.Id, "cat", "/data/marker", "/mem/marker")); got != marker+"\n"+marker {
		t.Errorf("after the adoption the running container reads %q from its emptyDirs, want the marker %q twice", got, marker)
	}
	if fs := mountFSType(t, want["/mem"]); fs != "tmpfs" {
		t.Errorf("after the adoption the memory emptyDir is on %q", fs)
	}
	if n := mountCount(want["/mem"]); n != 1 {
		t.Errorf("after the adoption the memory emptyDir is mounted %d times, want bootlet's tmpfs only", n)
	}
	if n := mountCount(want["/creds"]); n != 1 {
		t.Errorf("after the adoption bootlet's secret tmpfs is mounted %d times, want 1", n)
	}
	klog := k.Log()
	for _, s := range []string{"operationExecutor.UnmountVolume started", "Cleaning up mounts for volume that could not be reconstructed", "orphaned pod"} {
		if strings.Contains(klog, s) {
			t.Errorf("the kubelet logged %q after adopting the pod:\n%s", s, grepLines(klog, s))
		}
	}
	if _, err := os.Stat(filepath.Join(kpod, "plugins")); err != nil {
		t.Errorf("the kubelet did not make its plugins dir in the pod dir bootlet made: %v", err)
	}

	// The container exits: the kubelet restarts it.
	execOut(t, c, first.Id, "touch", "/data/exit")
	wantMsg := "run 1 done " + marker
	Eventually(t, 60*time.Second, func() (bool, string) {
		view, msg := kubeletPods(t, k)
		if msg != "" {
			return false, msg
		}
		kp = view[uid]
		cs := containerStatus(&kp, "app")
		return cs != nil && cs.RestartCount == 1 && cs.State.Running != nil && cs.LastTerminationState.Terminated != nil,
			fmt.Sprintf("the kubelet's view: %+v\nkubelet:\n%s", cs, tail(k.Log(), 2000))
	})
	cs := containerStatus(&kp, "app")
	last := cs.LastTerminationState.Terminated
	if last.ExitCode != 3 || strings.TrimSpace(last.Message) != wantMsg {
		t.Errorf("the kubelet's lastState: exit %d, message %q; want exit 3, %q", last.ExitCode, last.Message, wantMsg)
	}
	second := strings.TrimPrefix(cs.ContainerID, "containerd://")
	if second == first.Id {
		t.Fatalf("the kubelet reports the old container %s as restarted", second)
	}
	for _, ctr := range criContainersOf(t, c, uid) {
		if ctr.Id == second && ctr.Metadata.Attempt != 1 {
			t.Errorf("the restarted container has attempt %d, want 1", ctr.Metadata.Attempt)
		}
	}
	mounts2 := mountsOf(t, c, second)
	for path, host := range want {
		if mounts2[path] != host {
			t.Errorf("the kubelet's container mounts %s from %q, bootlet's from %q", path, mounts2[path], host)
		}
	}
	if d1, d2 := filepath.Dir(mounts["/dev/termination-log"]), filepath.Dir(mounts2["/dev/termination-log"]); d1 != d2 {
		t.Errorf("termination logs in %s (bootlet) and %s (the kubelet)", d1, d2)
	}
	Eventually(t, 20*time.Second, func() (bool, string) {
		out := execOut(t, c, second, "wc", "-l", "/data/starts")
		return strings.HasPrefix(strings.TrimSpace(out), "2"), "starts: " + out
	})
	if got := strings.TrimSpace(execOut(t, c, second, "cat", "/data/marker", "/mem/marker")); got != marker+"\n"+marker {
		t.Errorf("the restarted container reads %q from its emptyDirs, want the first run's marker %q twice", got, marker)
	}
	if n := mountCount(want["/mem"]); n != 1 {
		t.Errorf("after the kubelet's restart of the container the memory emptyDir is mounted %d times, want bootlet's tmpfs only", n)
	}
	if got := execOut(t, c, second, "cat", "/etc/hosts"); got != hostsBefore {
		t.Errorf("the restarted container's /etc/hosts:\n%s\nbootlet's:\n%s", got, hostsBefore)
	}
	if got := execOut(t, c, second, "cat", "/creds/user"); got != "admin" {
		t.Errorf("the restarted container reads %q from the Secret volume", got)
	}
	// bootlet sees the restart and the message as well.
	Eventually(t, 20*time.Second, func() (bool, string) {
		p := b.Pod(t, "dirs", "state")
		cs := containerStatus(p, "app")
		return cs != nil && cs.RestartCount == 1 && cs.LastTerminationState.Terminated != nil &&
				strings.TrimSpace(cs.LastTerminationState.Terminated.Message) == wantMsg,
			fmt.Sprintf("bootlet's view: %+v", cs)
	})
	t.Logf("the kubelet restarted the adopted container (%s → %s); the new one read marker %s from both emptyDirs and the same etc-hosts; lastState message %q",
		first.Id[:12], second[:12], marker, last.Message)

	// Deleting the pod through bootlet: the kubelet stops it, bootlet
	// removes its own directory, the kubelet its own.
	if out, err := b.CLI(t, "delete", "pod", "-n", "dirs", "state"); err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	Eventually(t, 60*time.Second, func() (bool, string) {
		_, err := b.Client.CoreV1().Pods("dirs").Get(ctx, "state", metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), fmt.Sprintf("state still in the API: %v\n%s", err, tail(b.Log(), 2000))
	})
	if _, err := os.Stat(filepath.Join(b.Dir, "pods", uid)); !os.IsNotExist(err) {
		t.Errorf("bootlet's directory of the deleted pod is left: %v", err)
	}
	Eventually(t, 60*time.Second, func() (bool, string) {
		_, err := os.Stat(kpod)
		return os.IsNotExist(err) && mountCount(want["/mem"]) == 0 && mountCount(want["/creds"]) == 0,
			fmt.Sprintf("%s: %v; mounts %d+%d\nkubelet:\n%s", kpod, err, mountCount(want["/mem"]), mountCount(want["/creds"]), tail(k.Log(), 2000))
	})
	t.Logf("after the delete the kubelet removed its pod directory %s", kpod)
}

// onlyContainer is the one running container of a pod.
func onlyContainer(t *testing.T, c *Containerd, uid string) *runtimeapi.Container {
	t.Helper()
	var out []*runtimeapi.Container
	for _, ctr := range criContainersOf(t, c, uid) {
		if ctr.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			out = append(out, ctr)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d running containers in pod %s, want 1", len(out), uid)
	}
	return out[0]
}

// mountsOf maps each container path of a container's mounts to its host
// path, as the runtime reports them.
func mountsOf(t *testing.T, c *Containerd, id string) map[string]string {
	t.Helper()
	resp, err := c.RT.ContainerStatus(context.Background(), id, false)
	if err != nil {
		t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	out := map[string]string{}
	for _, m := range resp.GetStatus().GetMounts() {
		out[m.ContainerPath] = m.HostPath
	}
	return out
}

func execOut(t *testing.T, c *Containerd, id string, cmd ...string) string {
	t.Helper()
	stdout, stderr, err := c.RT.ExecSync(context.Background(), id, cmd, 10*time.Second)
	if err != nil {
		t.Fatalf("exec %v in %s: %v %s", cmd, id, err, stderr)
	}
	return string(stdout)
}

// mountLines are the lines of /proc/self/mounts whose mount point is path.
func mountLines(path string) [][]string {
	data, _ := os.ReadFile("/proc/self/mounts")
	var out [][]string
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[1] == path {
			out = append(out, f)
		}
	}
	return out
}

func mountCount(path string) int { return len(mountLines(path)) }

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestPodDirsOldLayoutKept: a pod that started with its directories under
// bootlet's --root-dir (the layout of an older bootlet, here made with
// --pod-root-dir set to it) keeps them when bootlet restarts with the data
// root in the kubelet's root dir: the running container is left alone,
// a container bootlet restarts mounts the same emptyDir and etc-hosts, a
// new pod goes to the kubelet's root dir, and the kubelet adopts both.
func TestPodDirsOldLayoutKept(t *testing.T) {
	c := StartContainerd(t)
	t.Cleanup(func() { unmountUnder(c.Dir) })
	k := NewKubelet(t, c)
	t.Cleanup(k.Stop)
	handoff := []string{
		"--kubelet-healthz-url", fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort),
		"--kubelet-static-pod-path", k.ManifestDir,
		"--kubelet-root-dir", k.RootDir}
	bootletDir := filepath.Join(c.Dir, "bootlet") // StartBootlet's root dir
	b := StartBootlet(t, c, append(append([]string{}, handoff...), "--pod-root-dir", bootletDir)...)
	b.Apply(t, podDirsManifest)
	p := b.WaitPod(t, "dirs", "state", 60*time.Second, "Running and Ready", func(p *v1.Pod) bool { return Running(p) && Ready(p) })
	uid := string(p.UID)
	oldPod := filepath.Join(bootletDir, "pods", uid)
	first := onlyContainer(t, c, uid)
	mounts := mountsOf(t, c, first.Id)
	if want := filepath.Join(oldPod, "volumes", "kubernetes.io~empty-dir", "data"); mounts["/data"] != want {
		t.Fatalf("/data from %q, want the old layout's %q", mounts["/data"], want)
	}
	var marker string
	Eventually(t, 20*time.Second, func() (bool, string) {
		marker = strings.TrimSpace(execOut(t, c, first.Id, "cat", "/data/marker"))
		return marker != "", "no marker in /data yet"
	})

	// bootlet restarts with the default data root: the kubelet's root dir.
	b.Kill9()
	b.Args = handoff
	b.Start(t)
	time.Sleep(3 * time.Second)
	if now := onlyContainer(t, c, uid); now.Id != first.Id {
		t.Fatalf("the restarted bootlet replaced the running container %s with %s", first.Id, now.Id)
	}
	if _, err := os.Stat(filepath.Join(k.RootDir, "pods", uid)); !os.IsNotExist(err) {
		t.Errorf("the old pod got a directory in the kubelet's root dir: %v", err)
	}
	// bootlet restarts the container: same directories, same marker.
	execOut(t, c, first.Id, "touch", "/data/exit")
	var second string
	Eventually(t, 60*time.Second, func() (bool, string) {
		p := b.Pod(t, "dirs", "state")
		cs := containerStatus(p, "app")
		if cs == nil || cs.RestartCount != 1 || cs.State.Running == nil {
			return false, fmt.Sprintf("bootlet's view: %+v", cs)
		}
		second = strings.TrimPrefix(cs.ContainerID, "containerd://")
		return true, ""
	})
	mounts2 := mountsOf(t, c, second)
	for _, path := range []string{"/data", "/mem", "/etc/hosts", "/creds"} {
		if mounts2[path] != mounts[path] {
			t.Errorf("the restarted container mounts %s from %q, the first from %q", path, mounts2[path], mounts[path])
		}
	}
	if got := strings.TrimSpace(execOut(t, c, second, "cat", "/data/marker", "/mem/marker")); got != marker+"\n"+marker {
		t.Errorf("the restarted container reads %q, want the marker %q twice", got, marker)
	}

	// A new pod goes to the kubelet's root dir.
	b.Apply(t, strings.ReplaceAll(podDirsManifest, "name: state", "name: fresh"))
	fp := b.WaitPod(t, "dirs", "fresh", 60*time.Second, "Running", Running)
	fresh := onlyContainer(t, c, string(fp.UID))
	if got, want := mountsOf(t, c, fresh.Id)["/data"], filepath.Join(k.RootDir, "pods", string(fp.UID), "volumes", "kubernetes.io~empty-dir", "data"); got != want {
		t.Errorf("the new pod's /data from %q, want %q", got, want)
	}

	// The kubelet adopts both, with nothing restarted.
	k.Start(t)
	Eventually(t, 60*time.Second, func() (bool, string) {
		var not []string
		for _, n := range []string{"state", "fresh"} {
			if o := b.Pod(t, "dirs", n).Annotations[btypes.AnnotationOwner]; o != "kubelet-static" {
				not = append(not, n+"="+o)
			}
		}
		return len(not) == 0, fmt.Sprintf("not adopted: %v\nkubelet:\n%s", not, tail(k.Log(), 2000))
	})
	time.Sleep(5 * time.Second)
	view, msg := kubeletPods(t, k)
	if msg != "" {
		t.Fatal(msg)
	}
	for uid, want := range map[string]string{uid: second, string(fp.UID): fresh.Id} {
		kp := view[uid]
		cs := containerStatus(&kp, "app")
		if cs == nil || strings.TrimPrefix(cs.ContainerID, "containerd://") != want || cs.State.Running == nil {
			t.Errorf("the kubelet's view of %s: %+v, want %s running", uid, cs, want)
		}
	}
	if got := strings.TrimSpace(execOut(t, c, second, "cat", "/data/marker")); got != marker {
		t.Errorf("after the adoption the old pod's container reads %q, want %q", got, marker)
	}
}
