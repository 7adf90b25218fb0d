// Package nodes boots bootlet nodes on this one machine, each a
// `systemd-nspawn --boot` container with systemd as PID 1, and wires them
// together: the machinery TestSystemdBoot (one node) and the multi-node
// harness (`make cluster`, TestClusterJoinWorker; issue 19) share.
//
// It is a package of its own, not a file of package e2e, because two kinds
// of callers need it: the e2e tests (build tag e2e, testing.TB) and a
// command that `make cluster` runs and that returns with the nodes left
// running (e2e/cluster). So it reports errors and takes no testing.TB, and
// it has no build tag: its pure parts (addresses, names, unit files) are
// unit-tested in `make unit`.
//
// What it owns on the host, and nothing else: per node, a cgroup of that
// node's name in every cgroup v1 hierarchy (Node.Cgroup), a network
// namespace and a veth pair (Node.Netns, Node.HostLink); for a cluster, one
// bridge (ClusterBridge), one FORWARD rule on it, the kernel tunables the
// kubelet requires (put back at the end), and /var/lib/bootlet-cluster. It
// never touches the host's /kubepods, a host kubelet or containerd, or any
// process it did not start: every process it kills is a task of a cgroup
// it made.
package nodes

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Node is one nspawn container and what it owns on the host.
type Node struct {
	// Name is the machine name (nspawn's --machine): it identifies the
	// node's nspawn process.
	Name string
	// Root is the directory nspawn boots (--directory).
	Root string
	// Console is the file the container's console is appended to.
	Console string
	// Cgroup is the cgroup the node runs in, in every hierarchy; in its
	// cgroup namespace that is "/", so its kubelet's /kubepods is
	// Cgroup/kubepods on the host.
	Cgroup string
	// Netns is the node's network namespace (/run/netns/Netns), HostLink
	// the host's end of its veth pair (the node's end is eth0).
	Netns, HostLink string
	// Net is the node's address and how the host side is wired.
	Net Network
	// Binds are extra --bind=HOST:NODE mounts (a node's containerd root on
	// the host's file system when its root is an overlay).
	Binds []string
}

// Network is a node's address and the host's side of its veth.
type Network struct {
	// Addr is eth0's address and prefix in the node.
	Addr netip.Prefix
	// Gateway is the node's default route: the host's address on the link
	// or the bridge.
	Gateway netip.Addr
	// HostAddr, when valid, is put on HostLink (a point-to-point /30).
	HostAddr netip.Prefix
	// Bridge, when set, is the host bridge HostLink is a port of.
	Bridge string
}

// CgroupRWUnit is a unit the nodes' images get (not shipped):
// systemd-nspawn mounts the host's cgroup v1 controllers read-only in the
// container (no API_VFS_WRITABLE mode changes that in systemd 252); the
// container's root may remount them read-write, and this unit does before
// sysinit.target, long before bootlet-containerd.
const CgroupRWUnit = "bootlet-e2e-cgroup-rw.service"

const cgroupRWUnitText = `[Unit]
Description=e2e: the cgroup v1 controllers read-write (systemd-nspawn mounts them read-only)
DefaultDependencies=no
Before=sysinit.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -ec 'mount -o remount,rw /sys/fs/cgroup; for d in /sys/fs/cgroup/*/; do mount -o remount,bind,rw "$d"; done'

[Install]
WantedBy=sysinit.target
`

// CheckHost reports what this machine lacks to boot nodes: the tools, and
// the cgroup v1 hybrid layout the nodes' cgroups are made in.
func CheckHost() error {
	var errs []error
	for _, tool := range []string{"systemd-nspawn", "debootstrap", "nsenter", "unshare", "chroot", "ip", "systemctl", "make", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			errs = append(errs, fmt.Errorf("%s is missing: hack/deps.sh installs it (systemd-container, debootstrap): %v", tool, err))
		}
	}
	for _, f := range []string{"/sys/fs/cgroup/memory/cgroup.procs", "/sys/fs/cgroup/systemd/cgroup.procs"} {
		if _, err := os.Stat(f); err != nil {
			errs = append(errs, fmt.Errorf("nodes run in cgroup v1 subtrees of the host (the hybrid layout of this VM): %v", err))
		}
	}
	if os.Geteuid() != 0 {
		errs = append(errs, fmt.Errorf("nodes need root (euid %d)", os.Geteuid()))
	}
	return errors.Join(errs...)
}

