package upgrade

import (
	"errors"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/config"
	"github.com/bootlet/bootlet/masters/nodekeys"
	"github.com/bootlet/bootlet/upgrade/nodeagent"
)

// The agent's defaults are a worker's, as make install lays it out
// (dist/systemd: bootlet-kubelet-worker.service and
// bootlet-containerd.service); agent_test.go holds them to those files.
const (
	// AgentKubeconfig is the kubeconfig the worker's kubelet writes after
	// its TLS bootstrap: the node's own identity, the only one a worker
	// holds.
	AgentKubeconfig = "/etc/kubernetes/kubelet.conf"
	// AgentRuntimeEndpoint is bootlet-containerd.service's socket, where
	// the worker's images (the kubelet's among them) are.
	AgentRuntimeEndpoint = "unix:///run/bootlet/containerd.sock"
	// AgentRestartCommand restarts the worker's kubelet through its unit.
	AgentRestartCommand = "systemctl restart bootlet-kubelet-worker.service"
)

// agentOptions are the agent verb's flags.
type agentOptions struct {
	nodeName, kubeconfig, runtimeEndpoint, kubeletBinary, restartCommand, etcdPKIDir, identityKubeconfig string
}

// config is the node agent's configuration of the flags.
func (o agentOptions) config() (nodeagent.Config, error) {
	restart := strings.Fields(o.restartCommand)
	switch {
	case o.nodeName == "":
		return nodeagent.Config{}, errors.New("--node-name is empty: the agent acts on the kubelet step of this node's name")
	case o.kubeletBinary == "":
		return nodeagent.Config{}, errors.New("--kubelet-binary is empty: the agent has no kubelet to replace")
	case len(restart) == 0:
		return nodeagent.Config{}, errors.New("--kubelet-restart-command is empty: the new kubelet would never start")
	}
	return nodeagent.Config{NodeName: o.nodeName, Kubeconfig: o.kubeconfig, RuntimeAddress: o.runtimeEndpoint,
		KubeletBinary: o.kubeletBinary, RestartCommand: restart}, nil
}

// nodeKeys is the keeper of the node's credentials as a master (its etcd
// member certificate and the checkpointer identity), with the agent's
// node and identity.
func (o agentOptions) nodeKeys() (nodekeys.Config, error) {
	switch {
	case o.etcdPKIDir == "":
		return nodekeys.Config{}, errors.New("--etcd-pki-dir is empty: a labelled node's member certificate would have nowhere to go")
	case o.identityKubeconfig == "":
		return nodekeys.Config{}, errors.New("--checkpointer-kubeconfig is empty: a labelled node's checkpointer identity would have nowhere to go")
	}
	return nodekeys.Config{NodeName: o.nodeName, Kubeconfig: o.kubeconfig, Dir: o.etcdPKIDir, IdentityKubeconfig: o.identityKubeconfig}, nil
}

func newAgentCommand() *cobra.Command {
	o := agentOptions{}
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Take this node's kubelet step of an upgrade, and keep its credentials as a master once labelled one: the node agent of a node that runs no bootlet daemon (a worker)",
		Long: `Runs the upgrade's node agent until SIGTERM or SIGINT, as a master's daemon runs it for its own
node: every few seconds it reads the ClusterVersion named cluster, and when the step in flight (or
rolling back) is this node's kubelet and the upgrade controller has drained the node, it takes the
target's kubelet out of the image bootlet.dev/kubelet:VERSION in containerd, keeps the running one
as FILE.previous, puts the new one in place of --kubelet-binary and restarts the kubelet with
--kubelet-restart-command. A rollback puts the kept binary back.

Once an administrator labels the node a master (node-role.kubernetes.io/control-plane), the agent
also keeps the node's credentials as a master, each asked for in the node's own name:
  - its etcd member certificate: it makes a key in --etcd-pki-dir, posts a
    CertificateSigningRequest of signer bootlet.dev/etcd-member, and writes the certificate the
    masters' leader issues, with the etcd CA, beside the key; it asks again when the certificate
    nears its end or no longer names the node's addresses;
  - the checkpointer identity (system:bootlet-checkpointer, the identity of a master's bootlet):
    it posts a request of signer kubernetes.io/kube-apiserver-client for a month, which the
    masters' leader approves and the controller-manager signs, and writes the kubeconfig
    --checkpointer-kubeconfig with the kubelet's API address and CA; it asks again at 80% of the
    month.
It writes nothing else to the API, and nothing to its disk while the node is not labelled. A node
whose label goes keeps what it has: the member's pair until it expires, the identity for at most
its month.

The defaults are a worker's as make install lays it out (bootlet-upgrade-agent.service): the
kubelet's own kubeconfig, which the kubelet writes after its TLS bootstrap (the agent waits until
the file loads, and takes a renewed certificate when the file changes). The agent reads its own
Node, as every kubelet may, and the ClusterVersion, which render's
self-hosted/bootlet-upgrade-agent-rbac.yaml lets the group system:nodes get and nothing more.
On a master render made the daemon runs the agent itself; do not run both there. On a worker
labelled a master since, this agent keeps the kubelet's steps and the daemon takes its etcd
member's.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.config()
			if err != nil {
				return err
			}
			keyCfg, err := o.nodeKeys()
			if err != nil {
				return err
			}
			// The daemon's signals (node.Run): systemd stops the unit with
			// SIGTERM, a person with ^C; either ends the round in hand.
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			keeper := nodekeys.New(keyCfg)
			var wg sync.WaitGroup
			wg.Go(func() { keeper.Run(ctx) })
			nodeagent.New(cfg).Run(ctx)
			wg.Wait()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.nodeName, "node-name", cli.DefaultNodeName(), "this node's name in the API: the agent takes the kubelet steps of this node (the kubelet's --hostname-override, if it has one)")
	f.StringVar(&o.kubeconfig, "kubeconfig", AgentKubeconfig, "kubeconfig of an identity that may get the ClusterVersion and this node's Node: a worker's kubelet's own (it may appear after the agent starts)")
	f.StringVar(&o.runtimeEndpoint, "runtime-endpoint", AgentRuntimeEndpoint, "containerd's socket, whose k8s.io namespace holds the image bootlet.dev/kubelet:VERSION of the target")
	f.StringVar(&o.kubeletBinary, "kubelet-binary", config.DefaultKubeletBinary, "the file the kubelet's unit runs: the agent puts the target's kubelet there, keeping the running one as FILE.previous")
	f.StringVar(&o.restartCommand, "kubelet-restart-command", AgentRestartCommand, "the command that restarts the kubelet through its unit, split at spaces")
	f.StringVar(&o.identityKubeconfig, "checkpointer-kubeconfig", nodekeys.DefaultIdentityKubeconfig, "where a node labelled a master keeps the checkpointer identity's kubeconfig, which a master's bootlet daemon reads (its --checkpointer-kubeconfig)")
	f.StringVar(&o.etcdPKIDir, "etcd-pki-dir", nodekeys.DefaultDir, "where a node labelled a master keeps its etcd member certificate: server.crt, peer.crt (the same), their keys and the etcd CA's ca.crt, as render lays out a first-boot master's")
	return cmd
}
