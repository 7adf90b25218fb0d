//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	remote "k8s.io/cri-client/pkg"

	"github.com/bootlet/bootlet/podapi"
)

// Fault injection shared by the recovery and fault tests and the recovery
// bench: containerd crashes and restarts, simulated reboots, and a daemon
// started without waiting for /readyz.

// PID returns the pid of the instance's containerd, or 0 when it does not run.
func (c *Containerd) PID() int {
	b, err := os.ReadFile(c.Socket + ".pid")
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !alive(pid) {
		return 0
	}
	return pid
}

// KillContainerd sends sig to containerd alone and waits until it is gone.
// Shims and containers keep running, as after a containerd crash
// (SIGKILL) or a `systemctl restart containerd` (SIGTERM).
func (c *Containerd) KillContainerd(t testing.TB, sig syscall.Signal) {
	t.Helper()
	pid := c.PID()
	if pid == 0 {
		t.Fatalf("containerd on %s is not running", c.Socket)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("kill containerd: %v", err)
	}
	waitExit(t, pid, 20*time.Second)
}

// Restart starts containerd again on the same socket, root, state, bridge
// and subnet (after KillContainerd or SimulateReboot) and reconnects RT and
// IS. It does not wait for anything bootlet does.
func (c *Containerd) Restart(t testing.TB) {
	t.Helper()
	run(t, filepath.Join(Repo, "hack", "containerd.sh"), append([]string{"up", "--root", c.Root, "--state", c.State, "--address", c.Socket}, c.netArgs...)...)
	ctx := context.Background()
	old := []interface{ Close(context.Context) error }{}
	if c.RT != nil {
		old = append(old, c.RT)
	}
	if c.IS != nil {
		old = append(old, c.IS)
	}
	// containerd answers before its CRI plugin has recovered its state;
	// cri-client validates the connection once, so retry until it takes.
	Eventually(t, 60*time.Second, func() (bool, string) {
		rt, err := remote.NewRemoteRuntimeService(ctx, c.Endpoint(), time.Minute, nil, false)
		if err != nil {
			return false, "CRI after restarting containerd: " + err.Error()
		}
		is, err := remote.NewRemoteImageService(ctx, c.Endpoint(), time.Minute, nil, false)
		if err != nil {
			_ = rt.Close(ctx)
			return false, "CRI image service after restarting containerd: " + err.Error()
		}
		c.RT, c.IS = rt, is
		return true, ""
	})
	for _, o := range old {
		_ = o.Close(ctx)
	}
}

// SimulateReboot is a power cycle of the node without the reboot: the
// daemons (each b) and every process they started get SIGKILL (PowerOff);
// containerd is stopped and every shim and
// container process gets SIGKILL (hack/containerd.sh down without --purge,
// which also unmounts rootfs and netns mounts and drops the instance's CNI
// iptables rules); containerd's state directory (/run, a tmpfs on a real
// node) is wiped and the pod bridge deleted. containerd's root directory
// (images, snapshots, its metadata that still lists the old sandboxes and
// containers) and bootlet's root directory are kept. Nothing is started
// again: call c.Restart, then b.Start.
func SimulateReboot(t testing.TB, c *Containerd, bs ...*Bootlet) {
	t.Helper()
	for _, b := range bs {
		b.PowerOff()
		b.WaitExit(t)
	}
	run(t, filepath.Join(Repo, "hack", "containerd.sh"), "down", "--address", c.Socket, "--root", c.Root, "--state", c.State)
	if err := os.RemoveAll(c.State); err != nil {
		t.Fatalf("wiping containerd's state dir: %v", err)
	}
	if err := os.MkdirAll(c.State, 0o711); err != nil {
		t.Fatal(err)
	}
	if c.bridge != "" {
		_ = exec.Command("ip", "link", "delete", c.bridge).Run()
	}
}

// Spawn starts the daemon process like Start but does not wait for /readyz
// (for starts while containerd is down, and for timing recovery). Client
// is usable once the socket is served.
func (b *Bootlet) Spawn(t testing.TB) {
	t.Helper()
	b.started++
	b.logPath = filepath.Join(b.Ctrd.Dir, fmt.Sprintf("bootlet-%d.log", b.started))
	logf, err := os.Create(b.logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"daemon", "--runtime-endpoint", b.Ctrd.Endpoint(), "--root-dir", b.Dir, "--pod-log-dir", b.LogDir,
		"--container-log-dir", b.ContainerLogDir(), "--socket", b.Socket, "--node-name", b.NodeName, "-v=2",
		// No handoff unless a test asks for it (its flags come later and
		// win): the default staticPodPath and kubelet root dir are the
		// host's, shared by every test.
		"--kubelet-healthz-url="}, b.Args...)
	b.cmd = exec.Command(Bin(t, "bootlet"), args...)
	b.cmd.Stdout, b.cmd.Stderr = logf, logf
	// A -race build reports and keeps running; CheckRaces reads the log.
	b.cmd.Env = append(os.Environ(), "GORACE=halt_on_error=0")
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func(cmd *exec.Cmd, f *os.File) { _ = cmd.Wait(); f.Close() }(b.cmd, logf)
	if b.Client, err = podapi.NewClient("unix://" + b.Socket); err != nil {
		t.Fatal(err)
	}
}

// WaitReady waits until /readyz answers "ok".
func (b *Bootlet) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func() (bool, string) {
		body, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err == nil && string(body) == "ok", fmt.Sprintf("bootlet not ready: %v %s\n%s", err, body, b.Log())
	})
}

// PID is the daemon's process id (0 before the first start).
func (b *Bootlet) PID() int {
	if b.cmd == nil || b.cmd.Process == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// Exited reports whether the daemon process has ended.
func (b *Bootlet) Exited() bool { return b.PID() == 0 || !alive(b.PID()) }

// WaitExit waits until the daemon process has ended (after Kill9 or Stop).
func (b *Bootlet) WaitExit(t testing.TB) {
	t.Helper()
	if pid := b.PID(); pid != 0 {
		waitExit(t, pid, 15*time.Second)
	}
}

// LogPath is the file the current daemon process logs to.
func (b *Bootlet) LogPath() string { return b.logPath }

// NewClient returns a fresh client-go clientset for the daemon's socket.
func (b *Bootlet) NewClient(t testing.TB) *kubernetes.Clientset {
	cs, err := podapi.NewClient("unix://" + b.Socket)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...; comm may contain spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] != 'Z' && s[i+2] != 'X'
}

func waitExit(t testing.TB, pid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive after %s", pid, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// MountTmpfs mounts a tmpfs of size (e.g. "3m") at dir and unmounts it
// (lazily, since containers may still hold bind mounts of files on it) when
// the test ends. Register it after StartContainerd and before the daemon
// that uses it, so the cleanup runs after the daemon stopped and before the
// instance directory is removed.
func MountTmpfs(t testing.TB, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	run(t, "mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir)
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Logf("umount %s: %v %s", dir, err, out)
		}
	})
}
