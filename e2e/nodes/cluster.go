package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The harness's own names and addresses on the host.
const (
	// StateDir holds the cluster: the shared lower tree (base), per node
	// its overlay's upper and work dirs, the mounted root, containerd's
	// root, its console; cluster.json; admin.conf.
	StateDir = "/var/lib/bootlet-cluster"
	// ClusterBridge joins the nodes' veths; the host has ClusterHostAddr on
	// it, with forwarding off.
	ClusterBridge = "bl-cluster0"
	// MachinePrefix prefixes a node's machine, cgroup and netns names.
	MachinePrefix = "bootlet-cluster-"
	// linkPrefix prefixes the host's end of a node's veth (IFNAMSIZ 15:
	// "blc-worker-99").
	linkPrefix = "blc-"
)

// ClusterSubnet is the nodes' network: unused on this VM (its one external
// network is 192.0.2.0/24; TestSystemdBoot uses 172.30.87.0/30; the pod
// and service networks are 10.244.0.0/16 and 10.96.0.0/12). Up refuses
// to start when a route or address of the host overlaps it.
var (
	ClusterSubnet   = netip.MustParsePrefix("172.30.90.0/24")
	ClusterHostAddr = netip.MustParseAddr("172.30.90.1")
)

// Role is what a node runs.
type Role string

const (
	// Master: bootlet-containerd, bootlet, bootlet-kubelet (bootlet render,
	// the pivot to self-hosted), as TestSystemdBoot's node.
	Master Role = "master"
	// Worker: bootlet-containerd and bootlet-kubelet-worker, joined with
	// `bootlet join`.
	Worker Role = "worker"
)

// MasterUnits and WorkerUnits are the units enabled in each role's image.
var (
	MasterUnits = []string{"bootlet-containerd.service", "bootlet.service", "bootlet-kubelet.service"}
	WorkerUnits = []string{"bootlet-containerd.service", "bootlet-kubelet-worker.service"}
)

// Member is one node of the cluster by name.
type Member struct {
	Name string
	Role Role
	// Index counts from 1 within the role.
	Index int
}

// Members are the cluster's nodes: master-1..master-M, worker-1..worker-W.
func Members(masters, workers int) ([]Member, error) {
	if masters < 1 || masters > 89 || workers < 0 || workers > 99 {
		return nil, fmt.Errorf("MASTERS=%d WORKERS=%d: want 1-89 masters and 0-99 workers", masters, workers)
	}
	var ms []Member
	for i := 1; i <= masters; i++ {
		ms = append(ms, Member{Name: fmt.Sprintf("master-%d", i), Role: Master, Index: i})
	}
	for i := 1; i <= workers; i++ {
		ms = append(ms, Member{Name: fmt.Sprintf("worker-%d", i), Role: Worker, Index: i})
	}
	return ms, nil
}

// ParseMember is the member a node name stands for.
func ParseMember(name string) (Member, error) {
	var i int
	for _, r := range []Role{Master, Worker} {
		if _, err := fmt.Sscanf(name, string(r)+"-%d", &i); err == nil && fmt.Sprintf("%s-%d", r, i) == name && i > 0 {
			return Member{Name: name, Role: r, Index: i}, nil
		}
	}
	return Member{}, fmt.Errorf("node %q: want master-N or worker-N", name)
}

// Addr is the member's address: masters .11 up, workers .101 up.
func (m Member) Addr() netip.Addr {
	b := ClusterSubnet.Addr().As4()
	if m.Role == Master {
		b[3] = byte(10 + m.Index)
	} else {
		b[3] = byte(100 + m.Index)
	}
	return netip.AddrFrom4(b)
}

// Dir is the member's state directory.
func (m Member) Dir() string { return filepath.Join(StateDir, m.Name) }

