package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/certificates/autorenew"
	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/checkpointer"
	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/handoff"
	mastersagent "github.com/bootlet/bootlet/masters/agent"
	masterscontroller "github.com/bootlet/bootlet/masters/controller"
	masterssigner "github.com/bootlet/bootlet/masters/signer"
	"github.com/bootlet/bootlet/nodephase"
	"github.com/bootlet/bootlet/noderecover/recoverlock"
	"github.com/bootlet/bootlet/ownprocess"
	"github.com/bootlet/bootlet/pivot"
	"github.com/bootlet/bootlet/podapi"
	"github.com/bootlet/bootlet/reuseport"
	"github.com/bootlet/bootlet/runner"
	"github.com/bootlet/bootlet/servinggate"
	upgradecontroller "github.com/bootlet/bootlet/upgrade/controller"
	"github.com/bootlet/bootlet/upgrade/nodeagent"
)

// node holds the components as Run builds them: each start function
// reads what earlier ones built and adds its own.
type node struct {
	o        Options
	pivot    *rest.Config // nil: no pivot
	handoff  handoff.Config
	store    *checkpoint.Store
	reg      *podapi.Registry
	gate     *runner.RuntimeGate
	srv      *podapi.Server
	hand     *handoff.Handoff
	phase    *nodephase.Source
	ckpt     atomic.Pointer[checkpointer.Checkpointer]
	serveErr chan error
	rt       *cri.Runtime
	mgr      *runner.Manager
	// The port hand-over, when the apiserver port is routed.
	handover func(ctx context.Context, incoming, outgoing types.UID)
	verdicts ownprocess.Verdicts // an interface: nil stays nil, not a nil *Router
}

// Run is the daemon, until ctx ends or a listener fails: its components in
// their start order. The API serves from the checkpoint store before the
// container runtime answers; the pods go to the runner once it does.
func Run(parent context.Context, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	// `bootlet recover` holds this lock exclusively while it moves the
	// node's state; the daemon holds it shared for its life, so recover
	// refuses while one runs. No waiting: systemd starts the unit again
	// (Restart=always) once recover is done, and a start blocked for a
	// whole restore would outlast its start timeout anyway.
	recoverLock, err := recoverlock.Acquire(o.RootDir, recoverlock.Daemon)
	if err != nil {
		return err
	}
	defer recoverLock.Release()
	n := &node{o: o, serveErr: make(chan error, 3)}
	if n.pivot, err = pivotConfig(o); err != nil {
		return err
	}
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if err := n.openStore(); err != nil {
		return err
	}
	n.newAPI()
	if err := n.serve(ctx); err != nil {
		return err
	}
	if err := n.connectRuntime(ctx); err != nil {
		if ctx.Err() != nil {
			klog.InfoS("bootlet stopping before the container runtime answered")
			return nil
		}
		return err
	}
	n.startRunner(ctx)
	if err := n.preloadImages(ctx); err != nil {
		return err
	}
	n.recoverPods(ctx)
	// Every stored pod has its worker now, so the handoff never sees a
	// partial set of pods.
	go n.hand.Run(ctx, n.mgr)
	n.setTCPMigrateReq()
	n.startPortHandover(ctx)
	n.startPivot(ctx)
	n.startUpgradeController(ctx)
	n.startServingGate(ctx)
	n.startCheckpointer(ctx)
	n.applyManifestsDir()
	n.startCertRenewal(ctx)
	n.ready(ctx)
	return n.wait(ctx, stop)
}

func (o Options) validate() error {
	if o.CgroupDriver != cri.CgroupDriverCgroupfs && o.CgroupDriver != cri.CgroupDriverSystemd {
		return fmt.Errorf("--cgroup-driver must be cgroupfs or systemd, not %q", o.CgroupDriver)
	}
	if o.SelfHostedAssets != "" && o.PivotKubeconfig == "" {
		return errors.New("--self-hosted-assets needs --pivot-kubeconfig (the apiserver to create them in)")
	}
	return nil
}

