//go:build e2e

package e2e

import (
	"bufio"
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

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/podapi"
	btypes "github.com/bootlet/bootlet/types"
)

// The node TestSystemdBoot boots: its machine name, host name and node
// name, its network namespace and the host's end of its veth pair on a
// private /30 that nothing on this VM uses, and the cgroup it runs under in
// every hierarchy.
const (
	sdMachine  = "bootlet-sdboot"
	sdNetns    = "bootlet-sdboot"
	sdHostLink = "bl-sdboot"
	sdHostIP   = "172.30.87.1"
	sdNodeIP   = "172.30.87.2"
	sdCgroup   = "bootlet-e2e-sdboot"
	// sdCgroupRW is the test's own unit in the node's image (not shipped):
	// systemd-nspawn mounts the host's cgroup v1 controllers read-only in
	// the container (no API_VFS_WRITABLE mode changes that in systemd
	// 252); the container's root may remount them read-write, and this
	// unit does before sysinit.target, long before bootlet-containerd.
	sdCgroupRW = "bootlet-e2e-cgroup-rw.service"
)

// sdUnits are the units of dist/systemd, in their boot order.
var sdUnits = []string{"bootlet-containerd.service", "bootlet.service", "bootlet-kubelet.service"}

// TestSystemdBoot is issue 22's boot test of dist/systemd under a real
// systemd: `make install PREFIX=/usr IMAGES=1` into a copy of a Debian 12
// root file system (hack/node-rootfs.sh, cached in _output/build), `bootlet
// render` in it for the units' paths, the three units enabled, and the copy
// booted with `systemd-nspawn --boot`, its own systemd as PID 1:
//
//  1. first boot: the units start in their order (containerd's READY=1
//     before bootlet starts, bootlet's READY=1 before the kubelet starts),
//     and the control plane becomes self-hosted (the bootstrap pods
//     withdrawn, the apiserver DaemonSet's and the controller-manager's and
//     scheduler's Deployments' pods Ready, the node Ready), no unit
//     restarted or failed;
//  2. `systemctl reboot` in the container: nspawn exits 133, the container
//     starts again on the same root (/var kept, /run, the cgroups and the
//     network namespace fresh, as after a power cycle) and the control
//     plane comes back through bootlet's checkpoint to self-hosted.
//
// Everything is watched from the host: the apiserver through the veth
// address with the rendered admin.conf, bootlet's pod API through
// /proc/PID/root, systemctl run in the container's namespaces (nsenter: no
// machined or D-Bus on this host for `systemctl --machine`).
//
// Isolation from the host: the node has its own network namespace (a veth
// pair, the host's end with forwarding off, so nothing the node sends is
// routed on: pods cannot leave the machine, and kube-proxy's and flannel's
// rules and sysctls stay in the namespace), its own mount, PID, UTS, IPC and
// cgroup namespaces, and every cgroup it makes (the kubelet's kubepods) is
// below sdCgroup, so it never meets a host kubelet's. /proc/sys is
// read-only but for net/ (SYSTEMD_NSPAWN_API_VFS_WRITABLE=network), so the
// container's systemd-sysctl does not apply Debian's defaults to the host;
// the three kernel tunables the kubelet insists on are written by the test
// (as the host kubelet's e2e helper does) and put back at the end.
func TestSystemdBoot(tt *testing.T) {
	t := NewFailureRecorder(tt)
	RequireRoot(t)
	start := time.Now()
	for _, tool := range []string{"systemd-nspawn", "debootstrap", "nsenter", "unshare", "chroot", "ip", "systemctl", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: hack/deps.sh installs it (systemd-container, debootstrap): %v", tool, err)
		}
	}
	for _, f := range []string{"/sys/fs/cgroup/memory/cgroup.procs", "/sys/fs/cgroup/systemd/cgroup.procs"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("this test runs the node in cgroup v1 subtrees of the host (the hybrid layout of this VM): %v", err)
		}
	}
	for _, b := range []string{"bootlet", "bootlet-tools", "containerd", "kubelet"} {
		Bin(t, b)
	}

	// The cached root file system, and a copy of it for this run.
	t0 := time.Now()
	out, err := exec.Command(filepath.Join(Repo, "hack", "node-rootfs.sh"), "--out", filepath.Join(Repo, "_output")).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			out = append(out, ee.Stderr...)
		}
		t.Fatalf("hack/node-rootfs.sh: %v\n%s", err, out)
	}
	cached := strings.TrimSpace(string(out))
	t.Logf("root file system %s ready in %s", cached, time.Since(t0).Round(time.Millisecond))
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	t0 = time.Now()
	run(t, "cp", "-a", "--reflink=auto", cached, root)
	run(t, "make", "-C", Repo, "install", "DESTDIR="+root, "PREFIX=/usr", "IMAGES=1")
	sdPrepareImage(t, root)
	t.Logf("copied, make install, render and enable in %s", time.Since(t0).Round(time.Millisecond))

	// The host side: kernel tunables, cgroups, network. Each is undone by
	// a cleanup registered before it is made.
	sdKernelTunables(t)
	n := &sdNode{t: t, root: root, console: filepath.Join(dir, "console.log")}
	sdCleanupLeftovers(t)
	t.Cleanup(n.teardown)
	n.makeCgroups()
	n.makeNetwork()
	admin := AdminClient(t, filepath.Join(root, "etc", "kubernetes"))
	t.Cleanup(func() {
		if t.Failed() {
			n.dump()
		}
	})

	// 1. First boot.
	poweredOn := n.boot()
	n.waitUnitsActive(3 * time.Minute)
	waitAPIReadyz(t, admin, 5*time.Minute)
	toReadyz := time.Since(poweredOn)
	b := n.bootletClient()
	waitSelfHosted(t, admin, b, sdMachine, poweredOn, true, "", 8*time.Minute)
	sdWaitBootstrapWithdrawn(t, admin, b)
	sdWaitNodeReady(t, admin)
	toSelfHosted := time.Since(poweredOn)
	first := n.checkUnits("first boot")
	n.checkPodCgroups(b)
	if _, err := os.Stat(filepath.Join(root, "var/lib/bootlet/pivot-done.json")); err != nil {
		t.Errorf("no record of the pivot in the node's /var/lib/bootlet: %v", err)
	}
	t.Logf("first boot: %s; /readyz %s and self-hosted %s after nspawn started",
		first, toReadyz.Round(time.Millisecond), toSelfHosted.Round(time.Millisecond))

	// 2. Reboot: systemd stops the units, nspawn exits 133; the container
	// starts again on the same root with a fresh kernel-side state.
	t0 = time.Now()
	n.reboot()
	shutdown := time.Since(t0)
	n.resetCgroups()
	n.removeNetwork()
	n.makeNetwork()
	poweredOn = n.boot()
	n.waitUnitsActive(3 * time.Minute)
	waitAPIReadyz(t, admin, 5*time.Minute)
	toReadyz = time.Since(poweredOn)
	b = n.bootletClient()
	ctx := context.Background()
	ck, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver-checkpoint", metav1.GetOptions{})
	if err != nil {
		t.Errorf("/readyz is back %s after the reboot, but bootlet runs no checkpoint of the apiserver: %v", toReadyz, err)
	} else if activated, err := time.Parse(time.RFC3339Nano, ck.Annotations[btypes.AnnotationCheckpointActivated]); err != nil || activated.Before(poweredOn) {
		t.Errorf("the checkpoint pod was not activated after the reboot (%s): %v %v", poweredOn.Format(time.RFC3339Nano), err, ck.Annotations)
	}
	waitSelfHosted(t, admin, b, sdMachine, poweredOn, true, "", 8*time.Minute)
	toSelfHosted = time.Since(poweredOn)
	waitCheckpointGone(t, b)
	toCheckpointGone := time.Since(poweredOn)
	sdWaitBootstrapWithdrawn(t, admin, b)
	sdWaitNodeReady(t, admin)
	if etcd, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "etcd", metav1.GetOptions{}); err != nil || !Running(etcd) {
		t.Errorf("bootlet's etcd after the reboot: %v %v", err, etcd)
	}
	second := n.checkUnits("after the reboot")
	n.logTimeline("after the reboot")
	t.Logf("reboot: systemctl reboot to nspawn's exit %s; then %s; /readyz %s, self-hosted %s, checkpoint withdrawn %s after nspawn started",
		shutdown.Round(time.Millisecond), second, toReadyz.Round(time.Millisecond), toSelfHosted.Round(time.Millisecond), toCheckpointGone.Round(time.Millisecond))
	t.Logf("TestSystemdBoot took %s", time.Since(start).Round(time.Second))
}