// Node is the member as a Node: its root is an overlay (BaseDir below,
// Dir/upper above) mounted at Dir/root, and containerd's root is Dir/containerd
// on the host's file system (bind-mounted over /var/lib/bootlet-containerd),
// because containerd's overlayfs snapshotter cannot put its upper dirs on
// an overlay.
func (m Member) Node() *Node {
	d := m.Dir()
	return &Node{
		Name:     MachinePrefix + m.Name,
		Root:     filepath.Join(d, "root"),
		Console:  filepath.Join(d, "console.log"),
		Cgroup:   MachinePrefix + m.Name,
		Netns:    MachinePrefix + m.Name,
		HostLink: linkPrefix + m.Name,
		Net: Network{
			Addr:    netip.PrefixFrom(m.Addr(), ClusterSubnet.Bits()),
			Gateway: ClusterHostAddr,
			Bridge:  ClusterBridge,
		},
		Binds: []string{filepath.Join(d, "containerd") + ":/var/lib/bootlet-containerd"},
	}
}

// BaseDir is the installed tree every node's overlay has below: the cached
// Debian rootfs plus `make install PREFIX=/usr IMAGES=1`, read-only once
// built.
var BaseDir = filepath.Join(StateDir, "base")

// AdminConf is where Up copies the first master's admin.conf (its server
// is the VIP on the bridge, which the host reaches).
var AdminConf = filepath.Join(StateDir, "admin.conf")

// State is what cluster.json keeps between the harness's commands.
type State struct {
	Masters, Workers int
	// Tunables are the kernel tunables' values before Up (Down restores
	// them).
	Tunables map[string]string
	Created  time.Time
}

func statePath() string { return filepath.Join(StateDir, "cluster.json") }

// LoadState reads cluster.json; os.ErrNotExist when no cluster is up.
func LoadState() (*State, error) {
	b, err := os.ReadFile(statePath())
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", statePath(), err)
	}
	return &s, nil
}

func (s *State) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := statePath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, statePath())
}

// Logf is how the harness reports progress.
type Logf func(format string, args ...any)

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

// setKubeletArgs writes KUBELET_ARGS into the node's /etc/default/bootlet:
// its address for the kubelet's --node-ip (the bridge's, the one
// interface; said explicitly so that a node with more never picks another).
func setKubeletArgs(root string, m Member) error {
	p := filepath.Join(root, "etc/default/bootlet")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	const from = "\nKUBELET_ARGS=\n"
	if !strings.Contains(string(b), from) {
		return fmt.Errorf("%s no longer has an empty KUBELET_ARGS=", p)
	}
	s := strings.Replace(string(b), from, "\nKUBELET_ARGS=--node-ip "+m.Addr().String()+"\n", 1)
	return os.WriteFile(p, []byte(s), 0o644)
}

