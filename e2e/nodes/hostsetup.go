package nodes

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// checkSubnetFree fails when the host has a route or address that overlaps
// ClusterSubnet (other than the harness's own bridge).
func checkSubnetFree() error {
	out, err := Run("ip", "-4", "-o", "addr", "show")
	if err != nil {
		return err
	}
	routes, err := Run("ip", "-4", "route", "show", "table", "all")
	if err != nil {
		return err
	}
	var clash []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 && f[1] != ClusterBridge {
			if p, err := netip.ParsePrefix(f[3]); err == nil && p.Overlaps(ClusterSubnet) {
				clash = append(clash, l)
			}
		}
	}
	for _, l := range strings.Split(routes, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || strings.Contains(l, "dev "+ClusterBridge) {
			continue
		}
		dst := f[0]
		if dst == "local" || dst == "broadcast" || dst == "unicast" {
			if len(f) < 2 {
				continue
			}
			dst = f[1]
		}
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if p, err := netip.ParsePrefix(dst); err == nil && p.Bits() > 0 && p.Overlaps(ClusterSubnet) {
			clash = append(clash, l)
		}
	}
	if len(clash) > 0 {
		return fmt.Errorf("the harness's subnet %s is in use on this host:\n%s", ClusterSubnet, strings.Join(clash, "\n"))
	}
	return nil
}

// forwardRule keeps bridged traffic between the nodes out of the host's
// FORWARD chain's verdict: with br_netfilter loaded (a node's kube-proxy
// loads it, and it is here) frames bridged on ClusterBridge traverse the
// host's iptables FORWARD, whose policy or a DROP rule would cut the nodes
// apart. Only -i and -o the bridge: nothing routed off it is accepted.
var forwardRule = []string{"FORWARD", "-i", ClusterBridge, "-o", ClusterBridge, "-m", "comment", "--comment", "bootlet-cluster: bridged node-to-node", "-j", "ACCEPT"}