// Run runs a command and returns its combined output, or an error that
// holds it.
func Run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// PrepareRoot turns a root file system with bootlet installed (make
// install PREFIX=/usr) into a node's disk: its host name, the
// host-specific containerd setting, the cgroup unit, the kubelet's
// /dev/kmsg. Role-specific steps (render, enabling units) are the caller's.
func PrepareRoot(root, hostname string) error {
	write := func(rel, data string) error {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, []byte(data), 0o644)
	}
	if err := write("etc/hostname", hostname+"\n"); err != nil {
		return err
	}
	// This VM's bounding set lacks CAP_SYS_RESOURCE, so no process here may
	// lower an oom_score_adj: runc then fails the pause container's -998.
	// containerd clamps it with restrict_oom_score_adj, as
	// hack/containerd.sh sets it on this host; the shipped file says false,
	// which is right where root has every capability.
	has, err := HasCapSysResource()
	if err != nil {
		return err
	}
	if !has {
		p := filepath.Join(root, "etc/bootlet/containerd.toml")
		cfg, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		const from, to = "restrict_oom_score_adj = false", "restrict_oom_score_adj = true"
		if s := string(cfg); !strings.Contains(s, to) {
			if !strings.Contains(s, from) {
				return fmt.Errorf("%s no longer says %q", p, from)
			}
			if err := write("etc/bootlet/containerd.toml", strings.Replace(s, from, to, 1)); err != nil {
				return err
			}
		}
	}
	if err := write("etc/systemd/system/"+CgroupRWUnit, cgroupRWUnitText); err != nil {
		return err
	}
	// The kubelet reads /dev/kmsg (its OOM watcher), which a container's
	// /dev does not have: kind's link to the console.
	return write("etc/tmpfiles.d/bootlet-e2e-kmsg.conf", "L /dev/kmsg - - - - /dev/console\n")
}

// InChroot runs a command in root as the node would (its own binaries and
// /proc), before the node boots.
func InChroot(root string, args ...string) (string, error) {
	return Run("unshare", append([]string{"--mount", "--pid", "--fork", "--mount-proc=" + filepath.Join(root, "proc"), "chroot", root}, args...)...)
}

// RenderArgs are `bootlet render`'s flags for the shipped units' paths
// (dist/systemd/bootlet.default), for a node of that name and address.
func RenderArgs(name, addr string) []string {
	return append([]string{"render", "--asset-dir", "/etc/kubernetes", "--node-name", name, "--advertise-address", addr}, renderPathArgs...)
}

// renderPathArgs are render's flags for the shipped units' paths, and for
// a node in a container: its /proc/sys is read-only, so kube-proxy must
// leave nf_conntrack_max as the host has it (it exits when its write
// fails, as it does whenever the host's value differs from its figure:
// 262144 on a 23 GB host against its 131072), as kind's nodes do.
var renderPathArgs = []string{"--kubelet-runtime-endpoint", "unix:///run/bootlet/containerd.sock",
	"--cni-bin-dir", "/var/lib/bootlet-cni/bin", "--cni-conf-dir", "/var/lib/bootlet-cni/net.d",
	"--cni-data-dir", "/var/lib/bootlet-cni", "--flannel-run-dir", "/run/bootlet/flannel",
	"--kube-proxy-conntrack-max-per-core", "0"}

