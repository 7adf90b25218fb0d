package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	criutil "k8s.io/cri-client/pkg/util"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/certificates/autorenew"
	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/checkpointer"
	"github.com/bootlet/bootlet/controlplanetaint"
	"github.com/bootlet/bootlet/credmirror"
	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/csrapprover"
	"github.com/bootlet/bootlet/handoff"
	"github.com/bootlet/bootlet/internal/manifestfile"
	"github.com/bootlet/bootlet/internal/retry"
	"github.com/bootlet/bootlet/nodephase"
	"github.com/bootlet/bootlet/noderecover/recoverlock"
	"github.com/bootlet/bootlet/ownprocess"
	"github.com/bootlet/bootlet/pivot"
	"github.com/bootlet/bootlet/podapi"
	"github.com/bootlet/bootlet/runner"
	"github.com/bootlet/bootlet/servinggate"
	btypes "github.com/bootlet/bootlet/types"
)

func Run(parent context.Context, o Options) error {
	if o.CgroupDriver != cri.CgroupDriverCgroupfs && o.CgroupDriver != cri.CgroupDriverSystemd {
		return fmt.Errorf("--cgroup-driver must be cgroupfs or systemd, not %q", o.CgroupDriver)
	}
	if o.SelfHostedAssets != "" && o.PivotKubeconfig == "" {
		return errors.New("--self-hosted-assets needs --pivot-kubeconfig (the apiserver to create them in)")
	}
	// `bootlet recover` holds this lock exclusively while it moves the
	// node's state; the daemon holds it shared for its life, so recover
	// refuses while one runs. No waiting: systemd starts the unit again
	// (Restart=always) once recover is done, and a start blocked for a
	// whole restore would outlast its start timeout anyway.
	recoverLock, lockErr := recoverlock.Acquire(o.RootDir, recoverlock.Daemon)
	if lockErr != nil {
		return lockErr
	}
	defer recoverLock.Release()
	var pivotConfig *rest.Config
	if o.PivotKubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", o.PivotKubeconfig)
		if err != nil {
			return fmt.Errorf("--pivot-kubeconfig: %w", err)
		}
		pivotConfig = c
	}
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	handoffCfg := handoff.Config{HealthzURL: o.KubeletHealthzURL, StaticPodPath: o.KubeletStaticPodDir,
		KubeletRootDir: o.KubeletRootDir, WriteActuated: o.KubeletActuated}
	handoffRootDir := ""
	if handoffCfg.Enabled() {
		handoffRootDir = o.KubeletRootDir
		// The start gate's files sit beside the API socket, where the
		// kubelet's unit finds them (`bootlet kubelet-gate --dir`).
		handoffCfg.Gate = handoff.NewStartGate(filepath.Dir(o.Socket))
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
	// The API serves from the checkpoint before the runtime answers: reads
	// work and writes are stored while containerd is down or not started
	// yet; the gate hands pods to the runner once recovery runs.
	gate := &runner.RuntimeGate{}
	var _ podapi.PodRuntime = gate
	var _ podapi.StreamRuntime = gate // exec, attach, port-forward (podapi/stream.go)
	reg.SetRuntime(gate)
	srv := podapi.NewServer(reg)
	srv.SetLimits(o.Limits.API)
	// A static copy of a pod with Secret values in env would show them in
	// its mirror pod: with the handoff on, such pods are refused.
	reg.SetPodPolicy(podapi.PodPolicy{MaxPods: o.Limits.MaxPods, RefuseSecretEnv: handoffCfg.Enabled()})
	srv.RegisterMetrics(append(cri.Collectors(), runner.Collectors()...)...)
	// The node's phase on bootlet's Node object (bootlet status). The
	// manager and the checkpointer exist only once the runtime answers.
	handoffCfg.Owners, handoffCfg.Objects, handoffCfg.Events = reg, reg, reg.Events
	hand := handoff.New(handoffCfg)
	var ckptRef atomic.Pointer[checkpointer.Checkpointer]
	phase := &nodephase.Source{HandoffConfigured: handoffCfg.Enabled(), PivotConfigured: pivotConfig != nil, CheckpointerConfigured: o.CheckpointerKubeconfig != "",
		Pods: reg.ListPods, PivotDoneFile: pivot.RecordPath(o.RootDir),
		KubeletUp: hand.KubeletUp,
		Checkpointer: func() checkpointer.Status {
			if c := ckptRef.Load(); c != nil {
				return c.Status()
			}
			return checkpointer.Status{}
		},
		Events: reg.Events, NodeName: o.NodeName}
	srv.SetNodeStatus(phase.UpdateNode)
	warm := make(chan struct{})
	go func() { reg.WarmUp(); close(warm) }()
	srv.AddReadyCheck("writes", func() error {
		select {
		case <-warm:
			return nil
		default:
			return errors.New("field managers are still being built")
		}
	})
	srv.AddReadyCheck("runtime", func() error {
		if err := gate.RuntimeError(); err != nil {
			return fmt.Errorf("container runtime unavailable: %w", err)
		}
		return nil
	})

	mode, gid := os.FileMode(0o600), -1
	if o.SocketGroup != "" {
		g, err := lookupGroup(o.SocketGroup)
		if err != nil {
			return err
		}
		mode, gid = 0o660, g
	}
	if err := configureLocalTrust(srv, reg, &o.LocalTrust); err != nil {
		return err
	}
	serveErr := make(chan error, 3)
	if err := startTCP(ctx, srv, &o.TCP, o.RootDir, o.NodeName, serveErr); err != nil {
		return err
	}
	if err := startReadOnlySocket(ctx, srv, &o.LocalTrust, serveErr); err != nil {
		return err
	}
	go func() { serveErr <- srv.ServeUnix(ctx, o.Socket, mode, gid) }()
	klog.InfoS("bootlet serving", "socket", o.Socket, "node", o.NodeName, "runtime", o.RuntimeEndpoint)
	releaseStartupPagesAt(o.ReleaseStartupPages, "serving")

	// Recovery: wait for the runtime, import images, adopt or clean up what
	// runs, then hand every stored pod to its worker.
	runtimeEvent := func(err error) {
		if err != nil {
			reg.Events.NodeEvent(o.NodeName, v1.EventTypeWarning, "ContainerRuntimeUnavailable", "container runtime is not answering: "+err.Error())
		} else {
			reg.Events.NodeEvent(o.NodeName, v1.EventTypeNormal, "ContainerRuntimeAvailable", "container runtime is answering again")
		}
	}
	rt, err := connectRuntime(ctx, o.RuntimeEndpoint, gate, runtimeEvent)
	if err != nil {
		if ctx.Err() != nil {
			klog.InfoS("bootlet stopping before the container runtime answered")
			return nil
		}
		return err
	}
	node := runner.DetectNodeFacts()
	// The runner sees the handoff through its small interface: a nil
	// *Handoff must stay a nil interface.
	var runnerHandoff runner.Handoff
	if hand != nil {
		runnerHandoff = hand
	}
	mgr := runner.NewManager(ctx, runner.Config{
		NodeName: o.NodeName, RootDir: o.RootDir, PodRootDir: o.PodRootDir, PodLogsDir: o.PodLogDir, ContainerLogsDir: o.ContainerLogDir, CgroupDriver: o.CgroupDriver,
		Runtime: rt, Objects: reg, Events: reg.Events, Status: reg,
		HostIPs: node.HostIPs, MachineMemory: node.MachineMemory, Allocatable: node.Allocatable,
		Handoff: runnerHandoff, KubeletRootDir: o.KubeletRootDir,
	})
	gate.Connected(mgr)
	go mgr.MonitorRuntime(ctx, time.Second, runtimeEvent)
	if o.PreloadImages != "" {
		files, err := cri.ArchivesIn(o.PreloadImages)
		if err != nil {
			return fmt.Errorf("--preload-images: %w", err)
		}
		start := time.Now()
		names, err := cri.ImportArchives(ctx, o.RuntimeEndpoint, files)
		if err != nil {
			return fmt.Errorf("--preload-images: %w", err)
		}
		klog.InfoS("Imported images", "images", names, "duration", time.Since(start))
	}
	if err := mgr.CleanupOrphans(ctx, reg.DesiredUIDs()); err != nil {
		klog.ErrorS(err, "Cleaning up orphaned sandboxes failed")
	}
	gate.Open(mgr)
	reg.Start()
	gate.FinishStart(reg, reg)
	// Every stored pod has its worker now, so the handoff never sees a
	// partial set of pods.
	go hand.Run(ctx, mgr)
	if pivotConfig != nil {
		if _, err := pivot.EnsureTCPMigrateReq(pivot.TCPMigrateReqPath, o.TCPMigrateReq); err != nil {
			klog.ErrorS(err, "net.ipv4.tcp_migrate_req not set; a pivot may reset connections queued at the closing apiserver listener")
		}
	}
	var handover func(ctx context.Context, incoming, outgoing types.UID)
	var verdicts ownprocess.Verdicts // an interface: nil stays nil, not a nil *Router
	if o.HandoverDrain > 0 && (pivotConfig != nil || o.CheckpointerKubeconfig != "") {
		if router, err := apiserverRouter(pivotConfig, o.PivotKubeconfig, o.CheckpointerKubeconfig, o.ManifestsDir, criApiservers(rt)); err != nil {
			klog.ErrorS(err, "The apiserver port is not routed: a withdrawn apiserver may refuse requests (see --apiserver-handover-drain)")
		} else {
			go router.Run(ctx)
			handover, verdicts = portHandover(router, o.HandoverDrain), router
		}
	}
	if pivotConfig != nil {
		go func() {
			if err := pivot.Run(ctx, pivot.Config{NodeName: o.NodeName, APIServer: pivotConfig,
				SelfHostedDir: o.SelfHostedAssets, Pods: reg, Events: reg.Events, DoneFile: pivot.RecordPath(o.RootDir),
				Handover: handover, Verdicts: verdicts}); err != nil {
				klog.ErrorS(err, "Pivot to self-hosted stopped")
			}
		}()
	}
	// The self-hosted apiserver's pods are Ready only once bootlet sets
	// their serving gate (package servinggate), so the gate runs wherever
	// bootlet may run one: with the pivot (which waits for that Ready) or
	// the checkpointer. It uses the checkpointer's identity, whose Role
	// grants the status patch, else the pivot's.
	if pivotConfig != nil || o.CheckpointerKubeconfig != "" {
		gcfg := servinggate.Config{NodeName: o.NodeName, Kubeconfig: o.CheckpointerKubeconfig, Verdicts: verdicts, Events: reg.Events}
		if gcfg.Kubeconfig == "" {
			gcfg.REST = pivotConfig
		}
		go servinggate.New(gcfg).Run(ctx)
	}
	if o.CheckpointerKubeconfig != "" {
		timing := checkpointer.DefaultTiming
		timing.ActivateAfter, timing.ActivateAfterStart, timing.WithdrawAfter = o.CheckpointerActivate, o.CheckpointerStart, o.CheckpointerWithdraw
		c := checkpointer.New(checkpointer.Config{NodeName: o.NodeName, Kubeconfig: o.CheckpointerKubeconfig,
			Namespaces: o.CheckpointNamespaces, PodRunning: mgr.PodRunning, Store: store, Registry: reg, Events: reg.Events, Timing: timing,
			Handover: handover, Verdicts: verdicts})
		ckptRef.Store(c)
		go c.Run(ctx)
		startNodeGuard(ctx, o.CheckpointerKubeconfig)
	}
	if o.ManifestsDir != "" {
		if err := applyManifestsDir(reg, o.ManifestsDir, pivot.RecordPath(o.RootDir)); err != nil {
			klog.ErrorS(err, "Applying --manifests-dir failed")
		}
	}
	if o.CertRenewBefore > 0 {
		cfg := autorenew.Config{Before: o.CertRenewBefore, NodeName: o.NodeName, RootDir: o.RootDir, PKI: srv.PKI,
			Event: reg.Events.NodeEvent, Tools: autorenew.ExecTools(o.ToolsPath)}
		if o.SelfHostedAssets != "" && o.PivotKubeconfig != "" {
			cfg.AssetDir, cfg.Kubeconfig = filepath.Dir(filepath.Clean(o.SelfHostedAssets)), o.PivotKubeconfig
		}
		go autorenew.New(cfg).Run(ctx)
	}
	srv.SetReady()
	// From here on the phase is watched, not only computed when asked: its
	// changes are logged and recorded as NodePhaseChanged events.
	go phase.Run(ctx, time.Second)
	releaseStartupPagesAt(o.ReleaseStartupPages, "ready") // memory.go
	go releaseAfterBursts(ctx, o.ReleaseStartupPages, mgr.MutatingCallsDone)
	if _, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
		klog.ErrorS(err, "sd_notify failed")
	}
	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-serveErr:
	}
	// Stop the workers, then let the mutating CRI calls under way finish
	// (bounded): cancelling one mid-call leaves half-made containers
	// (containerd#11037). Nothing is stopped: pods keep running.
	stop()
	klog.InfoS("bootlet stopping; pods keep running")
	if !mgr.Shutdown(runner.ShutdownWait) {
		klog.InfoS("Runtime calls still under way at exit; the next start adopts or cleans up what they leave", "waited", runner.ShutdownWait)
	}
	return runErr
}