// pivotConfig is the apiserver of --pivot-kubeconfig (nil: no pivot).
func pivotConfig(o Options) (*rest.Config, error) {
	if o.PivotKubeconfig == "" {
		return nil, nil
	}
	c, err := clientcmd.BuildConfigFromFlags("", o.PivotKubeconfig)
	if err != nil {
		return nil, fmt.Errorf("--pivot-kubeconfig: %w", err)
	}
	return c, nil
}

// openStore prepares the root dir and opens the checkpoint store and the
// registry over it; the handoff's configuration decides where pods' dirs
// live, so it is settled here.
func (n *node) openStore() error {
	o := n.o
	n.handoff = handoff.Config{HealthzURL: o.KubeletHealthzURL, StaticPodPath: o.KubeletStaticPodDir,
		KubeletRootDir: o.KubeletRootDir, WriteActuated: o.KubeletActuated}
	handoffRootDir := ""
	if n.handoff.Enabled() {
		handoffRootDir = o.KubeletRootDir
		// The start gate's files sit beside the API socket, where the
		// kubelet's unit finds them (`bootlet kubelet-gate --dir`).
		n.handoff.Gate = handoff.NewStartGate(filepath.Dir(o.Socket))
	}
	if err := runner.CheckPodDirs(o.RootDir, handoffRootDir); err != nil {
		return err
	}
	if err := runner.PrepareRootDir(o.RootDir); err != nil {
		return err
	}
	store, err := checkpoint.Open(o.RootDir)
	if err != nil {
		return fmt.Errorf("open checkpoint store: %w", err)
	}
	reg, err := podapi.NewRegistry(o.NodeName, store)
	if err != nil {
		return err
	}
	// NewRegistry may quarantine records the store verified but that do not
	// decode; report them together with the store's own.
	for _, q := range store.Quarantined() {
		klog.ErrorS(nil, "Quarantined a damaged checkpoint record", "path", q.Path, "reason", q.Reason)
		reg.Events.NodeEvent(o.NodeName, v1.EventTypeWarning, "CheckpointQuarantined",
			fmt.Sprintf("damaged checkpoint record moved to %s: %s", q.Path, q.Reason))
	}
	n.store, n.reg = store, reg
	return nil
}

// newAPI builds the API server over the registry, the runtime gate it
// serves through until the runtime answers, the handoff and the node's
// phase, and the readiness checks.
func (n *node) newAPI() {
	o, reg := n.o, n.reg
	// The API serves from the checkpoint before the runtime answers: reads
	// work and writes are stored while containerd is down or not started
	// yet; the gate hands pods to the runner once recovery runs.
	n.gate = &runner.RuntimeGate{}
	var _ podapi.PodRuntime = n.gate
	var _ podapi.StreamRuntime = n.gate // exec, attach, port-forward (podapi/stream.go)
	reg.SetRuntime(n.gate)
	n.srv = podapi.NewServer(reg)
	n.srv.EffectiveConfig = o.EffectiveConfig
	n.srv.SetLimits(o.Limits.API)
	// A static copy of a pod with Secret values in env would show them in
	// its mirror pod: with the handoff on, such pods are refused.
	reg.SetPodPolicy(podapi.PodPolicy{MaxPods: o.Limits.MaxPods, RefuseSecretEnv: n.handoff.Enabled()})
	n.srv.RegisterMetrics(append(cri.Collectors(), runner.Collectors()...)...)
	// The node's phase on bootlet's Node object (bootlet status). The
	// manager and the checkpointer exist only once the runtime answers.
	n.handoff.Owners, n.handoff.Objects, n.handoff.Events = reg, reg, reg.Events
	n.hand = handoff.New(n.handoff)
	n.phase = &nodephase.Source{HandoffConfigured: n.handoff.Enabled(), PivotConfigured: n.pivot != nil, CheckpointerConfigured: o.CheckpointerKubeconfig != "",
		Pods: reg.ListPods, PivotDoneFile: pivot.RecordPath(o.RootDir),
		KubeletUp: n.hand.KubeletUp,
		Checkpointer: func() checkpointer.Status {
			if c := n.ckpt.Load(); c != nil {
				return c.Status()
			}
			return checkpointer.Status{}
		},
		Events: reg.Events, NodeName: o.NodeName}
	n.srv.SetNodeStatus(n.phase.UpdateNode)
	warm := make(chan struct{})
	go func() { reg.WarmUp(); close(warm) }()
	n.srv.AddReadyCheck("writes", func() error {
		select {
		case <-warm:
			return nil
		default:
			return errors.New("field managers are still being built")
		}
	})
	n.srv.AddReadyCheck("runtime", func() error {
		if err := n.gate.RuntimeError(); err != nil {
			return fmt.Errorf("container runtime unavailable: %w", err)
		}
		return nil
	})
}

