package upgrade

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/upgrade/cvclient"
	"github.com/bootlet/bootlet/upgrade/follow"
	"github.com/bootlet/bootlet/upgrade/observer"
)

// NewCommand is `bootlet upgrade` and its verbs.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Upgrade the cluster's Kubernetes version through its own API",
	}
	cmd.AddCommand(newPlanCommand(), newApplyCommand(), newStatusCommand(), newAgentCommand())
	return cmd
}

// clusterFlags are the cluster's kubeconfig flags (cli.ClusterFlags).
type clusterFlags struct{ cli.ClusterFlags }

// clientset is a client of the cluster's kubeconfig (path).
func (f *clusterFlags) clientset(cmd *cobra.Command) (kubernetes.Interface, error) {
	cs, _, err := f.clients(cmd)
	return cs, err
}

// clients are a clientset and a dynamic client (the ClusterVersion's) of
// the cluster's kubeconfig.
func (f *clusterFlags) clients(cmd *cobra.Command) (kubernetes.Interface, dynamic.Interface, error) {
	path, err := f.KubeconfigPath(cmd)
	if err != nil {
		return nil, nil, err
	}
	cfg, cs, err := kubeclient.ForFile(path, "bootlet-upgrade", 30*time.Second)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	dyn, err := cvclient.ForConfig(cfg)
	return cs, dyn, err
}

// errNoTo is a missing --to.
var errNoTo = errors.New("--to is required: the Kubernetes version to upgrade to, e.g. v1.37.2")

func newPlanCommand() *cobra.Command {
	var f clusterFlags
	var to string
	etcdUpgrade := true
	cmd := &cobra.Command{
		Use:   "plan --to VERSION",
		Short: "Show what an upgrade to VERSION would change, step by step, and every reason it would be refused",
		Long: `Reads the cluster (nodes, kube-system's pods, DaemonSets and Deployments) and prints
the upgrade to VERSION: the preflight's verdict with every reason to refuse, each step in the
order the version skew policy allows (etcd member by member, each apiserver, the
controller-managers and schedulers, kube-proxy and CoreDNS, then the kubelets, each cordoned
and drained for a minor), whether every step keeps the skew policy, and the target's images
each node lacks. It changes nothing. It exits non-zero when the upgrade would be refused.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return errNoTo
			}
			cs, err := f.clientset(cmd)
			if err != nil {
				return err
			}
			report, err := observer.PlanReport(cmd.Context(), cs, to, etcdUpgrade)
			if err != nil {
				return err
			}
			if err := report.Write(cmd.OutOrStdout()); err != nil {
				return err
			}
			if len(report.Refusals) > 0 {
				return fmt.Errorf("the upgrade to %s would be refused: see the reasons above", to)
			}
			return nil
		},
	}
	f.Add(cmd)
	cmd.Flags().StringVar(&to, "to", "", "the Kubernetes version to upgrade to")
	cmd.Flags().BoolVar(&etcdUpgrade, "etcd-upgrade", true, "also move etcd to the version the target release pins (kubeadm's flag of the same name); false leaves etcd as it runs")
	return cmd
}

func newApplyCommand() *cobra.Command {
	var f clusterFlags
	var to string
	var wait bool
	var timeout time.Duration
	etcdUpgrade := true
	cmd := &cobra.Command{
		Use:   "apply --to VERSION [--wait] [--timeout 2h]",
		Short: "Ask the upgrade controller for Kubernetes VERSION, and with --wait follow the upgrade to its end",
		Long: `Makes the plan ` + "`bootlet upgrade plan`" + ` shows and, when it would be refused, prints it and sets nothing.
Else it sets VERSION as the desired version of the ClusterVersion named cluster and prints the
generation it asked for; the upgrade controller takes the steps from there. Setting the version
the ClusterVersion already asks for retries a stopped upgrade (it bumps spec.retry, a new
generation).

With --wait it reads the ClusterVersion every second and prints one timestamped line per change:
the generation the controller took, the step under way, the step in flight or rolling back, and
each condition (Progressing, Available, Failing). The API may be away for up to 30 s in a row, as
while an apiserver hands its port over. It exits 0 once the controller reports the generation done
(Progressing=False, reason Done), and non-zero when the upgrade stops (Failing=True: rolled back,
held for a person, or refused; the message says why) or when --timeout passes (the upgrade goes
on: ` + "`bootlet upgrade status`" + ` shows it). Interrupting it stops only the following.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return errNoTo
			}
			cs, dyn, err := f.clients(cmd)
			if err != nil {
				return err
			}
			return follow.Apply(cmd.Context(), dyn, cs, to, etcdUpgrade, cmd.OutOrStdout(), wait, timeout)
		},
	}
	f.Add(cmd)
	cmd.Flags().StringVar(&to, "to", "", "the Kubernetes version to upgrade to")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the upgrade until it is done or stops")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Hour, "with --wait, how long to follow before giving up (0: no limit)")
	cmd.Flags().BoolVar(&etcdUpgrade, "etcd-upgrade", true, "also move etcd to the version the target release pins (kubeadm's flag of the same name); false leaves etcd as it runs")
	return cmd
}

func newStatusCommand() *cobra.Command {
	var f clusterFlags
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show where the upgrade stands: versions, the step under way, conditions, components and history",
		Long: `Reads the ClusterVersion named cluster and prints, as kubectl describe does: the desired version
and the generation the upgrade controller observed, the versions the cluster runs (Kubernetes,
etcd, CoreDNS), the step under way, the step in flight or rolling back with when it began, the
conditions (Progressing, Available, Failing) with their reasons and ages, every component's
version by node ("-": cluster-wide), and the history of upgrades. It changes nothing. When no
desired version was ever set it says so and exits 0.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, dyn, err := f.clients(cmd)
			if err != nil {
				return err
			}
			return follow.Status(cmd.Context(), dyn, cmd.OutOrStdout())
		},
	}
	f.Add(cmd)
	return cmd
}