// connectRuntime connects to the CRI endpoint, retrying with backoff (up to
// 5 s apart) until it answers or ctx ends. cri-client validates the
// connection with a Version call and gives up at once when the socket is
// missing, so bootlet must not exit when containerd starts after it or is
// down. A failed validation leaks the dialled connection, so the socket is
// probed first with a plain connect. onChange sees the first failure and the
// recovery after one.
func connectRuntime(ctx context.Context, endpoint string, gate *runner.RuntimeGate, onChange func(error)) (*cri.Runtime, error) {
	addr, dialer, err := criutil.GetAddressAndDialer(endpoint)
	if err != nil {
		return nil, fmt.Errorf("--runtime-endpoint %s: %w", endpoint, err)
	}
	var rt *cri.Runtime
	failed := false
	ok := retry.Doubling(ctx, 100*time.Millisecond, 5*time.Second, func() error {
		var err error
		rt, err = dialRuntime(ctx, endpoint, addr, dialer)
		return err
	}, func(err error, next time.Duration) {
		gate.SetConnectError(err)
		if !failed {
			failed = true
			onChange(err)
		}
		klog.ErrorS(err, "Container runtime not ready; retrying", "in", next)
	})
	if !ok {
		return nil, ctx.Err()
	}
	if failed {
		onChange(nil)
	}
	return rt, nil
}