// serve starts the listeners: the TCP one (mutual TLS), the read-only
// socket and the main unix socket.
func (n *node) serve(ctx context.Context) error {
	o := n.o
	mode, gid := os.FileMode(0o600), -1
	if o.SocketGroup != "" {
		g, err := lookupGroup(o.SocketGroup)
		if err != nil {
			return err
		}
		mode, gid = 0o660, g
	}
	if err := configureLocalTrust(n.srv, n.reg, &o.LocalTrust); err != nil {
		return err
	}
	if err := startTCP(ctx, n.srv, &o.TCP, o.RootDir, o.NodeName, n.serveErr); err != nil {
		return err
	}
	if err := startReadOnlySocket(ctx, n.srv, &o.LocalTrust, n.serveErr); err != nil {
		return err
	}
	go func() { n.serveErr <- n.srv.ServeUnix(ctx, o.Socket, mode, gid) }()
	klog.InfoS("bootlet serving", "socket", o.Socket, "node", o.NodeName, "runtime", o.RuntimeEndpoint)
	releaseStartupPagesAt(o.ReleaseStartupPages, "serving")
	return nil
}

// runtimeEvent records the container runtime's going away and coming back
// on the Node.
func (n *node) runtimeEvent(err error) {
	if err != nil {
		n.reg.Events.NodeEvent(n.o.NodeName, v1.EventTypeWarning, "ContainerRuntimeUnavailable", "container runtime is not answering: "+err.Error())
	} else {
		n.reg.Events.NodeEvent(n.o.NodeName, v1.EventTypeNormal, "ContainerRuntimeAvailable", "container runtime is answering again")
	}
}

// connectRuntime waits for the container runtime (runtime.go).
func (n *node) connectRuntime(ctx context.Context) error {
	rt, err := connectRuntime(ctx, n.o.RuntimeEndpoint, n.gate, n.runtimeEvent)
	n.rt = rt
	return err
}

// startRunner builds the runner's manager over the runtime and connects
// the gate to it.
func (n *node) startRunner(ctx context.Context) {
	o := n.o
	facts := runner.DetectNodeFacts()
	// The runner sees the handoff through its small interface: a nil
	// *Handoff must stay a nil interface.
	var runnerHandoff runner.Handoff
	if n.hand != nil {
		runnerHandoff = n.hand
	}
	n.mgr = runner.NewManager(ctx, runner.Config{
		NodeName: o.NodeName, RootDir: o.RootDir, PodRootDir: o.PodRootDir, PodLogsDir: o.PodLogDir, ContainerLogsDir: o.ContainerLogDir, CgroupDriver: o.CgroupDriver,
		Runtime: n.rt, Objects: n.reg, Events: n.reg.Events, Status: n.reg,
		HostIPs: facts.HostIPs, MachineMemory: facts.MachineMemory, Allocatable: facts.Allocatable,
		Handoff: runnerHandoff, KubeletRootDir: o.KubeletRootDir,
	})
	n.gate.Connected(n.mgr)
	go n.mgr.MonitorRuntime(ctx, time.Second, n.runtimeEvent)
}

// preloadImages imports --preload-images before any pod starts.
func (n *node) preloadImages(ctx context.Context) error {
	if n.o.PreloadImages == "" {
		return nil
	}
	files, err := cri.ArchivesIn(n.o.PreloadImages)
	if err != nil {
		return fmt.Errorf("--preload-images: %w", err)
	}
	start := time.Now()
	names, err := cri.ImportArchives(ctx, n.o.RuntimeEndpoint, files)
	if err != nil {
		return fmt.Errorf("--preload-images: %w", err)
	}
	klog.InfoS("Imported images", "images", names, "duration", time.Since(start))
	return nil
}

