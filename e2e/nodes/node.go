// Package nodes boots bootlet nodes on this one machine, each a
// `systemd-nspawn --boot` container with systemd as PID 1, and wires them
// together: the machinery TestSystemdBoot (one node) and the multi-node
// harness (`make cluster`, TestClusterJoinWorker) share.
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
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// A node's root filesystem and the files in it. Its processes (nspawn,
// boot, reboot, commands inside) are machine.go, its cgroups and the kernel
// tunables resources.go, its network namespace network.go, the removal of
// what a run left cleanup.go, the race detector's reports races.go.

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