// sdPrepareImage turns the copy at root into the node's disk: the host name,
// the host-specific containerd setting, the test's cgroup unit, render's
// assets for the units' paths (docs/operations.md), and the units enabled.
func sdPrepareImage(t *FailureRecorder, root string) {
	t.Helper()
	write := func(rel, data string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/hostname", sdMachine+"\n")
	// This VM's bounding set lacks CAP_SYS_RESOURCE, so no process here may
	// lower an oom_score_adj: runc then fails the pause container's -998.
	// containerd clamps it with restrict_oom_score_adj, as
	// hack/containerd.sh sets it on this host; the shipped file says false,
	// which is right where root has every capability.
	if !hasCapSysResource(t) {
		p := filepath.Join(root, "etc/bootlet/containerd.toml")
		cfg, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		const from, to = "restrict_oom_score_adj = false", "restrict_oom_score_adj = true"
		if !strings.Contains(string(cfg), from) {
			t.Fatalf("%s no longer says %q", p, from)
		}
		write("etc/bootlet/containerd.toml", strings.Replace(string(cfg), from, to, 1))
	}
	write("etc/systemd/system/"+sdCgroupRW, `[Unit]
Description=e2e: the cgroup v1 controllers read-write (systemd-nspawn mounts them read-only)
DefaultDependencies=no
Before=sysinit.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -ec 'mount -o remount,rw /sys/fs/cgroup; for d in /sys/fs/cgroup/*/; do mount -o remount,bind,rw "$d"; done'

[Install]
WantedBy=sysinit.target
`)
	// The kubelet reads /dev/kmsg (its OOM watcher), which a container's
	// /dev does not have: kind's link to the console.
	write("etc/tmpfiles.d/bootlet-e2e-kmsg.conf", "L /dev/kmsg - - - - /dev/console\n")
	// render as docs/operations.md says, run in the image (its own bootlet,
	// in a chroot with its own /proc), with the node's name and address.
	run(t, "unshare", "--mount", "--pid", "--fork", "--mount-proc="+filepath.Join(root, "proc"), "chroot", root,
		"/usr/bin/bootlet", "render", "--asset-dir", "/etc/kubernetes", "--node-name", sdMachine, "--advertise-address", sdNodeIP,
		"--kubelet-runtime-endpoint", "unix:///run/bootlet/containerd.sock",
		"--cni-bin-dir", "/var/lib/bootlet-cni/bin", "--cni-conf-dir", "/var/lib/bootlet-cni/net.d",
		"--cni-data-dir", "/var/lib/bootlet-cni", "--flannel-run-dir", "/run/bootlet/flannel")
	run(t, "systemctl", append([]string{"--root=" + root, "enable", sdCgroupRW}, sdUnits...)...)
}

// hasCapSysResource reports whether this process's effective set has
// CAP_SYS_RESOURCE (24), as hack/containerd.sh's has_cap_sys_resource.
func hasCapSysResource(t testing.TB) bool {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return caps&(1<<24) != 0
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return false
}

// sdKernelTunables writes the host-wide tunables the kubelet's container
// manager requires (it cannot write them itself: /proc/sys is read-only in
// the container, and it refuses to start when they differ) and puts the old
// values back when the test ends.
func sdKernelTunables(t *FailureRecorder) {
	t.Helper()
	want := map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "1"}
	for _, name := range kubeletSysctls {
		p := filepath.Join("/proc/sys", name)
		old, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := os.WriteFile(p, old, 0o644); err != nil {
				t.Errorf("restore %s: %v", p, err)
			}
		})
		if err := os.WriteFile(p, []byte(want[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sdNode is the booted container: its nspawn process and its PID 1.
type sdNode struct {
	t       *FailureRecorder
	root    string
	console string
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
	pid1    int
	boots   int
}

// cgroupDirs are this test's cgroup in every mounted hierarchy.
func (n *sdNode) cgroupDirs() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + sdCgroup)
	return dirs
}

// makeCgroups makes sdCgroup in every hierarchy (cpuset's with its
// parent's CPUs and memory nodes, which a v1 cpuset needs before it takes a
// task): nspawn runs there, and in its cgroup namespace that is the node's
// root, so the kubelet's /kubepods is sdCgroup/kubepods on the host.
func (n *sdNode) makeCgroups() {
	t := n.t
	t.Helper()
	hs, err := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	if err != nil || len(hs) == 0 {
		t.Fatalf("no cgroup hierarchies under /sys/fs/cgroup: %v", err)
	}
	for _, h := range hs {
		d := filepath.Join(filepath.Dir(h), sdCgroup)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(filepath.Dir(h), f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// resetCgroups removes every cgroup below sdCgroup (after a reboot, as a
// fresh kernel has none), waiting for the dying PID namespace's tasks.
func (n *sdNode) resetCgroups() {
	n.t.Helper()
	if err := sdRemoveCgroups(n.cgroupDirs(), false); err != nil {
		n.t.Fatal(err)
	}
}

// sdRemoveCgroups kills whatever is left in dirs' subtrees and removes
// them, deepest first; with self, dirs too.
func sdRemoveCgroups(dirs []string, self bool) error {
	var errs []error
	for _, top := range dirs {
		var sub []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && (self || p != top) {
				sub = append(sub, p)
			}
			return nil
		})
		for i := len(sub) - 1; i >= 0; i-- {
			deadline := time.Now().Add(30 * time.Second)
			for {
				err := syscall.Rmdir(sub[i])
				if err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
				if time.Now().After(deadline) {
					procs, _ := os.ReadFile(filepath.Join(sub[i], "cgroup.procs"))
					errs = append(errs, fmt.Errorf("rmdir %s: %v (tasks: %q)", sub[i], err, procs))
					break
				}
				if procs, _ := os.ReadFile(filepath.Join(sub[i], "cgroup.procs")); len(procs) > 0 {
					for _, f := range strings.Fields(string(procs)) {
						if pid, _ := strconv.Atoi(f); pid > 0 {
							_ = syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return errors.Join(errs...)
}

// makeNetwork makes the node's network namespace and a veth pair: eth0 in
// it with sdNodeIP and a default route to the host's end, which has
// sdHostIP and forwarding off (whatever net.ipv4.ip_forward says): what the
// node sends to the host is delivered, nothing is routed on.
func (n *sdNode) makeNetwork() {
	t := n.t
	t.Helper()
	run(t, "ip", "netns", "add", sdNetns)
	run(t, "ip", "link", "add", sdHostLink, "type", "veth", "peer", "name", "eth0", "netns", sdNetns)
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+sdHostLink+"/forwarding", []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "ip", "addr", "add", sdHostIP+"/30", "dev", sdHostLink)
	run(t, "ip", "link", "set", sdHostLink, "up")
	run(t, "ip", "-n", sdNetns, "link", "set", "lo", "up")
	run(t, "ip", "-n", sdNetns, "addr", "add", sdNodeIP+"/30", "dev", "eth0")
	run(t, "ip", "-n", sdNetns, "link", "set", "eth0", "up")
	run(t, "ip", "-n", sdNetns, "route", "add", "default", "via", sdHostIP)
}

// removeNetwork deletes the veth pair and the namespace (with every
// interface, route and rule the node made in it).
func (n *sdNode) removeNetwork() {
	n.t.Helper()
	if err := sdRemoveNetwork(); err != nil {
		n.t.Fatal(err)
	}
}

func sdRemoveNetwork() error {
	var errs []error
	if _, err := os.Stat("/sys/class/net/" + sdHostLink); err == nil {
		if out, err := exec.Command("ip", "link", "del", sdHostLink).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip link del %s: %v %s", sdHostLink, err, out))
		}
	}
	if _, err := os.Stat("/run/netns/" + sdNetns); err == nil {
		if out, err := exec.Command("ip", "netns", "del", sdNetns).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns del %s: %v %s", sdNetns, err, out))
		}
	}
	return errors.Join(errs...)
}

// sdCleanupLeftovers removes what a killed earlier run of this test left:
// the names are this test's own.
func sdCleanupLeftovers(t *FailureRecorder) {
	t.Helper()
	if out, err := exec.Command("pgrep", "-f", "systemd-nspawn .*--machine="+sdMachine).Output(); err == nil {
		t.Fatalf("a container %s runs already (pids %s): another TestSystemdBoot, or a leftover to stop", sdMachine, strings.Fields(string(out)))
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + sdCgroup)
	if len(dirs) > 0 {
		t.Logf("removing the cgroups of an earlier run: %v", dirs)
	}
	if err := errors.Join(sdRemoveCgroups(dirs, true), sdRemoveNetwork()); err != nil {
		t.Fatalf("leftovers of an earlier run: %v", err)
	}
}

// boot starts `systemd-nspawn --boot` on the root, in sdCgroup and the
// network namespace, and waits for the container's PID 1. It returns the
// moment nspawn started.
func (n *sdNode) boot() time.Time {
	t := n.t
	t.Helper()
	n.boots++
	console, err := os.OpenFile(n.console, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(console, "\n===== boot %d =====\n", n.boots)
	var procs []string
	for _, d := range n.cgroupDirs() {
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	// The shell joins the cgroups, then becomes nspawn: a v1 cgroup cannot
	// be chosen at fork as a v2 one can (CLONE_INTO_CGROUP).
	args := append([]string{"-c", `p=$$; while [ "$1" != -- ]; do echo "$p" > "$1"; shift; done; shift; exec "$@"`, "sh"}, procs...)
	args = append(args, "--", "systemd-nspawn", "--boot", "--directory="+n.root, "--machine="+sdMachine,
		// No machined or D-Bus on the host: the container stays in this
		// process's cgroup (sdCgroup), nspawn registers nothing.
		"--register=no", "--keep-unit",
		"--network-namespace-path=/run/netns/"+sdNetns,
		// A node's services need them all (runc, CNI, mounts, eBPF): the
		// namespaces, not the bounding set, keep the host safe here.
		"--capability=all",
		// Beyond nspawn's default allow-list: runc joins a session keyring
		// per container, bootlet's apiserver port router loads eBPF.
		"--system-call-filter=@keyring bpf",
		"--link-journal=no", "--console=read-only")
	n.cmd = exec.Command("sh", args...)
	n.cmd.Env = append(os.Environ(), "SYSTEMD_NSPAWN_API_VFS_WRITABLE=network")
	n.cmd.Stdout, n.cmd.Stderr = console, console
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	poweredOn := time.Now()
	if err := n.cmd.Start(); err != nil {
		console.Close()
		t.Fatalf("systemd-nspawn: %v", err)
	}
	n.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		n.exitErr = cmd.Wait()
		console.Close()
		close(done)
	}(n.cmd, n.exited)
	n.pid1 = 0
	Eventually(t, time.Minute, func() (bool, string) {
		select {
		case <-n.exited:
			t.Fatalf("systemd-nspawn exited during boot %d: %v\n%s", n.boots, n.exitErr, n.consoleTail())
		default:
		}
		children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", n.cmd.Process.Pid, n.cmd.Process.Pid))
		for _, f := range strings.Fields(string(children)) {
			pid, _ := strconv.Atoi(f)
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); strings.HasSuffix(exe, "/systemd") {
				n.pid1 = pid
				return true, ""
			}
		}
		return false, "no systemd below systemd-nspawn yet:\n" + n.consoleTail()
	})
	return poweredOn
}

func (n *sdNode) consoleTail() string {
	b, _ := os.ReadFile(n.console)
	return tail(string(b), 3000)
}

// inside runs a command in every namespace of the container (as its
// services run, but in the host's cgroup).
func (n *sdNode) inside(args ...string) (string, error) {
	out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(n.pid1), "-a", "--"}, args...)...).CombinedOutput()
	return string(out), err
}

// waitUnitsActive waits until the three units are active.
func (n *sdNode) waitUnitsActive(timeout time.Duration) {
	n.t.Helper()
	Eventually(n.t, timeout, func() (bool, string) {
		out, _ := n.inside(append([]string{"systemctl", "is-active"}, sdUnits...)...)
		return strings.Join(strings.Fields(out), " ") == "active active active",
			"systemctl is-active " + strings.Join(sdUnits, " ") + ": " + out
	})
}

// unitProps reads systemctl show's properties of a unit ("" for the
// manager's).
func (n *sdNode) unitProps(unit string, props ...string) map[string]string {
	n.t.Helper()
	args := []string{"systemctl", "show"}
	if unit != "" {
		args = append(args, unit)
	}
	for _, p := range props {
		args = append(args, "-p", p)
	}
	out, err := n.inside(args...)
	if err != nil {
		n.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// checkUnits checks the units ran as they are meant to in this boot: each
// active and never restarted, each started only once the one before it was
// active (Type=notify: containerd's and bootlet's READY=1), nothing failed.
// It returns their start and ready times from systemd's own start.
func (n *sdNode) checkUnits(when string) string {
	t := n.t
	t.Helper()
	us := func(m map[string]string, k string) time.Duration {
		v, err := strconv.ParseInt(m[k], 10, 64)
		if err != nil || v == 0 {
			t.Errorf("%s: %s=%q", when, k, m[k])
		}
		return time.Duration(v) * time.Microsecond
	}
	boot := us(n.unitProps("", "UserspaceTimestampMonotonic"), "UserspaceTimestampMonotonic")
	var summary []string
	var prevActive time.Duration
	for i, u := range sdUnits {
		p := n.unitProps(u, "ActiveState", "SubState", "NRestarts", "ExecMainStartTimestampMonotonic", "ActiveEnterTimestampMonotonic")
		if p["ActiveState"] != "active" || p["SubState"] != "running" || p["NRestarts"] != "0" {
			t.Errorf("%s: %s is %s/%s after %s restarts", when, u, p["ActiveState"], p["SubState"], p["NRestarts"])
		}
		started, active := us(p, "ExecMainStartTimestampMonotonic"), us(p, "ActiveEnterTimestampMonotonic")
		if i > 0 && started < prevActive {
			t.Errorf("%s: %s started %s before %s was active", when, u, prevActive-started, sdUnits[i-1])
		}
		prevActive = active
		summary = append(summary, fmt.Sprintf("%s started %s, active %s", strings.TrimSuffix(u, ".service"),
			(started-boot).Round(time.Millisecond), (active-boot).Round(time.Millisecond)))
	}
	if out, err := n.inside("systemctl", "list-units", "--failed", "--no-legend", "--plain"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("%s: failed units: %v\n%s", when, err, out)
	}
	// make e2e installs the -race build: a race report fails the test, as
	// Bootlet.CheckRaces does for the framework's daemons.
	if out, err := n.inside("journalctl", "-b", "--no-pager", "-u", sdUnits[1]); err != nil {
		t.Errorf("%s: journalctl -u %s: %v", when, sdUnits[1], err)
	} else if i := strings.Index(out, "WARNING: DATA RACE"); i >= 0 {
		t.Errorf("%s: bootlet reported a data race:\n%s", when, out[i:min(len(out), i+6000)])
	}
	return strings.Join(summary, ", ") + " after systemd started"
}

// checkPodCgroups checks that the pods' cgroups are in the node's subtree,
// sdCgroup/kubepods, and not in the host's /kubepods: etcd's, in every v1
// controller hierarchy.
func (n *sdNode) checkPodCgroups(b *Bootlet) {
	t := n.t
	t.Helper()
	etcd, err := b.Client.CoreV1().Pods("kube-system").Get(context.Background(), "etcd", metav1.GetOptions{})
	if err != nil {
		t.Errorf("bootlet's etcd: %v", err)
		return
	}
	pod := "pod" + string(etcd.UID)
	for _, c := range []string{"memory", "cpu", "pids"} {
		in, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", c, sdCgroup, "kubepods", "*", pod))
		direct, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", c, sdCgroup, "kubepods", pod))
		host, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", c, "kubepods", "*", pod))
		hostDirect, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", c, "kubepods", pod))
		if len(in)+len(direct) != 1 || len(host)+len(hostDirect) != 0 {
			t.Errorf("etcd's cgroup %s in the %s hierarchy: below %s %v, in the host's /kubepods %v",
				pod, c, sdCgroup, append(in, direct...), append(host, hostDirect...))
		}
	}
}

// bootletClient is a client of bootlet's pod API in this boot, through the
// container's root seen from the host.
func (n *sdNode) bootletClient() *Bootlet {
	t := n.t
	t.Helper()
	sock := fmt.Sprintf("/proc/%d/root/run/bootlet/bootlet.sock", n.pid1)
	cs, err := podapi.NewClient("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	return &Bootlet{Socket: sock, NodeName: sdMachine, Client: cs}
}

// reboot runs `systemctl reboot` in the container and waits for nspawn to
// exit with 133, its code for a container that rebooted.
func (n *sdNode) reboot() {
	t := n.t
	t.Helper()
	if out, err := n.inside("systemctl", "reboot"); err != nil {
		t.Logf("systemctl reboot: %v %s", err, out)
	}
	select {
	case <-n.exited:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the container did not reboot within 3 min:\n%s", n.consoleTail())
	}
	var ee *exec.ExitError
	if !errors.As(n.exitErr, &ee) || ee.ExitCode() != 133 {
		t.Fatalf("systemd-nspawn exited with %v after systemctl reboot, want exit status 133:\n%s", n.exitErr, n.consoleTail())
	}
	n.pid1 = 0
}

// logTimeline logs this boot's control-plane events from the journal:
// bootlet's phases and checkpointer decisions, the kubelet's container
// starts and deaths of the control plane's pods.
func (n *sdNode) logTimeline(when string) {
	t := n.t
	t.Helper()
	out, err := n.inside("journalctl", "-b", "--no-pager", "-o", "short-precise", "-u", sdUnits[1], "-u", sdUnits[2])
	if err != nil {
		t.Errorf("journalctl: %v\n%s", err, tail(out, 2000))
		return
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(l, "bootlet[") && (strings.Contains(l, "NodePhaseChanged") || strings.Contains(l, "\"Checkpointer") ||
			strings.Contains(l, "Pod owner changed") || strings.Contains(l, "Activated pod checkpoint")),
			strings.Contains(l, "kubelet[") && strings.Contains(l, "SyncLoop (PLEG)") &&
				(strings.Contains(l, "kube-apiserver") || strings.Contains(l, "etcd") || strings.Contains(l, "kube-controller-manager") || strings.Contains(l, "kube-scheduler")):
			if len(l) > 260 {
				l = l[:260]
			}
			lines = append(lines, l)
		}
	}
	if len(lines) > 80 {
		lines = lines[:80]
	}
	t.Logf("%s, the control plane in the journal:\n%s", when, strings.Join(lines, "\n"))
}

// dump logs the console's tail, the units' journal and the failed units.
func (n *sdNode) dump() {
	t := n.t
	t.Logf("console of %s:\n%s", sdMachine, n.consoleTail())
	if n.pid1 == 0 {
		return
	}
	// The client-go deprecation warning of every Endpoints list (once a
	// second while the pivot waits) would fill the tail: left out.
	out, _ := n.inside("sh", "-c", fmt.Sprintf("journalctl -b --no-pager -o short-precise -u %s -u %s -u %s | grep -v 'v1 Endpoints is deprecated' | tail -n 200",
		sdUnits[0], sdUnits[1], sdUnits[2]))
	t.Logf("journal of the units:\n%s", out)
	out, _ = n.inside("systemctl", "list-units", "--failed", "--no-pager")
	t.Logf("failed units:\n%s", out)
}

// teardown stops the container (SIGTERM: nspawn has its systemd power off;
// SIGKILL to nspawn's process group after 90 s), then removes the cgroups,
// the network, nspawn's propagation directory, and checks that no mount is
// left under the root.
func (n *sdNode) teardown() {
	t := n.t
	if n.cmd != nil && n.exited != nil {
		select {
		case <-n.exited:
		default:
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-n.exited:
			case <-time.After(90 * time.Second):
				t.Errorf("systemd-nspawn did not stop within 90 s of SIGTERM: SIGKILL")
				_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
				<-n.exited
			}
		}
	}
	if err := sdRemoveCgroups(n.cgroupDirs(), true); err != nil {
		t.Errorf("teardown: %v", err)
	}
	if err := sdRemoveNetwork(); err != nil {
		t.Errorf("teardown: %v", err)
	}
	_ = os.RemoveAll("/run/systemd/nspawn/propagate/" + sdMachine)
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Errorf("teardown: %v", err)
	}
	for _, l := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(l); len(f) > 4 && (strings.HasPrefix(f[4], n.root) || strings.Contains(f[4], sdNetns)) {
			t.Errorf("teardown: a mount is left: %s", l)
		}
	}
}

// sdWaitBootstrapWithdrawn waits until bootlet runs none of the pivoted
// bootstrap pods and the apiserver lists none of their mirror pods (NAME-NODE).
func sdWaitBootstrapWithdrawn(t testing.TB, admin *kubernetes.Clientset, b *Bootlet) {
	t.Helper()
	ctx := context.Background()
	Eventually(t, 3*time.Minute, func() (bool, string) {
		var left []string
		for _, c := range pivoted {
			if _, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, c, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("bootlet's %s: %v", c, err))
			}
			if _, err := admin.CoreV1().Pods("kube-system").Get(ctx, c+"-"+sdMachine, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left = append(left, fmt.Sprintf("mirror pod %s-%s: %v", c, sdMachine, err))
			}
		}
		return len(left) == 0, "bootstrap pods not withdrawn: " + strings.Join(left, "; ")
	})
}

// sdWaitNodeReady waits until the node is Ready.
func sdWaitNodeReady(t testing.TB, admin *kubernetes.Clientset) {
	t.Helper()
	Eventually(t, 3*time.Minute, func() (bool, string) {
		node, err := admin.CoreV1().Nodes().Get(context.Background(), sdMachine, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue, fmt.Sprintf("node %s Ready=%s: %s", sdMachine, c.Status, c.Message)
			}
		}
		return false, "node " + sdMachine + " has no Ready condition"
	})
}
