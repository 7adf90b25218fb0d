package daemon

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
	"github.com/spf13/cobra"
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
	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/config"
	"github.com/bootlet/bootlet/controlplanetaint"
	"github.com/bootlet/bootlet/credmirror"
	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/csrapprover"
	"github.com/bootlet/bootlet/handoff"
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

type daemonOptions struct {
	runtimeEndpoint     string
	rootDir             string
	podRootDir          string
	podLogDir           string
	containerLogDir     string
	socket              string
	socketGroup         string
	nodeName            string
	cgroupDriver        string
	manifestsDir        string
	preloadImages       string
	releaseStartupPages bool
	tcp                 tcpOptions        // listen.go
	limits              limitOptions      // limits.go
	localTrust          localTrustOptions // localtrust.go
	file                configFileOptions // daemonconfig.go
	// The handoff to a kubelet on the node (package handoff).
	kubeletHealthzURL   string
	kubeletStaticPodDir string
	kubeletRootDir      string
	kubeletActuated     bool
	// The pivot to self-hosted (package pivot).
	pivotKubeconfig  string
	selfHostedAssets string
	tcpMigrateReq    bool
	handoverDrain    time.Duration
	// The automatic renewal of certificates (certificates/autorenew).
	certRenewBefore time.Duration
	// The checkpointer of self-hosted pods (package checkpointer).
	checkpointerKubeconfig  string
	checkpointerKubeletPods string // deprecated, ignored: the local view is CRI's
	checkpointNamespaces    []string
	checkpointerActivate    time.Duration
	checkpointerStart       time.Duration
	checkpointerWithdraw    time.Duration
	// toolsPath finds bootlet-tools (cli.Tools.Path).
	toolsPath func(verb string) (string, error)
}

// NewCommand is `bootlet daemon`; toolsPath finds the binary that runs
// `certs renew` for the automatic renewal (cli.Tools.Path).
func NewCommand(toolsPath func(verb string) (string, error)) *cobra.Command {
	return daemonCmd(&daemonOptions{toolsPath: toolsPath})
}