// prepareMember prepares a new member's disk: PrepareRoot, the kubelet's
// address, keepalived (a master's configuration and unit, a worker's unit
// disabled), the role's units enabled. A master's /etc/kubernetes is
// renderMasters'; a worker has nothing rendered (it joins).
func prepareMember(m Member, masters []Member) error {
	root := m.Node().Root
	if err := PrepareRoot(root, m.Name); err != nil {
		return err
	}
	if err := setKubeletArgs(root, m); err != nil {
		return err
	}
	if err := writeKeepalived(root, m, masters); err != nil {
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

// PowerOn starts a member whose disk exists: its cgroups, network
// namespace, overlay root, and nspawn, detached. The host side (bridge,
// tunables) must be up.
func PowerOn(m Member) (*Machine, error) {
	n := m.Node()
	if pids := n.NspawnPIDs(); len(pids) > 0 {
		return nil, fmt.Errorf("%s runs already (nspawn %v)", m.Name, pids)
	}
	if _, err := os.Stat(filepath.Join(m.Dir(), "upper")); err != nil {
		return nil, fmt.Errorf("%s has no disk (%v): make cluster first", m.Name, err)
	}
	// What a power cut left: cgroups and network namespace are the
	// kernel's, a new boot starts without them.
	if err := errors.Join(n.RemoveCgroups(true), n.RemoveNetwork()); err != nil {
		return nil, err
	}
	if err := mountRoot(m); err != nil {
		return nil, err
	}
	if err := n.MakeCgroups(); err != nil {
		return nil, err
	}
	if err := n.MakeNetwork(); err != nil {
		return nil, err
	}
	return n.Boot("power on " + m.Name)
}

// PowerOff cuts a member's power: its veth removed (it answers nothing
// any more), every task of its cgroups (nspawn, the container's systemd,
// containerd, the kubelet, bootlet, shims, containers, keepalived)
// SIGKILLed, its cgroups and network namespace removed, its root
// unmounted. Its disk (Dir/upper, Dir/containerd) stays; its /run was a
// tmpfs of the container and is gone.
func PowerOff(m Member) error {
	n := m.Node()
	// The link first: a machine without power answers nothing. Killed
	// first, its processes would leave its network namespace up for the
	// seconds the rest takes, refusing connections to its addresses (the
	// VIP it held among them) where a dead machine stays silent.
	var errs []error
	if _, err := os.Stat("/sys/class/net/" + n.HostLink); err == nil {
		if _, err := Run("ip", "link", "del", n.HostLink); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, n.KillAll(time.Minute))
	// nspawn may still be exiting: its mount namespace holds the root
	// until it is gone.
	deadline := time.Now().Add(30 * time.Second)
	for len(n.NspawnPIDs()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	errs = append(errs, unmountRoot(m), n.Cleanup())
	return errors.Join(errs...)
}

// Cluster is a running cluster as the harness sees it.
type Cluster struct {
	Members []Member
	Admin   kubernetes.Interface
}

// AdminClient is a client of the first master's apiserver with its
// admin.conf.
func AdminClient(path string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 5 * time.Second
	return kubernetes.NewForConfig(cfg)
}

// Phases are how long each part of Up took.
type Phases []Phase

// Phase is one timed part of Up.
type Phase struct {
	Name string
	Took time.Duration
	// Load is /proc/loadavg's 1-minute load when the phase ended.
	Load string
}

func (ps Phases) String() string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  %-40s %8s  (load %s)\n", p.Name, p.Took.Round(100*time.Millisecond), p.Load)
	}
	return b.String()
}

// Load1 is the 1-minute load average.
func Load1() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// Up makes a cluster from nothing and returns once every node is Ready
// (a worker with a podCIDR): the shared tree, the host side (tunables,
// bridge), each node's disk (one render for all masters, each master's
// keepalived holding the VIP), every node booted at once; the masters
// bootstrap together to self-hosted, each as TestSystemdBoot's node does;
// once every master is Ready, each worker joins through the VIP with the
// line `bootlet join print` prints on the first master and starts its
// kubelet. The nodes stay running when it returns (Down removes them).
//
// With noBoot it stops once the disks are prepared (nothing runs; for a
// look at the nodes' files, or a machine that must stay quiet).
func Up(ctx context.Context, repo string, masters, workers int, noBoot bool, logf Logf) (*Cluster, Phases, error) {
	var phases Phases
	start := time.Now()
	t0 := start
	phase := func(name string) {
		phases = append(phases, Phase{Name: name, Took: time.Since(t0), Load: Load1()})
		logf("%s: %s (load %s)", name, time.Since(t0).Round(100*time.Millisecond), Load1())
		t0 = time.Now()
	}
	ms, err := Members(masters, workers)
	if err != nil {
		return nil, nil, err
	}
	if err := CheckHost(); err != nil {
		return nil, nil, err
	}
	if _, err := LoadState(); err == nil {
		return nil, nil, fmt.Errorf("a cluster is up already (%s): make cluster-down first", statePath())
	}
	for _, m := range ms {
		if err := m.Node().Leftovers(); err != nil {
			return nil, nil, err
		}
	}
	if err := checkSubnetFree(); err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(StateDir, 0o755); err != nil {
		return nil, nil, err
	}
	st := &State{Masters: masters, Workers: workers, Created: time.Now().UTC()}
	old, err := SetKernelTunables()
	st.Tunables = old
	if serr := st.save(); serr != nil || err != nil {
		return nil, nil, errors.Join(err, serr)
	}
	if err := buildBase(repo); err != nil {
		return nil, phases, err
	}
	phase("shared tree (rootfs + make install)")
	if err := makeBridge(); err != nil {
		return nil, phases, err
	}
	var mastersOnly []Member
	for _, m := range ms {
		if m.Role == Master {
			mastersOnly = append(mastersOnly, m)
		}
	}
	for _, m := range ms {
		if err := mountRoot(m); err != nil {
			return nil, phases, err
		}
		if err := prepareMember(m, mastersOnly); err != nil {
			return nil, phases, fmt.Errorf("%s: %w", m.Name, err)
		}
	}
	if err := renderMasters(mastersOnly); err != nil {
		return nil, phases, fmt.Errorf("render: %w", err)
	}
	phase("disks (overlays, one render for the masters)")
	if noBoot {
		return &Cluster{Members: ms}, phases, nil
	}
	machines := map[string]*Machine{}
	for _, m := range ms {
		mc, err := PowerOn(m)
		if err != nil {
			return nil, phases, fmt.Errorf("%s: %w", m.Name, err)
		}
		machines[m.Name] = mc
	}
	phase("nspawn started, systemd up in every node")
	master := ms[0]
	mroot := master.Node().Root
	b, err := os.ReadFile(filepath.Join(mroot, "etc/kubernetes/admin.conf"))
	if err != nil {
		return nil, phases, err
	}
	if err := os.WriteFile(AdminConf, b, 0o600); err != nil {
		return nil, phases, err
	}
	admin, err := AdminClient(AdminConf)
	if err != nil {
		return nil, phases, err
	}
	c := &Cluster{Members: ms, Admin: admin}
	for _, m := range mastersOnly {
		if err := WaitNodeReady(ctx, admin, m.Name, 10*time.Minute); err != nil {
			return c, phases, fmt.Errorf("%w\n%s", err, m.Node().ConsoleTail(2000))
		}
		phase(m.Name + " Ready")
	}
	if err := WaitClusterInfoSigned(ctx, admin, 5*time.Minute); err != nil {
		return c, phases, err
	}
	phase("cluster-info signed (a worker may join)")
	var line []string
	for _, m := range ms {
		if m.Role != Worker {
			continue
		}
		if line == nil {
			if line, err = JoinLine(machines[master.Name].PID1); err != nil {
				return c, phases, err
			}
		}
		if err := Join(m, machines[m.Name].PID1, line); err != nil {
			return c, phases, fmt.Errorf("%s: %w", m.Name, err)
		}
	}
	for _, m := range ms {
		if err := WaitNodeReady(ctx, admin, m.Name, 10*time.Minute); err != nil {
			return c, phases, fmt.Errorf("%w\n%s", err, m.Node().ConsoleTail(2000))
		}
	}
	if workers > 0 {
		phase("workers joined and Ready with a podCIDR")
	}
	phases = append(phases, Phase{Name: "make cluster, from nothing to all nodes Ready", Took: time.Since(start), Load: Load1()})
	return c, phases, nil
}

// JoinLine runs `bootlet join print` in the master (its rendered token,
// admin.conf's server, the CA's hash) and returns the printed command's
// words.
func JoinLine(masterPID1 int) ([]string, error) {
	out, err := Inside(masterPID1, "/usr/bin/bootlet", "join", "print", "--asset-dir", "/etc/kubernetes")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "bootlet" && f[1] == "join" {
			return f, nil
		}
	}
	return nil, fmt.Errorf("bootlet join print printed no join command:\n%s", out)
}

