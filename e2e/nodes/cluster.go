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
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// A cluster's members and its bring-up (Up). The host side of bring-up
// (bridge, base tree, members' roots, render) is hostsetup.go, powering a
// member on and off power.go, a worker's join join.go, the teardown
// teardown.go, the cluster's one API address vip.go.

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
	// Worker: bootlet-containerd, bootlet-kubelet-worker and
	// bootlet-upgrade-agent, joined with `bootlet join`.
	Worker Role = "worker"
)

// MasterUnits and WorkerUnits are the units enabled in each role's image.
var (
	MasterUnits = []string{"bootlet-containerd.service", "bootlet.service", "bootlet-kubelet.service"}
	WorkerUnits = []string{"bootlet-containerd.service", "bootlet-kubelet-worker.service", "bootlet-upgrade-agent.service", "bootlet-worker.service"}
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

// Spec is the cluster Up makes.
type Spec struct {
	Masters, Workers int
	// NoBoot stops Up once the disks are prepared (nothing runs; for a
	// look at the nodes' files, or a machine that must stay quiet).
	NoBoot bool
	// BootletArgs are every node's BOOTLET_ARGS and BOOTLET_WORKER_ARGS
	// (/etc/default/bootlet): extra flags of bootlet.service's daemon and
	// of bootlet-worker.service's.
	BootletArgs string
}

// Up makes a cluster from nothing and returns once every node is Ready
// (a worker with a podCIDR): the shared tree, the host side (tunables,
// bridge), each node's disk (one render for all masters, every node's
// keepalived in the VIP's group), every node booted at once; the masters
// bootstrap together to self-hosted, each as TestSystemdBoot's node does;
// once every master is Ready, each worker joins through the VIP with the
// line `bootlet join print` prints on the first master and starts its
// kubelet. The nodes stay running when it returns (Down removes them).
func Up(ctx context.Context, repo string, spec Spec, logf Logf) (*Cluster, Phases, error) {
	masters, workers, noBoot := spec.Masters, spec.Workers, spec.NoBoot
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
		if err := prepareMember(m, ms, spec.BootletArgs); err != nil {
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