// recoverPods adopts or cleans up what runs, then hands every stored pod
// to its worker.
func (n *node) recoverPods(ctx context.Context) {
	if err := n.mgr.CleanupOrphans(ctx, n.reg.DesiredUIDs()); err != nil {
		klog.ErrorS(err, "Cleaning up orphaned sandboxes failed")
	}
	n.gate.Open(n.mgr)
	n.reg.Start()
	n.gate.FinishStart(n.reg, n.reg)
}

// setTCPMigrateReq sets net.ipv4.tcp_migrate_req for a pivot.
func (n *node) setTCPMigrateReq() {
	if n.pivot == nil {
		return
	}
	if _, err := pivot.EnsureTCPMigrateReq(pivot.TCPMigrateReqPath, n.o.TCPMigrateReq); err != nil {
		klog.ErrorS(err, "net.ipv4.tcp_migrate_req not set; a pivot may reset connections queued at the closing apiserver listener")
	}
}

// startPortHandover routes the apiserver port (handover.go) where bootlet
// may withdraw an apiserver: with the pivot or the checkpointer. A node
// whose checkpointer's identity is not there yet (a worker, until an
// administrator labels it a master) gets a router once it is; a router
// that does not build is tried again, on every node, as a withdrawal must
// not meet an unrouted port.
func (n *node) startPortHandover(ctx context.Context) {
	o := n.o
	if o.HandoverDrain <= 0 || (n.pivot == nil && o.CheckpointerKubeconfig == "") {
		return
	}
	build := func() (*reuseport.Router, error) {
		return apiserverRouter(n.pivot, o.PivotKubeconfig, o.CheckpointerKubeconfig, o.ManifestsDir, criApiservers(n.rt))
	}
	slot := &routerSlot{drain: o.HandoverDrain}
	n.handover, n.verdicts = slot.handover, slot
	// The pivot's identity is there from the start; a worker's
	// checkpointer identity comes with its label.
	identity := ""
	if n.pivot == nil {
		identity = o.CheckpointerKubeconfig
		if _, err := os.Stat(identity); errors.Is(err, os.ErrNotExist) {
			klog.InfoS("The apiserver port is routed once this node has the checkpointer's identity (a master's)", "kubeconfig", identity)
			go slot.routeWhenPresent(ctx, identity, identityPoll, build)
			return
		}
	}
	// Built before the pivot starts, which may withdraw an apiserver at
	// once.
	router, err := build()
	if err != nil {
		// Its first try, at once, logs why.
		go slot.routeWhenPresent(ctx, identity, identityPoll, build)
		return
	}
	go router.Run(ctx)
	slot.router.Store(router)
}

// identityPoll is how often a worker's daemon looks for the checkpointer's
// identity its masters' agent writes once the node is labelled: well
// within the agent's own round, which prepares the etcd member after it.
const identityPoll = 2 * time.Second

// startPivot hands the control plane over to its self-hosted pods.
func (n *node) startPivot(ctx context.Context) {
	if n.pivot == nil {
		return
	}
	o := n.o
	go func() {
		if err := pivot.Run(ctx, pivot.Config{NodeName: o.NodeName, APIServer: n.pivot,
			SelfHostedDir: o.SelfHostedAssets, Pods: n.reg, Events: n.reg.Events, DoneFile: pivot.RecordPath(o.RootDir),
			Handover: n.handover, Verdicts: n.verdicts}); err != nil {
			klog.ErrorS(err, "Pivot to self-hosted stopped")
		}
	}()
}