// Join runs the printed line in the worker, with where its files go
// (--out /etc/kubernetes, the worker kubelet unit's paths) and its CRI
// socket (bootlet-containerd's, for kubelet-config.yaml), and starts its
// kubelet. The join writes bootstrap-kubelet.conf, kubelet-config.yaml
// (from the cluster's kube-system/kubelet-config) and the kubelet client
// CA: nothing comes from the master's disk.
func Join(m Member, pid1 int, line []string) error {
	args := append([]string{"/usr/bin/bootlet"}, line[1:]...)
	args = append(args, "--out", "/etc/kubernetes", "--cri-socket", "unix:///run/bootlet/containerd.sock", "--discovery-timeout", "2m")
	// A 401 right after cluster-info is first signed was seen once (load
	// 24, the control plane pivoting): the apiserver's bootstrap-token
	// authenticator had not seen the token's Secret yet. A person would run
	// the line again; so does the harness, for up to two minutes.
	var out string
	var err error
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(3 * time.Second) {
		if out, err = Inside(pid1, args...); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return err
	}
	for _, f := range []string{"bootstrap-kubelet.conf", "kubelet-config.yaml", "kubelet-client-ca.crt"} {
		if !strings.Contains(out, f) {
			return fmt.Errorf("bootlet join did not say it wrote %s:\n%s", f, out)
		}
	}
	if _, err := Inside(pid1, "systemctl", "start", "--no-block", "bootlet-kubelet-worker.service"); err != nil {
		return err
	}
	// The token's only copy on the worker goes once the kubelet holds a
	// certificate of its own that the apiserver accepts (join finish waits
	// for that, and never removes it earlier).
	if out, err := Inside(pid1, "/usr/bin/bootlet", "join", "finish", "--out", "/etc/kubernetes", "--timeout", "4m"); err != nil {
		return fmt.Errorf("bootlet join finish: %w\n%s", err, out)
	}
	return nil
}