// daemonCmd binds the daemon's flags to o (the tests read their defaults
// there).
func daemonCmd(o *daemonOptions) *cobra.Command {
	host, _ := os.Hostname()
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run the bootlet daemon",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := resolveConfig(cmd.Flags(), o); err != nil { // daemonconfig.go
				return err
			}
			if o.file.writeTo != "" {
				return writeConfig(cmd.OutOrStdout(), o)
			}
			defer startCPUProfile()() // daemonprofile.go; off unless BOOTLET_CPU_PROFILE is set
			return runDaemon(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	addConfigFileFlags(f, &o.file)
	f.StringVar(&o.runtimeEndpoint, "runtime-endpoint", "unix:///run/containerd/containerd.sock", "CRI endpoint of containerd")
	f.StringVar(&o.rootDir, "root-dir", "/var/lib/bootlet", "state directory (checkpoints, the Secret/ConfigMap/projected/downwardAPI volumes it materialises)")
	f.StringVar(&o.podRootDir, "pod-root-dir", "", "root of the pods' kubelet-layout directories (ROOT/pods/UID: etc-hosts, termination logs, emptyDirs); empty: --kubelet-root-dir when the handoff is on, else --root-dir")
	f.StringVar(&o.podLogDir, "pod-log-dir", "/var/log/pods", "pod log directory, as the kubelet's podLogsDirectory")
	f.StringVar(&o.containerLogDir, "container-log-dir", runner.DefaultContainerLogsDir, "links to container logs, named as the kubelet's (POD_NS_CONTAINER-ID.log); empty: none")
	f.StringVar(&o.socket, "socket", podapi.DefaultSocket, "unix socket of the API (mode 0600)")
	f.StringVar(&o.socketGroup, "socket-group", "", "group that may use the socket (makes it 0660); its members are root-equivalent (they may run privileged pods and mint admin credentials): see --read-only-socket")
	f.StringVar(&o.nodeName, "node-name", strings.ToLower(host), "node name: pods run as NAME-NODENAME, as kubelet static pods")
	f.StringVar(&o.cgroupDriver, "cgroup-driver", cri.CgroupDriverCgroupfs, "cgroupfs or systemd, as the kubelet's cgroupDriver")
	f.StringVar(&o.manifestsDir, "manifests-dir", "", "directory of pod/secret/configmap manifests applied at start")
	f.StringVar(&o.preloadImages, "preload-images", "", "directory of OCI/docker image archives imported at start")
	f.StringVar(&o.kubeletHealthzURL, "kubelet-healthz-url", handoff.DefaultKubeletHealthzURL, "the kubelet's healthz: when it answers, the kubelet adopts bootlet's pods; empty: no handoff")
	f.StringVar(&o.kubeletStaticPodDir, "kubelet-static-pod-path", handoff.DefaultKubeletStaticPodPath, "the kubelet's staticPodPath: bootlet keeps a static copy (same UID) of each pod it runs there; empty: no handoff")
	f.StringVar(&o.kubeletRootDir, "kubelet-root-dir", handoff.DefaultKubeletRootDir, "the kubelet's --root-dir (its pods/UID directories, its actuated resources checkpoint)")
	f.BoolVar(&o.kubeletActuated, "kubelet-actuated-checkpoint", true, "while no kubelet runs, record bootlet's containers in the kubelet's actuated_pods_state checkpoint, so the adopting kubelet does not resize them")
	f.StringVar(&o.pivotKubeconfig, "pivot-kubeconfig", "", "kubeconfig of the apiserver (e.g. render's admin.conf): hand the control plane over to its self-hosted pods on this node, withdrawing each bootstrap pod once its self-hosted pod has taken over; empty: no pivot")
	f.StringVar(&o.selfHostedAssets, "self-hosted-assets", "", "render's self-hosted/ directory: with --pivot-kubeconfig, create its objects that do not exist yet and label this node node-role.kubernetes.io/control-plane, as bootkube's start did; empty: a provisioning system does it")
	f.BoolVar(&o.tcpMigrateReq, "tcp-migrate-req", true, "with --pivot-kubeconfig, set net.ipv4.tcp_migrate_req=1 in bootlet's network namespace (the host's, as the apiservers are hostNetwork), so connections queued at the closing bootstrap apiserver's SO_REUSEPORT listener move to the self-hosted one instead of being reset; false: only log its value")
	f.DurationVar(&o.handoverDrain, "apiserver-handover-drain", 10*time.Second, "route every new connection to the apiserver port to the newest apiserver that answers /readyz itself (an SO_REUSEPORT eBPF program), and before the pivot or the checkpointer withdraws an apiserver wait at most this long until the incoming one gets the new connections and the outgoing one holds none, or has got them this long (docs/pivot.md, Zero failed requests); 0: neither")
	f.StringVar(&o.checkpointerKubeconfig, "checkpointer-kubeconfig", "", "kubeconfig of the apiserver whose pods on this node annotated bootlet.dev/checkpoint=true bootlet checkpoints, and runs while that apiserver is unreachable (docs/checkpointer.md); empty: no checkpointer. The file may appear after bootlet starts")
	f.StringVar(&o.checkpointerKubeletPods, "checkpointer-kubelet-pods-url", "", "ignored: the checkpointer's local view while the apiserver is unreachable is the container runtime's, not the kubelet's API")
	_ = f.MarkDeprecated("checkpointer-kubelet-pods-url", "the checkpointer reads the container runtime, not the kubelet's /pods")
	f.StringSliceVar(&o.checkpointNamespaces, "checkpoint-namespaces", checkpointer.DefaultNamespaces, "namespaces whose DaemonSet and Deployment pods may be checkpointed (their controller's pod template must carry bootlet.dev/checkpoint: \"true\"); the checkpointer's RBAC must allow reading pods, apps controllers, Secrets and ConfigMaps there")
	f.DurationVar(&o.checkpointerActivate, "checkpointer-activate-after", checkpointer.DefaultTiming.ActivateAfter, "run a checkpoint once the apiserver has been unreachable this long")
	f.DurationVar(&o.checkpointerStart, "checkpointer-activate-after-start", checkpointer.DefaultTiming.ActivateAfterStart, "while the apiserver has not answered once since bootlet started (after a reboot), run a checkpoint once it has been unreachable this long")
	f.DurationVar(&o.checkpointerWithdraw, "checkpointer-withdraw-after", checkpointer.DefaultTiming.WithdrawAfter, "withdraw a running checkpoint once its self-hosted pod has been Ready on this node this long (doubled for each withdrawal in the last 10 minutes, up to 5 minutes); one activated at bootlet's start (a reboot) is withdrawn as soon as the self-hosted pod's own process answers its readiness endpoint")
	f.DurationVar(&o.certRenewBefore, "cert-renew-before", config.DefaultCertRenewBefore, "at start and hourly, renew the certificates that expire within this duration and record a CertificatesRenewed event on the Node: bootlet's own serving certificate, and with --pivot-kubeconfig and --self-hosted-assets every leaf of the asset dir (its parent) with `bootlet certs renew` (docs/operations.md, Certificates); 0: never")
	f.BoolVar(&o.releaseStartupPages, "release-startup-pages", true, "when ready and after each burst of pod work, return the freed heap and unmap the pages of the binary the work touched; they stay in the page cache (see docs/architecture.md, Footprint)")
	addTCPFlags(f, &o.tcp)
	addLimitFlags(f, &o.limits)
	addLocalTrustFlags(f, &o.localTrust)
	return cmd
}