func dialRuntime(ctx context.Context, endpoint, addr string, dialer func(context.Context, string) (net.Conn, error)) (*cri.Runtime, error) {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	conn, err := dialer(dctx, addr)
	cancel()
	if err != nil {
		return nil, err
	}
	_ = conn.Close()
	rt, err := cri.Connect(ctx, endpoint, 2*time.Minute)
	if err != nil {
		return nil, err
	}
	v, err := rt.Version(ctx, "v1")
	if err != nil {
		_ = rt.Close(ctx)
		return nil, err
	}
	klog.InfoS("Connected to the container runtime", "name", v.RuntimeName, "version", v.RuntimeVersion)
	return rt, nil
}

// applyManifestsDir creates every object in dir that does not exist yet and
// replaces those whose content changed. The bootstrap pods that a completed
// pivot (the record at pivotDone) handed over are not created again: after
// a reboot the checkpoint and the self-hosted pods serve, and a bootstrap
// apiserver coming back would run beside them on the rendered image.
func applyManifestsDir(reg *podapi.Registry, dir, pivotDone string) error {
	objs, err := manifestfile.Read([]string{dir})
	if err != nil {
		return err
	}
	done, err := pivot.ReadDone(pivotDone)
	if err != nil {
		klog.ErrorS(err, "The record of a completed pivot is unreadable; applying every manifest", "dir", dir)
	}
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *v1.Pod:
			if o.Namespace == "" {
				o.Namespace = "default"
			}
			if pivot.Pivoted(done, pivot.DefaultComponents, o.Namespace, o.Name) {
				klog.InfoS("Not creating a bootstrap pod the pivot handed over to its self-hosted pod", "pod", klog.KObj(o), "dir", dir, "pivotCompletedAt", done.CompletedAt)
				continue
			}
			_, err = reg.CreatePod(o, false)
		case *v1.Secret:
			if o.Namespace == "" {
				o.Namespace = "default"
			}
			_, err = reg.PutSecret(o, true, false)
		case *v1.ConfigMap:
			if o.Namespace == "" {
				o.Namespace = "default"
			}
			_, err = reg.PutConfigMap(o, true, false)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			klog.ErrorS(err, "Manifest rejected", "dir", dir)
		}
	}
	return nil
}

func lookupGroup(name string) (int, error) {
	if n, err := strconv.Atoi(name); err == nil {
		return n, nil
	}
	b, err := os.ReadFile(filepath.Join("/etc", "group"))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Split(l, ":")
		if len(f) >= 3 && f[0] == name {
			return strconv.Atoi(f[2])
		}
	}
	return 0, fmt.Errorf("--socket-group: no group %q", name)
}

// startNodeGuard runs the controllers of a master that use the
// checkpointer's identity (a file only masters hold): the approver of
// bootstrap tokens' node client requests, the control-plane taint, and the
// mirror of the control plane's credentials onto this master's disk.
// Every master runs them; the first two write conditionally, so they agree,
// and the mirror writes only this master's disk.
func startNodeGuard(ctx context.Context, kubeconfig string) {
	go csrapprover.New(csrapprover.Config{Kubeconfig: kubeconfig, BootstrapGroup: btypes.NodeBootstrapTokenGroup}).Run(ctx)
	go controlplanetaint.New(controlplanetaint.Config{Kubeconfig: kubeconfig}).Run(ctx)
	go credmirror.New(credmirror.Config{Kubeconfig: kubeconfig}).Run(ctx)
}
