package daemon

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/checkpointer"
	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/config"
	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/handoff"
	"github.com/bootlet/bootlet/node"
	"github.com/bootlet/bootlet/podapi"
	"github.com/bootlet/bootlet/runner"
)

// daemonOptions are node.Options as the flags and the configuration file
// set them, and the file's own flags.
type daemonOptions struct {
	node.Options
	file configFileOptions // daemonconfig.go
}

// NewCommand is `bootlet daemon`; toolsPath finds the binary that runs
// `certs renew` for the automatic renewal (cli.Tools.Path).
func NewCommand(toolsPath func(verb string) (string, error)) *cobra.Command {
	return daemonCmd(&daemonOptions{Options: node.Options{ToolsPath: toolsPath}})
}

// daemonCmd binds the daemon's flags to o (the tests read their defaults
// there).
func daemonCmd(o *daemonOptions) *cobra.Command {
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
			eff, err := effectiveConfig(o)
			if err != nil {
				return err
			}
			o.EffectiveConfig = eff
			return node.Run(cmd.Context(), o.Options)
		},
	}
	f := cmd.Flags()
	addConfigFileFlags(f, &o.file)
	f.StringVar(&o.RuntimeEndpoint, "runtime-endpoint", "unix:///run/containerd/containerd.sock", "CRI endpoint of containerd")
	f.StringVar(&o.RootDir, "root-dir", "/var/lib/bootlet", "state directory (checkpoints, the Secret/ConfigMap/projected/downwardAPI volumes it materialises)")
	f.StringVar(&o.PodRootDir, "pod-root-dir", "", "root of the pods' kubelet-layout directories (ROOT/pods/UID: etc-hosts, termination logs, emptyDirs); empty: --kubelet-root-dir when the handoff is on, else --root-dir")
	f.StringVar(&o.PodLogDir, "pod-log-dir", "/var/log/pods", "pod log directory, as the kubelet's podLogsDirectory")
	f.StringVar(&o.ContainerLogDir, "container-log-dir", runner.DefaultContainerLogsDir, "links to container logs, named as the kubelet's (POD_NS_CONTAINER-ID.log); empty: none")
	f.StringVar(&o.Socket, "socket", podapi.DefaultSocket, "unix socket of the API (mode 0600)")
	f.StringVar(&o.SocketGroup, "socket-group", "", "group that may use the socket (makes it 0660); its members are root-equivalent (they may run privileged pods and mint admin credentials): see --read-only-socket")
	f.StringVar(&o.NodeName, "node-name", cli.DefaultNodeName(), "node name: pods run as NAME-NODENAME, as kubelet static pods")
	f.StringVar(&o.CgroupDriver, "cgroup-driver", cri.CgroupDriverCgroupfs, "cgroupfs or systemd, as the kubelet's cgroupDriver")
	f.StringVar(&o.ManifestsDir, "manifests-dir", "", "directory of pod/secret/configmap manifests applied at start")
	f.StringVar(&o.PreloadImages, "preload-images", "", "directory of OCI/docker image archives imported at start")
	f.StringVar(&o.KubeletHealthzURL, "kubelet-healthz-url", handoff.DefaultKubeletHealthzURL, "the kubelet's healthz: when it answers, the kubelet adopts bootlet's pods; empty: no handoff")
	f.StringVar(&o.KubeletStaticPodDir, "kubelet-static-pod-path", handoff.DefaultKubeletStaticPodPath, "the kubelet's staticPodPath: bootlet keeps a static copy (same UID) of each pod it runs there; empty: no handoff")
	f.StringVar(&o.KubeletBinary, "kubelet-binary", config.DefaultKubeletBinary, "with --pivot-kubeconfig, the file the kubelet's unit runs: the upgrade's node agent puts the target's kubelet there (keeping the running one as FILE.previous) for this node's kubelet step; empty: no node agent")
	f.StringVar(&o.KubeletRestartCommand, "kubelet-restart-command", config.DefaultKubeletRestartCommand, "the command the upgrade's node agent runs to restart the kubelet through its unit (and so its start gate), split at spaces")
	f.StringVar(&o.KubeletRootDir, "kubelet-root-dir", handoff.DefaultKubeletRootDir, "the kubelet's --root-dir (its pods/UID directories, its actuated resources checkpoint)")
	f.BoolVar(&o.KubeletActuated, "kubelet-actuated-checkpoint", true, "while no kubelet runs, record bootlet's containers in the kubelet's actuated_pods_state checkpoint, so the adopting kubelet does not resize them")
	f.StringVar(&o.PivotKubeconfig, "pivot-kubeconfig", "", "kubeconfig of the apiserver (e.g. render's admin.conf): hand the control plane over to its self-hosted pods on this node, withdrawing each bootstrap pod once its self-hosted pod has taken over; empty: no pivot")
	f.StringVar(&o.SelfHostedAssets, "self-hosted-assets", "", "render's self-hosted/ directory: with --pivot-kubeconfig, create its objects that do not exist yet and label this node node-role.kubernetes.io/control-plane, as bootkube's start did; empty: a provisioning system does it")
	f.DurationVar(&o.UpgradeGateTimeout, "upgrade-gate-timeout", config.DefaultUpgradeGateTimeout, "with --pivot-kubeconfig, how long a step of an upgrade (docs/operations.md, Upgrades) may fail its health gate before the upgrade controller puts the component back to the version it left and stops")
	f.DurationVar(&o.MasterDeadAfter, "master-dead-after", config.DefaultMasterDeadAfter, "how long the etcd member of a master whose Node was deleted must not answer before the masters' controller removes it, where this daemon leads that controller (with --pivot-kubeconfig, or on a worker once it is promoted; docs/cluster.md, Growing and shrinking the masters): longer than a master's reboot")
	f.BoolVar(&o.TCPMigrateReq, "tcp-migrate-req", true, "with --pivot-kubeconfig, set net.ipv4.tcp_migrate_req=1 in bootlet's network namespace (the host's, as the apiservers are hostNetwork), so connections queued at the closing bootstrap apiserver's SO_REUSEPORT listener move to the self-hosted one instead of being reset; false: only log its value")
	f.DurationVar(&o.HandoverDrain, "apiserver-handover-drain", 10*time.Second, "route every new connection to the apiserver port to the newest apiserver that answers /readyz itself (an SO_REUSEPORT eBPF program), and before the pivot or the checkpointer withdraws an apiserver wait at most this long until the incoming one gets the new connections and the outgoing one holds none, or has got them this long (docs/design/reuseport.md, How it works); 0: neither")
	f.StringVar(&o.CheckpointerKubeconfig, "checkpointer-kubeconfig", "", "kubeconfig of the apiserver whose pods on this node annotated bootlet.dev/checkpoint=true bootlet checkpoints, and runs while that apiserver is unreachable (docs/checkpointer.md); empty: no checkpointer. The file may appear after bootlet starts")
	f.StringVar(&o.CheckpointerKubeletPods, "checkpointer-kubelet-pods-url", "", "ignored: the checkpointer's local view while the apiserver is unreachable is the container runtime's, not the kubelet's API")
	_ = f.MarkDeprecated("checkpointer-kubelet-pods-url", "the checkpointer reads the container runtime, not the kubelet's /pods")
	f.StringSliceVar(&o.CheckpointNamespaces, "checkpoint-namespaces", checkpointer.DefaultNamespaces, "namespaces whose DaemonSet and Deployment pods may be checkpointed (their controller's pod template must carry bootlet.dev/checkpoint: \"true\"); the checkpointer's RBAC must allow reading pods, apps controllers, Secrets and ConfigMaps there")
	f.DurationVar(&o.CheckpointerActivate, "checkpointer-activate-after", checkpointer.DefaultTiming.ActivateAfter, "run a checkpoint once the apiserver has been unreachable this long")
	f.DurationVar(&o.CheckpointerStart, "checkpointer-activate-after-start", checkpointer.DefaultTiming.ActivateAfterStart, "while the apiserver has not answered once since bootlet started (after a reboot), run a checkpoint once it has been unreachable this long")
	f.DurationVar(&o.CheckpointerWithdraw, "checkpointer-withdraw-after", checkpointer.DefaultTiming.WithdrawAfter, "withdraw a running checkpoint once its self-hosted pod has been Ready on this node this long (doubled for each withdrawal in the last 10 minutes, up to 5 minutes); one activated at bootlet's start (a reboot) is withdrawn as soon as the self-hosted pod's own process answers its readiness endpoint")
	f.DurationVar(&o.CertRenewBefore, "cert-renew-before", config.DefaultCertRenewBefore, "at start and hourly, renew the certificates that expire within this duration and record a CertificatesRenewed event on the Node: bootlet's own serving certificate, and with --pivot-kubeconfig and --self-hosted-assets every leaf of the asset dir (its parent) with `bootlet certs renew` (docs/operations.md, Certificates); 0: never")
	f.BoolVar(&o.ReleaseStartupPages, "release-startup-pages", true, "when ready and after each burst of pod work, return the freed heap and unmap the pages of the binary the work touched; they stay in the page cache (see docs/design/architecture.md, Footprint)")
	addTCPFlags(f, &o.TCP)
	addLimitFlags(f, &o.Limits)
	addLocalTrustFlags(f, &o.LocalTrust)
	return cmd
}