// WaitNodeReady waits until the node is Ready and has a podCIDR.
func WaitNodeReady(ctx context.Context, cs kubernetes.Interface, name string, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, string) {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue && node.Spec.PodCIDR != "",
					fmt.Sprintf("node %s Ready=%s (%s), podCIDR %q", name, c.Status, c.Message, node.Spec.PodCIDR)
			}
		}
		return false, "node " + name + " has no Ready condition"
	})
}

// WaitClusterInfoSigned waits until kube-public/cluster-info carries a
// signature (the controller-manager's bootstrapsigner): what `bootlet
// join`'s discovery verifies.
func WaitClusterInfoSigned(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, string) {
		cm, err := cs.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
		if err != nil {
			return false, "cluster-info: " + err.Error()
		}
		for k := range cm.Data {
			if strings.HasPrefix(k, "jws-kubeconfig-") {
				return true, ""
			}
		}
		return false, "cluster-info has no jws-kubeconfig-* signature yet"
	})
}

func poll(ctx context.Context, timeout time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s: %s", timeout, msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Running are the cluster's members, from the state directory.
func Running() ([]Member, error) {
	ents, err := os.ReadDir(StateDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var ms []Member
	for _, e := range ents {
		if m, err := ParseMember(e.Name()); err == nil && e.IsDir() {
			ms = append(ms, m)
		}
	}
	return ms, nil
}

// Down removes everything Up made: every node powered off, its state
// removed, the bridge and the FORWARD rule, the kernel tunables restored,
// StateDir removed. It then checks that nothing is left: no nspawn of the
// cluster, no cgroup, netns, veth, bridge, mount or rule.
func Down(logf Logf) error {
	ms, err := Running()
	if err != nil {
		return err
	}
	// Nodes of any count a killed Up may have left, by name: the state
	// directory may list fewer.
	var errs []error
	for _, m := range ms {
		if err := PowerOff(m); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
		}
	}
	st, serr := LoadState()
	if serr == nil && st.Tunables != nil {
		errs = append(errs, RestoreKernelTunables(st.Tunables))
	}
	errs = append(errs, removeBridge())
	if left := MountsUnder(StateDir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("mounts left under %s: %v", StateDir, left))
	} else if err := os.RemoveAll(StateDir); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, leftovers())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	logf("cluster down: no node, cgroup, netns, veth, bridge, rule, mount or state left")
	return nil
}

// leftovers lists anything of the harness still on the host.
func leftovers() error {
	var left []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), "--machine="+MachinePrefix) && strings.Contains(string(b), "systemd-nspawn") {
			left = append(left, "process "+e.Name())
		}
	}
	if cg, _ := filepath.Glob("/sys/fs/cgroup/*/" + MachinePrefix + "*"); len(cg) > 0 {
		left = append(left, fmt.Sprintf("cgroups %v", cg))
	}
	if ns, _ := filepath.Glob("/run/netns/" + MachinePrefix + "*"); len(ns) > 0 {
		left = append(left, fmt.Sprintf("netns %v", ns))
	}
	if l, _ := filepath.Glob("/sys/class/net/" + linkPrefix + "*"); len(l) > 0 {
		left = append(left, fmt.Sprintf("links %v", l))
	}
	if _, err := os.Stat("/sys/class/net/" + ClusterBridge); err == nil {
		left = append(left, "bridge "+ClusterBridge)
	}
	if _, err := os.Stat(StateDir); err == nil {
		left = append(left, StateDir)
	}
	if _, err := Run("iptables", append([]string{"-w", "-C"}, forwardRule...)...); err == nil {
		left = append(left, "iptables FORWARD rule")
	}
	if len(left) > 0 {
		return fmt.Errorf("left on the host: %s", strings.Join(left, "; "))
	}
	return nil
}
