//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/e2e/nodes"
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
)

// sdUnits are the units of dist/systemd, in their boot order.
var sdUnits = []string{"bootlet-containerd.service", "bootlet.service", "bootlet-kubelet.service"}

// TestSystemdBoot boots a node from the shipped units of dist/systemd under a
// real systemd, as an operator's node would:
// `make install PREFIX=/usr IMAGES=1` into a copy of a Debian 12 root file
// system (hack/node-rootfs.sh, cached in _output/build), `bootlet render` in
// it for the units' paths, the three units enabled, and the copy booted with
// `systemd-nspawn --boot`, its own systemd as PID 1:
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
	if err := nodes.CheckHost(); err != nil {
		t.Fatal(err)
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
	n := newSDNode(t, root, filepath.Join(dir, "console.log"))
	n.cleanupLeftovers()
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

// sdPrepareImage turns the copy at root into the node's disk
// (nodes.PrepareRoot), render's assets for the units' paths
// (docs/operations.md), and the units enabled.
func sdPrepareImage(t *FailureRecorder, root string) {
	t.Helper()
	if err := nodes.PrepareRoot(root, sdMachine); err != nil {
		t.Fatal(err)
	}
	// render as docs/operations.md says, run in the image (its own bootlet,
	// in a chroot with its own /proc), with the node's name and address.
	if out, err := nodes.InChroot(root, append([]string{"/usr/bin/bootlet"}, nodes.RenderArgs(sdMachine, sdNodeIP)...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := nodes.Enable(root, append([]string{nodes.CgroupRWUnit}, sdUnits...)...); err != nil {
		t.Fatal(err)
	}
}

// sdKernelTunables writes the host-wide tunables the kubelet's container
// manager requires and puts the old values back when the test ends.
func sdKernelTunables(t *FailureRecorder) {
	t.Helper()
	old, err := nodes.SetKernelTunables()
	t.Cleanup(func() {
		if err := nodes.RestoreKernelTunables(old); err != nil {
			t.Errorf("%v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sdNode is the booted container (the machinery of package nodes) and the
// test's view of it.
type sdNode struct {
	t     *FailureRecorder
	node  *nodes.Node
	m     *nodes.Machine
	pid1  int
	boots int
}

func newSDNode(t *FailureRecorder, root, console string) *sdNode {
	return &sdNode{t: t, node: &nodes.Node{
		Name: sdMachine, Root: root, Console: console, Cgroup: sdCgroup, Netns: sdNetns, HostLink: sdHostLink,
		Net: nodes.Network{
			Addr:     netip.MustParsePrefix(sdNodeIP + "/30"),
			Gateway:  netip.MustParseAddr(sdHostIP),
			HostAddr: netip.MustParsePrefix(sdHostIP + "/30"),
		},
	}}
}

func (n *sdNode) makeCgroups() {
	n.t.Helper()
	if err := n.node.MakeCgroups(); err != nil {
		n.t.Fatal(err)
	}
}

// resetCgroups removes every cgroup below the node's (after a reboot, as a
// fresh kernel has none), waiting for the dying PID namespace's tasks.
func (n *sdNode) resetCgroups() {
	n.t.Helper()
	if err := n.node.RemoveCgroups(false); err != nil {
		n.t.Fatal(err)
	}
}

func (n *sdNode) makeNetwork() {
	n.t.Helper()
	if err := n.node.MakeNetwork(); err != nil {
		n.t.Fatal(err)
	}
}

func (n *sdNode) removeNetwork() {
	n.t.Helper()
	if err := n.node.RemoveNetwork(); err != nil {
		n.t.Fatal(err)
	}
}

// cleanupLeftovers removes what a killed earlier run of this test left:
// the names are this test's own.
func (n *sdNode) cleanupLeftovers() {
	n.t.Helper()
	if dirs := n.node.CgroupDirs(); len(dirs) > 0 {
		n.t.Logf("removing the cgroups of an earlier run: %v", dirs)
	}
	if err := n.node.Leftovers(); err != nil {
		n.t.Fatalf("leftovers of an earlier run: %v", err)
	}
}

// boot starts the container and waits for its PID 1. It returns the
// moment nspawn started.
func (n *sdNode) boot() time.Time {
	t := n.t
	t.Helper()
	n.boots++
	poweredOn := time.Now()
	m, err := n.node.Boot(fmt.Sprintf("boot %d", n.boots))
	if err != nil {
		t.Fatal(err)
	}
	n.m, n.pid1 = m, m.PID1
	return poweredOn
}

func (n *sdNode) consoleTail() string { return n.node.ConsoleTail(3000) }

// inside runs a command in every namespace of the container (as its
// services run, but in the host's cgroup).
func (n *sdNode) inside(args ...string) (string, error) {
	return nodes.Inside(n.pid1, args...)
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
	// make test-cluster installs the -race build: a race report fails the test, as
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
	n.t.Helper()
	return nodeBootlet(n.t, n.pid1, sdMachine)
}

// reboot runs `systemctl reboot` in the container and waits for nspawn to
// exit with 133, its code for a container that rebooted.
func (n *sdNode) reboot() {
	n.t.Helper()
	if err := n.m.Reboot(3 * time.Minute); err != nil {
		n.t.Fatalf("%v:\n%s", err, n.consoleTail())
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
// SIGKILL to nspawn's session after 90 s), then removes the cgroups, the
// network, nspawn's propagation directory, and checks that no mount is left
// under the root.
func (n *sdNode) teardown() {
	if n.m != nil {
		if err := n.m.Stop(90 * time.Second); err != nil {
			n.t.Errorf("teardown: %v", err)
		}
	}
	if err := n.node.Cleanup(); err != nil {
		n.t.Errorf("teardown: %v", err)
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