func runDaemon(parent context.Context, o *daemonOptions) error {
	if o.cgroupDriver != cri.CgroupDriverCgroupfs && o.cgroupDriver != cri.CgroupDriverSystemd {
		return fmt.Errorf("--cgroup-driver must be cgroupfs or systemd, not %q", o.cgroupDriver)
	}
	if o.selfHostedAssets != "" && o.pivotKubeconfig == "" {
		return errors.New("--self-hosted-assets needs --pivot-kubeconfig (the apiserver to create them in)")
	}
	// `bootlet recover` holds this lock exclusively while it moves the
	// node's state; the daemon holds it shared for its life, so recover
	// refuses while one runs. No waiting: systemd starts the unit again
	// (Restart=always) once recover is done, and a start blocked for a
	// whole restore would outlast its start timeout anyway.
	recoverLock, lockErr := recoverlock.Acquire(o.rootDir, recoverlock.Daemon)
	if lockErr != nil {
		return lockErr
	}
	defer recoverLock.Release()
	var pivotConfig *rest.Config
	if o.pivotKubeconfig != "" {
		c, err := clientcmd.BuildConfigFromFlags("", o.pivotKubeconfig)
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
	handoffCfg := handoff.Config{HealthzURL: o.kubeletHealthzURL, StaticPodPath: o.kubeletStaticPodDir,
		KubeletRootDir: o.kubeletRootDir, WriteActuated: o.kubeletActuated}
	handoffRootDir := ""
	if handoffCfg.Enabled() {
		handoffRootDir = o.kubeletRootDir
		// The start gate's files sit beside the API socket, where the
		// kubelet's unit finds them (`bootlet kubelet-gate --dir`).
		handoffCfg.Gate = handoff.NewStartGate(filepath.Dir(o.socket))
	}
	if err := runner.CheckPodDirs(o.rootDir, handoffRootDir); err != nil {
		return err
	}
	if err := runner.PrepareRootDir(o.rootDir); err != nil {
		return err
	}
	store, err := checkpoint.Open(o.rootDir)
	if err != nil {
		return fmt.Errorf("open checkpoint store: %w", err)
	}
	reg, err := podapi.NewRegistry(o.nodeName, store)
	if err != nil {
		return err
	}
	// NewRegistry may quarantine records the store verified but that do not
	// decode; report them together with the store's own.
	for _, q := range store.Quarantined() {
		klog.ErrorS(nil, "Quarantined a damaged checkpoint record", "path", q.Path, "reason", q.Reason)
		reg.Events.NodeEvent(o.nodeName, v1.EventTypeWarning, "CheckpointQuarantined",
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
	srv.SetLimits(o.limits.api)
	// A static copy of a pod with Secret values in env would show them in
	// its mirror pod: with the handoff on, such pods are refused.
	reg.SetPodPolicy(podapi.PodPolicy{MaxPods: o.limits.maxPods, RefuseSecretEnv: handoffCfg.Enabled()})
	srv.RegisterMetrics(append(cri.Collectors(), runner.Collectors()...)...)
	// The node's phase on bootlet's Node object (bootlet status). The
	// manager and the checkpointer exist only once the runtime answers.
	handoffCfg.Owners, handoffCfg.Objects, handoffCfg.Events = reg, reg, reg.Events
	hand := handoff.New(handoffCfg)
	var ckptRef atomic.Pointer[checkpointer.Checkpointer]
	phase := &nodephase.Source{HandoffConfigured: handoffCfg.Enabled(), PivotConfigured: pivotConfig != nil, CheckpointerConfigured: o.checkpointerKubeconfig != "",
		Pods: reg.ListPods, PivotDoneFile: pivot.RecordPath(o.rootDir),
		KubeletUp: hand.KubeletUp,
		Checkpointer: func() checkpointer.Status {
			if c := ckptRef.Load(); c != nil {
				return c.Status()
			}
			return checkpointer.Status{}
		},
		Events: reg.Events, NodeName: o.nodeName}
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
	if o.socketGroup != "" {
		g, err := lookupGroup(o.socketGroup)
		if err != nil {
			return err
		}
		mode, gid = 0o660, g
	}
	if err := configureLocalTrust(srv, reg, &o.localTrust); err != nil {
		return err
	}
	serveErr := make(chan error, 3)
	if err := startTCP(ctx, srv, &o.tcp, o.rootDir, o.nodeName, serveErr); err != nil {
		return err
	}
	if err := startReadOnlySocket(ctx, srv, &o.localTrust, serveErr); err != nil {
		return err
	}
	go func() { serveErr <- srv.ServeUnix(ctx, o.socket, mode, gid) }()
	klog.InfoS("bootlet serving", "socket", o.socket, "node", o.nodeName, "runtime", o.runtimeEndpoint)
	releaseStartupPagesAt(o.releaseStartupPages, "serving")

	// Recovery: wait for the runtime, import images, adopt or clean up what
	// runs, then hand every stored pod to its worker.
	runtimeEvent := func(err error) {
		if err != nil {
			reg.Events.NodeEvent(o.nodeName, v1.EventTypeWarning, "ContainerRuntimeUnavailable", "container runtime is not answering: "+err.Error())
		} else {
			reg.Events.NodeEvent(o.nodeName, v1.EventTypeNormal, "ContainerRuntimeAvailable", "container runtime is answering again")
		}
	}
	rt, err := connectRuntime(ctx, o.runtimeEndpoint, gate, runtimeEvent)
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
		NodeName: o.nodeName, RootDir: o.rootDir, PodRootDir: o.podRootDir, PodLogsDir: o.podLogDir, ContainerLogsDir: o.containerLogDir, CgroupDriver: o.cgroupDriver,
		Runtime: rt, Objects: reg, Events: reg.Events, Status: reg,
		HostIPs: node.HostIPs, MachineMemory: node.MachineMemory, Allocatable: node.Allocatable,
		Handoff: runnerHandoff, KubeletRootDir: o.kubeletRootDir,
	})
	gate.Connected(mgr)
	go mgr.MonitorRuntime(ctx, time.Second, runtimeEvent)
	if o.preloadImages != "" {
		files, err := cri.ArchivesIn(o.preloadImages)
		if err != nil {
			return fmt.Errorf("--preload-images: %w", err)
		}
		start := time.Now()
		names, err := cri.ImportArchives(ctx, o.runtimeEndpoint, files)
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
		if _, err := pivot.EnsureTCPMigrateReq(pivot.TCPMigrateReqPath, o.tcpMigrateReq); err != nil {
			klog.ErrorS(err, "net.ipv4.tcp_migrate_req not set; a pivot may reset connections queued at the closing apiserver listener")
		}
	}
	var handover func(ctx context.Context, incoming, outgoing types.UID)
	var verdicts ownprocess.Verdicts // an interface: nil stays nil, not a nil *Router
	if o.handoverDrain > 0 && (pivotConfig != nil || o.checkpointerKubeconfig != "") {
		if router, err := apiserverRouter(pivotConfig, o.pivotKubeconfig, o.checkpointerKubeconfig, o.manifestsDir, criApiservers(rt)); err != nil {
			klog.ErrorS(err, "The apiserver port is not routed: a withdrawn apiserver may refuse requests (see --apiserver-handover-drain)")
		} else {
			go router.Run(ctx)
			handover, verdicts = portHandover(router, o.handoverDrain), router
		}
	}
	if pivotConfig != nil {
		go func() {
			if err := pivot.Run(ctx, pivot.Config{NodeName: o.nodeName, APIServer: pivotConfig,
				SelfHostedDir: o.selfHostedAssets, Pods: reg, Events: reg.Events, DoneFile: pivot.RecordPath(o.rootDir),
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
	if pivotConfig != nil || o.checkpointerKubeconfig != "" {
		gcfg := servinggate.Config{NodeName: o.nodeName, Kubeconfig: o.checkpointerKubeconfig, Verdicts: verdicts, Events: reg.Events}
		if gcfg.Kubeconfig == "" {
			gcfg.REST = pivotConfig
		}
		go servinggate.New(gcfg).Run(ctx)
	}
	if o.checkpointerKubeconfig != "" {
		timing := checkpointer.DefaultTiming
		timing.ActivateAfter, timing.ActivateAfterStart, timing.WithdrawAfter = o.checkpointerActivate, o.checkpointerStart, o.checkpointerWithdraw
		c := checkpointer.New(checkpointer.Config{NodeName: o.nodeName, Kubeconfig: o.checkpointerKubeconfig,
			Namespaces: o.checkpointNamespaces, PodRunning: mgr.PodRunning, Store: store, Registry: reg, Events: reg.Events, Timing: timing,
			Handover: handover, Verdicts: verdicts})
		ckptRef.Store(c)
		go c.Run(ctx)
		startNodeGuard(ctx, o.checkpointerKubeconfig)
	}
	if o.manifestsDir != "" {
		if err := applyManifestsDir(reg, o.manifestsDir, pivot.RecordPath(o.rootDir)); err != nil {
			klog.ErrorS(err, "Applying --manifests-dir failed")
		}
	}
	if o.certRenewBefore > 0 {
		cfg := autorenew.Config{Before: o.certRenewBefore, NodeName: o.nodeName, RootDir: o.rootDir, PKI: srv.PKI,
			Event: reg.Events.NodeEvent, Tools: autorenew.ExecTools(o.toolsPath)}
		if o.selfHostedAssets != "" && o.pivotKubeconfig != "" {
			cfg.AssetDir, cfg.Kubeconfig = filepath.Dir(filepath.Clean(o.selfHostedAssets)), o.pivotKubeconfig
		}
		go autorenew.New(cfg).Run(ctx)
	}
	srv.SetReady()
	// From here on the phase is watched, not only computed when asked: its
	// changes are logged and recorded as NodePhaseChanged events.
	go phase.Run(ctx, time.Second)
	releaseStartupPagesAt(o.releaseStartupPages, "ready") // memory.go
	go releaseAfterBursts(ctx, o.releaseStartupPages, mgr.MutatingCallsDone)
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
	objs, err := cli.ReadManifests([]string{dir})
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