// RenderMastersArgs are `bootlet render`'s flags for every master of a
// cluster at once (bootkube's way: one render, shared CAs, keys and token,
// each master's leaf certificates and etcd member): it writes DIR/NAME/
// per master, each what RenderArgs writes for one node, with kubeconfigs
// and cluster-info naming endpoint (HOST:PORT), the one API address.
func RenderMastersArgs(dir, endpoint string, masters []Member) []string {
	args := []string{"render", "--asset-dir", dir}
	for _, m := range masters {
		args = append(args, "--master", m.Name+"="+m.Addr().String())
	}
	// --master-asset-dir: where each master's dir is put on it, which its
	// bootstrap pods name (the shipped units' /etc/kubernetes).
	args = append(args, "--control-plane-endpoint", endpoint, "--master-asset-dir", "/etc/kubernetes")
	return append(args, renderPathArgs...)
}

// Enable enables units in root (offline, systemctl --root).
func Enable(root string, units ...string) error {
	_, err := Run("systemctl", append([]string{"--root=" + root, "enable"}, units...)...)
	return err
}

// HasCapSysResource reports whether this process's effective set has
// CAP_SYS_RESOURCE (24), as hack/containerd.sh's has_cap_sys_resource.
func HasCapSysResource() (bool, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return false, err
			}
			return caps&(1<<24) != 0, nil
		}
	}
	return false, errors.New("no CapEff in /proc/self/status")
}

// KubeletTunables are the host-wide tunables the kubelet's container
// manager requires: it cannot write them itself (/proc/sys is read-only in
// the container) and refuses to start when they differ.
var KubeletTunables = map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "1"}

// SetKernelTunables writes KubeletTunables and returns their old values.
func SetKernelTunables() (map[string]string, error) {
	old := map[string]string{}
	for name, v := range KubeletTunables {
		p := filepath.Join("/proc/sys", name)
		b, err := os.ReadFile(p)
		if err != nil {
			return old, err
		}
		old[name] = strings.TrimSpace(string(b))
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			return old, err
		}
	}
	return old, nil
}