// makeBridge makes ClusterBridge with the host's address and forwarding
// off (set before the link is up), and the FORWARD rule.
func makeBridge() error {
	if _, err := os.Stat("/sys/class/net/" + ClusterBridge); err != nil {
		if _, err := Run("ip", "link", "add", ClusterBridge, "type", "bridge"); err != nil {
			return err
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+ClusterBridge+"/forwarding", []byte("0"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+ClusterBridge+"/disable_ipv6", []byte("1"), 0o644); err != nil {
		return err
	}
	if _, err := Run("ip", "addr", "replace", netip.PrefixFrom(ClusterHostAddr, ClusterSubnet.Bits()).String(), "dev", ClusterBridge); err != nil {
		return err
	}
	if _, err := Run("ip", "link", "set", ClusterBridge, "up"); err != nil {
		return err
	}
	if _, err := Run("iptables", append([]string{"-w", "-C"}, forwardRule...)...); err != nil {
		if _, err := Run("iptables", append([]string{"-w", "-I"}, forwardRule...)...); err != nil {
			return err
		}
	}
	return nil
}

func removeBridge() error {
	var errs []error
	for {
		if _, err := Run("iptables", append([]string{"-w", "-C"}, forwardRule...)...); err != nil {
			break
		}
		if _, err := Run("iptables", append([]string{"-w", "-D"}, forwardRule...)...); err != nil {
			errs = append(errs, err)
			break
		}
	}
	if _, err := os.Stat("/sys/class/net/" + ClusterBridge); err == nil {
		if _, err := Run("ip", "link", "del", ClusterBridge); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// buildBase makes BaseDir anew: the cached rootfs (hack/node-rootfs.sh) and
// make install, as TestSystemdBoot's copy.
func buildBase(repo string) error {
	out, err := Run(filepath.Join(repo, "hack", "node-rootfs.sh"), "--out", filepath.Join(repo, "_output"))
	if err != nil {
		return err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	cached := lines[len(lines)-1]
	if err := os.RemoveAll(BaseDir); err != nil {
		return err
	}
	if _, err := Run("cp", "-a", "--reflink=auto", cached, BaseDir); err != nil {
		return err
	}
	_, err = Run("make", "-s", "-C", repo, "install", "DESTDIR="+BaseDir, "PREFIX=/usr", "IMAGES=1")
	return err
}

// mountRoot mounts the member's overlay root (BaseDir below, Dir/upper
// above) at Dir/root.
func mountRoot(m Member) error {
	d := m.Dir()
	for _, s := range []string{"upper", "work", "root", "containerd"} {
		if err := os.MkdirAll(filepath.Join(d, s), 0o755); err != nil {
			return err
		}
	}
	if len(MountsUnder(filepath.Join(d, "root"))) > 0 {
		return nil
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", BaseDir, filepath.Join(d, "upper"), filepath.Join(d, "work"))
	if err := syscall.Mount("overlay", filepath.Join(d, "root"), "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay at %s (%s): %w", filepath.Join(d, "root"), opts, err)
	}
	return nil
}

func unmountRoot(m Member) error {
	root := filepath.Join(m.Dir(), "root")
	if len(MountsUnder(root)) == 0 {
		return nil
	}
	if err := syscall.Unmount(root, 0); err != nil {
		return fmt.Errorf("umount %s: %w (mounts under it: %v)", root, err, MountsUnder(root))
	}
	return nil
}

// setDefaultArgs writes KUBELET_ARGS into the node's /etc/default/bootlet:
// its address for the kubelet's --node-ip (the bridge's, the one
// interface; said explicitly so that a node with more never picks another),
// and this machine's disk thresholds (kubeletDiskArgs); and bootletArgs as
// BOOTLET_ARGS and BOOTLET_WORKER_ARGS: a worker's daemon leads the
// masters' controller too once the worker is promoted, with the same
// flags.
func setDefaultArgs(root string, m Member, bootletArgs string) error {
	p := filepath.Join(root, "etc/default/bootlet")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	s := string(b)
	for _, v := range []struct{ name, value string }{
		{"KUBELET_ARGS", "--node-ip " + m.Addr().String() + " " + kubeletDiskArgs},
		{"BOOTLET_ARGS", bootletArgs},
		{"BOOTLET_WORKER_ARGS", bootletArgs},
	} {
		from := "\n" + v.name + "=\n"
		if !strings.Contains(s, from) {
			return fmt.Errorf("%s no longer has an empty %s=", p, v.name)
		}
		s = strings.Replace(s, from, "\n"+v.name+"="+v.value+"\n", 1)
	}
	return os.WriteFile(p, []byte(s), 0o644)
}

// kubeletDiskArgs lower the kubelets' image GC and disk eviction thresholds
// on the harness's nodes, and only there (the shipped configuration keeps
// the kubelet's defaults, as e2e/kubelet.go's writeConfig says). Every
// node's disk is this machine's one file system, which its Go build cache
// leaves about 17% available: four nodes' images and containers take it
// under the kubelet's imagefs threshold (15%), and the kubelets then
// collect every image no container uses, an upgrade's imported target
// among them (seen, before bootlet's imports were pinned: the apiserver's
// image gone two minutes after its import; an image a test tags with ctr
// still is not pinned), and refuse new pods for disk pressure. Set here, a
// machine with room behaves as it would with the defaults.
var kubeletDiskArgs = fmt.Sprintf("--image-gc-high-threshold=%d --image-gc-low-threshold=%d --eviction-hard=memory.available<%s,nodefs.available<%s,imagefs.available<%s",
	MachineImageGCHigh, MachineImageGCLow, MachineEvictionHard["memory.available"], MachineEvictionHard["nodefs.available"], MachineEvictionHard["imagefs.available"])

// This machine's image GC and hard eviction thresholds for every test
// kubelet (the harness's, e2e/kubelet.go, and every node's here, as
// kubeletDiskArgs): memory at the kubelet's default, the disk's low.
var (
	MachineImageGCHigh, MachineImageGCLow int32 = 98, 97
	MachineEvictionHard                         = map[string]string{"memory.available": "100Mi", "nodefs.available": "2%", "imagefs.available": "2%"}
)

// prepareMember prepares a new member's disk: PrepareRoot, the kubelet's
// address, keepalived (its configuration in the group of every node, and
// its unit), the role's units enabled. A master's /etc/kubernetes is
// renderMasters'; a worker has nothing rendered (it joins).
func prepareMember(m Member, all []Member, bootletArgs string) error {
	root := m.Node().Root
	if err := PrepareRoot(root, m.Name); err != nil {
		return err
	}
	if err := setDefaultArgs(root, m, bootletArgs); err != nil {
		return err
	}
	if err := writeKeepalived(root, m, all); err != nil {
		return err
	}
	units := WorkerUnits
	if m.Role == Master {
		units = MasterUnits
	}
	return Enable(root, append([]string{CgroupRWUnit}, units...)...)
}

// renderDir is where renderMasters renders, in the first master's root;
// removed once each master has its own directory.
const renderDir = "/var/tmp/bootlet-render-masters"

// renderMasters renders every master's assets at once, in the first
// master's root (its bootlet, before anything boots), with render's
// --master per master and the VIP as --control-plane-endpoint, then gives
// each master its own directory as /etc/kubernetes (the path of the
// shipped units, /etc/default/bootlet) and removes the shared render: no
// master's disk holds another's leaf keys.
func renderMasters(masters []Member) error {
	first := masters[0].Node().Root
	all := filepath.Join(first, renderDir)
	if err := os.RemoveAll(all); err != nil {
		return err
	}
	if out, err := InChroot(first, append([]string{"/usr/bin/bootlet"}, RenderMastersArgs(renderDir, ControlPlaneEndpoint(), masters)...)...); err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	for _, m := range masters {
		src := filepath.Join(all, m.Name)
		if _, err := os.Stat(filepath.Join(src, "admin.conf")); err != nil {
			return fmt.Errorf("render wrote no assets for %s: %w", m.Name, err)
		}
		dst := filepath.Join(m.Node().Root, "etc/kubernetes")
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if _, err := Run("cp", "-a", src+"/.", dst+"/"); err != nil {
			return err
		}
	}
	return os.RemoveAll(all)
}