// startUpgradeController runs, on a master with the pivot's identity, the
// candidate for the one upgrade controller among the masters (package
// upgrade/controller) with the masters' controller (masters/controller), and this node's agent of its kubelet's and etcd
// member's steps (package upgrade/nodeagent). It needs no identity of its own: the pivot's
// (render's admin.conf) already creates the control plane's objects, which
// is what the controller changes; a worker holds no such identity.
func (n *node) startUpgradeController(ctx context.Context) {
	if n.pivot == nil {
		return
	}
	member := etcdPod{reg: n.reg, root: n.o.RootDir}
	// The etcd member certificates of a node an administrator labelled are
	// signed with the etcd CA its member's pod names, by the leader alone.
	go n.mastersCandidate(n.o.PivotKubeconfig, func() (string, string, error) {
		a, err := member.Access()
		if err != nil {
			return "", "", err
		}
		return a.CAFile, strings.TrimSuffix(a.CAFile, ".crt") + ".key", nil
	}).Run(ctx)
	go n.mastersAgent(n.o.PivotKubeconfig).Run(ctx)
	if n.o.KubeletBinary != "" {
		go nodeagent.New(nodeagent.Config{NodeName: n.o.NodeName, Kubeconfig: n.o.PivotKubeconfig, RuntimeAddress: n.o.RuntimeEndpoint,
			KubeletBinary: n.o.KubeletBinary, RestartCommand: strings.Fields(n.o.KubeletRestartCommand), Etcd: member}).Run(ctx)
	}
}

// mastersCandidate is this daemon's candidate for the one upgrade
// controller among the masters, reading the API with kubeconfig. The
// masters' controller and the etcd member signer lead with it (etcdCA:
// the etcd CA's files the signer signs with): one leader runs all three,
// so no master is added or removed during an upgrade's step. A first-boot
// master runs it with the pivot's identity, a promoted one with the
// identity it makes (promotedleader.go).
func (n *node) mastersCandidate(kubeconfig string, etcdCA func() (certFile, keyFile string, err error)) *upgradecontroller.Controller {
	member := etcdPod{reg: n.reg, root: n.o.RootDir}
	controller := masterscontroller.New(masterscontroller.Config{EtcdAccess: member.Access, DeadAfter: n.o.MasterDeadAfter})
	signer := masterssigner.New(masterssigner.Config{EtcdCA: etcdCA})
	return upgradecontroller.New(upgradecontroller.Config{Identity: n.o.NodeName, Kubeconfig: kubeconfig, GateTimeout: n.o.UpgradeGateTimeout,
		AlsoLeading: []func(context.Context, kubernetes.Interface, dynamic.Interface){controller.Lead, signer.Lead}})
}

// mastersAgent is this node's side of the masters' operations, reading
// the API with kubeconfig. The file its demotion writes sits beside the
// API socket, where the node's keepalived check reads it (docs/cluster.md,
// "The API address").
//
// With the pivot's identity the daemon runs a candidate of the masters'
// controller (startUpgradeController), and its agent says so on the Node.
func (n *node) mastersAgent(kubeconfig string) *mastersagent.Agent {
	return mastersagent.New(mastersagent.Config{NodeName: n.o.NodeName, Kubeconfig: kubeconfig, Member: etcdPod{reg: n.reg, root: n.o.RootDir},
		WithdrawnFile: filepath.Join(filepath.Dir(n.o.Socket), mastersagent.WithdrawnFileName),
		CanLead:       n.pivot != nil && kubeconfig == n.o.PivotKubeconfig})
}

// startServingGate: the self-hosted apiserver's pods are Ready only once
// bootlet sets their serving gate (package servinggate), so the gate runs
// wherever bootlet may run one: with the pivot (which waits for that
// Ready) or the checkpointer. It uses the checkpointer's identity, whose
// Role grants the status patch, else the pivot's.
func (n *node) startServingGate(ctx context.Context) {
	o := n.o
	if n.pivot == nil && o.CheckpointerKubeconfig == "" {
		return
	}
	gcfg := servinggate.Config{NodeName: o.NodeName, Kubeconfig: o.CheckpointerKubeconfig, Verdicts: n.verdicts, Events: n.reg.Events}
	if gcfg.Kubeconfig == "" {
		gcfg.REST = n.pivot
	}
	go servinggate.New(gcfg).Run(ctx)
}