// RestoreKernelTunables puts back what SetKernelTunables returned.
func RestoreKernelTunables(old map[string]string) error {
	var errs []error
	for name, v := range old {
		if err := os.WriteFile(filepath.Join("/proc/sys", name), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// CgroupDirs are the node's cgroup in every mounted hierarchy.
func (n *Node) CgroupDirs() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + n.Cgroup)
	return dirs
}

// MakeCgroups makes the node's cgroup in every hierarchy (cpuset's with its
// parent's CPUs and memory nodes, which a v1 cpuset needs before it takes a
// task): nspawn runs there, and in its cgroup namespace that is the node's
// root, so the kubelet's /kubepods is Cgroup/kubepods on the host.
func (n *Node) MakeCgroups() error {
	hs, err := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	if err != nil || len(hs) == 0 {
		return fmt.Errorf("no cgroup hierarchies under /sys/fs/cgroup: %v", err)
	}
	for _, h := range hs {
		d := filepath.Join(filepath.Dir(h), n.Cgroup)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(filepath.Dir(h), f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// RemoveCgroups kills every task left in the node's cgroups and removes
// them, deepest first; without self, the node's own cgroups stay (empty of
// subgroups: after a reboot, as a fresh kernel has none).
func (n *Node) RemoveCgroups(self bool) error {
	return removeCgroups(n.CgroupDirs(), self)
}

func removeCgroups(dirs []string, self bool) error {
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
				killTasks(sub[i])
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return errors.Join(errs...)
}

// killTasks sends SIGKILL to every task of one cgroup.
func killTasks(dir string) {
	procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for _, f := range strings.Fields(string(procs)) {
		if pid, _ := strconv.Atoi(f); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// KillAll is a power cut: SIGKILL to every task in the node's cgroups,
// nspawn included (it runs in the node's own cgroup), until none is left.
func (n *Node) KillAll(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := 0
		for _, top := range n.CgroupDirs() {
			_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					return nil
				}
				if procs, _ := os.ReadFile(filepath.Join(p, "cgroup.procs")); len(strings.TrimSpace(string(procs))) > 0 {
					left++
					killTasks(p)
				}
				return nil
			})
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: tasks left in %d cgroups after %s of SIGKILL", n.Name, left, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// MakeNetwork makes the node's network namespace and a veth pair: eth0 in
// it with Net.Addr and a default route to Net.Gateway, the host's end with
// forwarding off (whatever net.ipv4.ip_forward says): what the node sends
// to the host is delivered, nothing is routed on. The host's end gets
// Net.HostAddr or joins Net.Bridge.
func (n *Node) MakeNetwork() error {
	steps := [][]string{
		{"netns", "add", n.Netns},
		{"link", "add", n.HostLink, "type", "veth", "peer", "name", "eth0", "netns", n.Netns},
	}
	for _, s := range steps {
		if _, err := Run("ip", s...); err != nil {
			return err
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+n.HostLink+"/forwarding", []byte("0"), 0o644); err != nil {
		return err
	}
	steps = nil
	if n.Net.HostAddr.IsValid() {
		steps = append(steps, []string{"addr", "add", n.Net.HostAddr.String(), "dev", n.HostLink})
	}
	if n.Net.Bridge != "" {
		steps = append(steps, []string{"link", "set", n.HostLink, "master", n.Net.Bridge})
	}
	steps = append(steps,
		[]string{"link", "set", n.HostLink, "up"},
		[]string{"-n", n.Netns, "link", "set", "lo", "up"},
		[]string{"-n", n.Netns, "addr", "add", n.Net.Addr.String(), "dev", "eth0"},
		[]string{"-n", n.Netns, "link", "set", "eth0", "up"},
		[]string{"-n", n.Netns, "route", "add", "default", "via", n.Net.Gateway.String()})
	for _, s := range steps {
		if _, err := Run("ip", s...); err != nil {
			return err
		}
	}
	return nil
}

// RemoveNetwork deletes the veth pair and the namespace (with every
// interface, route and rule the node made in it).
func (n *Node) RemoveNetwork() error {
	var errs []error
	if _, err := os.Stat("/sys/class/net/" + n.HostLink); err == nil {
		if _, err := Run("ip", "link", "del", n.HostLink); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := os.Stat("/run/netns/" + n.Netns); err == nil {
		if _, err := Run("ip", "netns", "del", n.Netns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// NspawnPIDs are the PIDs of running systemd-nspawn processes of this
// machine name (read from /proc: a look-up, nothing is signalled).
func (n *Node) NspawnPIDs() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "systemd-nspawn" && containsArg(args, "--machine="+n.Name) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// NspawnArgs are systemd-nspawn's arguments for the node.
func (n *Node) NspawnArgs() []string {
	args := []string{"--boot", "--directory=" + n.Root, "--machine=" + n.Name,
		// No machined or D-Bus on the host: the container stays in this
		// process's cgroup (n.Cgroup), nspawn registers nothing.
		"--register=no", "--keep-unit",
		"--network-namespace-path=/run/netns/" + n.Netns,
		// A node's services need them all (runc, CNI, mounts, eBPF): the
		// namespaces, not the bounding set, keep the host safe here.
		"--capability=all",
		// Beyond nspawn's default allow-list: runc joins a session keyring
		// per container; bootlet's apiserver port router loads eBPF and
		// borrows each apiserver's listener with pidfd_getfd, which
		// nspawn's list lacks even with every capability (refused with
		// EPERM, the router never routed: the self-hosted apiserver's
		// loopback reached the bootstrap one, x509, and it restarted).
		"--system-call-filter=@keyring bpf pidfd_getfd",
		"--link-journal=no", "--console=read-only"}
	for _, b := range n.Binds {
		args = append(args, "--bind="+b)
	}
	return args
}

// Machine is one boot of a node: its nspawn process and the container's
// PID 1.
type Machine struct {
	Cmd *exec.Cmd
	// PID1 is the container's systemd, as the host sees it.
	PID1 int
	// Exited is closed when nspawn exits, ExitErr is then its status.
	Exited  chan struct{}
	ExitErr error
}

// Stop stops the container as a power button does: SIGTERM to nspawn (its
// systemd powers off), SIGKILL to nspawn's session after timeout.
func (m *Machine) Stop(timeout time.Duration) error {
	select {
	case <-m.Exited:
		return nil
	default:
	}
	_ = m.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.Exited:
		return nil
	case <-time.After(timeout):
	}
	_ = syscall.Kill(-m.Cmd.Process.Pid, syscall.SIGKILL)
	<-m.Exited
	return fmt.Errorf("systemd-nspawn did not stop within %s of SIGTERM: SIGKILL", timeout)
}

// WaitExit waits for nspawn to exit and returns its exit code.
func (m *Machine) WaitExit(timeout time.Duration) (int, error) {
	select {
	case <-m.Exited:
	case <-time.After(timeout):
		return -1, fmt.Errorf("systemd-nspawn still runs after %s", timeout)
	}
	var ee *exec.ExitError
	if errors.As(m.ExitErr, &ee) {
		return ee.ExitCode(), nil
	}
	if m.ExitErr != nil {
		return -1, m.ExitErr
	}
	return 0, nil
}

// Boot starts `systemd-nspawn --boot` on the node's root, in its cgroups
// and network namespace, with the console appended to n.Console, and
// waits (up to a minute) for the container's PID 1. nspawn runs in a
// session of its own, so it outlives this process (`make cluster` returns
// with its nodes running) and no terminal's signal reaches it.
func (n *Node) Boot(banner string) (*Machine, error) {
	console, err := os.OpenFile(n.Console, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer console.Close()
	fmt.Fprintf(console, "\n===== %s %s =====\n", banner, time.Now().UTC().Format(time.RFC3339))
	var procs []string
	for _, d := range n.CgroupDirs() {
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	if len(procs) == 0 {
		return nil, fmt.Errorf("%s: no cgroups %s (MakeCgroups first)", n.Name, n.Cgroup)
	}
	// The shell joins the cgroups, then becomes nspawn: a v1 cgroup cannot
	// be chosen at fork as a v2 one can (CLONE_INTO_CGROUP).
	args := append([]string{"-c", `p=$$; while [ "$1" != -- ]; do echo "$p" > "$1"; shift; done; shift; exec "$@"`, "sh"}, procs...)
	args = append(append(args, "--", "systemd-nspawn"), n.NspawnArgs()...)
	cmd := exec.Command("sh", args...)
	cmd.Env = append(os.Environ(), "SYSTEMD_NSPAWN_API_VFS_WRITABLE=network")
	cmd.Stdout, cmd.Stderr = console, console
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("systemd-nspawn: %w", err)
	}
	m := &Machine{Cmd: cmd, Exited: make(chan struct{})}
	// Reaped here while this process lives; a detached node's nspawn, after
	// this process exits, by init.
	go func() { m.ExitErr = cmd.Wait(); close(m.Exited) }()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-m.Exited:
			return nil, fmt.Errorf("systemd-nspawn exited during %s: %v\n%s", banner, m.ExitErr, n.ConsoleTail(3000))
		default:
		}
		if pid := childSystemd(cmd.Process.Pid); pid > 0 {
			m.PID1 = pid
			return m, nil
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("no systemd below systemd-nspawn after a minute:\n%s", n.ConsoleTail(3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// childSystemd is the child of pid that runs systemd, or 0.
func childSystemd(pid int) int {
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, f := range strings.Fields(string(children)) {
		c, _ := strconv.Atoi(f)
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", c)); strings.HasSuffix(exe, "/systemd") {
			return c
		}
	}
	return 0
}

// PID1 finds the running container's systemd from its nspawn process (for
// a node booted by another process); 0 when the node is not running.
func (n *Node) PID1() int {
	for _, p := range n.NspawnPIDs() {
		if c := childSystemd(p); c > 0 {
			return c
		}
	}
	return 0
}

// ConsoleTail is the last max bytes of the console.
func (n *Node) ConsoleTail(max int) string {
	b, _ := os.ReadFile(n.Console)
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// Inside runs a command in every namespace of the container whose PID 1 is
// pid1 (as its services run, but in the host's cgroup).
func Inside(pid1 int, args ...string) (string, error) {
	if pid1 <= 0 {
		return "", fmt.Errorf("the node is not running")
	}
	out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(pid1), "-a", "--"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("in the node: %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Leftovers fails when the node runs, and removes what a killed earlier run
// left of it (its cgroups, its network).
func (n *Node) Leftovers() error {
	if pids := n.NspawnPIDs(); len(pids) > 0 {
		return fmt.Errorf("a container %s runs already (pids %v): another run, or a leftover to stop", n.Name, pids)
	}
	return errors.Join(n.RemoveCgroups(true), n.RemoveNetwork())
}

// Cleanup removes the node's cgroups (killing what is left in them), its
// network and nspawn's propagation directory, and reports any mount left
// under its root or of its namespace.
func (n *Node) Cleanup() error {
	errs := []error{n.RemoveCgroups(true), n.RemoveNetwork()}
	_ = os.RemoveAll("/run/systemd/nspawn/propagate/" + n.Name)
	if left := MountsUnder(n.Root, "/run/netns/"+n.Netns); len(left) > 0 {
		errs = append(errs, fmt.Errorf("mounts left: %s", strings.Join(left, "; ")))
	}
	return errors.Join(errs...)
}

// MountsUnder are the host's mount points at or below any of the paths.
func MountsUnder(paths ...string) []string {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return []string{err.Error()}
	}
	var left []string
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		if len(f) <= 4 {
			continue
		}
		for _, p := range paths {
			if f[4] == p || strings.HasPrefix(f[4], strings.TrimSuffix(p, "/")+"/") {
				left = append(left, f[4])
			}
		}
	}
	return left
}

// Reboot runs `systemctl reboot` in the container and waits for nspawn to
// exit with 133, its code for a container that rebooted. The caller boots
// it again (after resetting its cgroups and network, as a fresh kernel
// would have them).
func (m *Machine) Reboot(timeout time.Duration) error {
	if out, err := Inside(m.PID1, "systemctl", "reboot"); err != nil {
		// The connection may drop as systemd goes down: only the exit code
		// below decides.
		_ = out
	}
	code, err := m.WaitExit(timeout)
	if err != nil {
		return fmt.Errorf("the container did not reboot: %w", err)
	}
	if code != 133 {
		return fmt.Errorf("systemd-nspawn exited with %d (%v) after systemctl reboot, want 133", code, m.ExitErr)
	}
	m.PID1 = 0
	return nil
}

// RaceMarker starts every report of Go's race detector. A node's bootlet is
// make build's: with RACE=1 (make e2e) it reports each race on its stderr,
// which is its unit's journal, and goes on running.
const RaceMarker = "WARNING: DATA RACE"

// DataRaces returns the race reports in a journal's text: each from its
// marker to the detector's closing line of '=' (at most 80 lines of it).
func DataRaces(journal string) []string {
	var races []string
	lines := strings.Split(journal, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.Contains(lines[i], RaceMarker) {
			continue
		}
		end := i + 1
		for end < len(lines) && end-i < 80 && !strings.Contains(lines[end], RaceMarker) {
			done := strings.HasPrefix(strings.TrimSpace(lines[end]), "==================")
			end++
			if done {
				break
			}
		}
		races = append(races, strings.Join(lines[i:end], "\n"))
		i = end - 1
	}
	return races
}

// JournalRaces reads the whole journal of the running node whose PID 1 is
// pid1, every unit and every boot it kept (a volatile journal keeps this
// boot's only: read it before a power-off), and returns its race reports.
func JournalRaces(pid1 int) ([]string, error) {
	out, err := Inside(pid1, "journalctl", "--no-pager", "-q", "-o", "cat")
	if err != nil {
		return nil, err
	}
	return DataRaces(out), nil
}