// startCheckpointer runs the checkpointer of self-hosted pods and, with its
// identity, the master's controllers (controllers.go), and on a node
// without the pivot its side of the masters' operations.
func (n *node) startCheckpointer(ctx context.Context) {
	o := n.o
	if o.CheckpointerKubeconfig == "" {
		return
	}
	timing := checkpointer.DefaultTiming
	timing.ActivateAfter, timing.ActivateAfterStart, timing.WithdrawAfter = o.CheckpointerActivate, o.CheckpointerStart, o.CheckpointerWithdraw
	c := checkpointer.New(checkpointer.Config{NodeName: o.NodeName, Kubeconfig: o.CheckpointerKubeconfig,
		Namespaces: o.CheckpointNamespaces, PodRunning: n.mgr.PodRunning, Store: n.store, Registry: n.reg, Events: n.reg.Events, Timing: timing,
		Handover: n.handover, Verdicts: n.verdicts})
	n.ckpt.Store(c)
	go c.Run(ctx)
	startNodeGuard(ctx, o.CheckpointerKubeconfig)
	if n.pivot == nil {
		// A node without the pivot's identity (one an administrator
		// labelled a master: its agent wrote this identity) runs its side
		// of the masters' operations with the checkpointer's, as a
		// first-boot master runs it with the pivot's.
		go n.mastersAgent(o.CheckpointerKubeconfig).Run(ctx)
		// And, once it is a whole master, it is a candidate of the
		// masters' controller (promotedleader.go).
		go (&promotedCandidate{n: n}).run(ctx)
	}
}

// applyManifestsDir applies --manifests-dir (controllers.go).
func (n *node) applyManifestsDir() {
	if n.o.ManifestsDir == "" {
		return
	}
	if err := applyManifestsDir(n.reg, n.o.ManifestsDir, pivot.RecordPath(n.o.RootDir)); err != nil {
		klog.ErrorS(err, "Applying --manifests-dir failed")
	}
}

// startCertRenewal runs the automatic certificate renewal
// (certificates/autorenew): the asset dir's leaves only where the daemon
// pivots a control plane.
func (n *node) startCertRenewal(ctx context.Context) {
	o := n.o
	if o.CertRenewBefore <= 0 {
		return
	}
	cfg := autorenew.Config{Before: o.CertRenewBefore, NodeName: o.NodeName, RootDir: o.RootDir, PKI: n.srv.PKI,
		Event: n.reg.Events.NodeEvent, Tools: autorenew.ExecTools(o.ToolsPath)}
	if o.SelfHostedAssets != "" && o.PivotKubeconfig != "" {
		cfg.AssetDir, cfg.Kubeconfig = filepath.Dir(filepath.Clean(o.SelfHostedAssets)), o.PivotKubeconfig
	}
	go autorenew.New(cfg).Run(ctx)
}

// ready says so on /readyz and to systemd, starts watching the phase and
// releases the start-up pages.
func (n *node) ready(ctx context.Context) {
	n.srv.SetReady()
	// From here on the phase is watched, not only computed when asked: its
	// changes are logged and recorded as NodePhaseChanged events.
	go n.phase.Run(ctx, time.Second)
	releaseStartupPagesAt(n.o.ReleaseStartupPages, "ready") // memory.go
	go releaseAfterBursts(ctx, n.o.ReleaseStartupPages, n.mgr.MutatingCallsDone)
	if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		klog.ErrorS(err, "sd_notify failed")
	}
}

// wait runs until ctx ends or a listener fails, then stops the workers.
func (n *node) wait(ctx context.Context, stop context.CancelFunc) error {
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-n.serveErr:
	}
	// Stop the workers, then let the mutating CRI calls under way finish
	// (bounded): cancelling one mid-call leaves half-made containers
	// (containerd#11037). Nothing is stopped: pods keep running.
	stop()
	klog.InfoS("bootlet stopping; pods keep running")
	if !n.mgr.Shutdown(runner.ShutdownWait) {
		klog.InfoS("Runtime calls still under way at exit; the next start adopts or cleans up what they leave", "waited", runner.ShutdownWait)
	}
	return runErr
}
