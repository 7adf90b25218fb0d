package upgrade

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/upgrade/observer"
)

// NewCommand is `bootlet upgrade` and its verbs.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Upgrade the cluster's Kubernetes version through its own API",
	}
	cmd.AddCommand(newPlanCommand())
	return cmd
}

type clusterFlags struct {
	kubeconfig, assetDir string
}

func (f *clusterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kubeconfig, "kubeconfig", "", "the cluster's kubeconfig (default $KUBECONFIG, else --asset-dir/admin.conf)")
	cmd.Flags().StringVar(&f.assetDir, "asset-dir", cli.DefaultAssetDir, "the directory `bootlet render` wrote, for its admin.conf (default: the running daemon's)")
}

// path is the kubeconfig to use: the flag, $KUBECONFIG, or the asset dir's
// admin.conf, the node's own as its daemon runs with it.
func (f *clusterFlags) path(cmd *cobra.Command) (string, error) {
	if f.kubeconfig != "" {
		return f.kubeconfig, nil
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		return env, nil
	}
	cli.NodeDefaults(cmd, &f.assetDir, nil)
	p := filepath.Join(f.assetDir, "admin.conf")
	if _, err := os.Stat(p); err != nil {
		return "", cli.NameFlag(err, cli.DirFlag{Dir: f.assetDir, Flag: "--asset-dir (or --kubeconfig)"})
	}
	return p, nil
}

func newPlanCommand() *cobra.Command {
	var f clusterFlags
	var to string
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
				return errors.New("--to is required: the Kubernetes version to upgrade to, e.g. v1.37.2")
			}
			path, err := f.path(cmd)
			if err != nil {
				return err
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				return fmt.Errorf("kubeconfig %s: %w", path, err)
			}
			cs, err := kubeclient.New(cfg, "bootlet-upgrade", 30*time.Second)
			if err != nil {
				return err
			}
			report, err := observer.PlanReport(cmd.Context(), cs, to)
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
	f.add(cmd)
	cmd.Flags().StringVar(&to, "to", "", "the Kubernetes version to upgrade to")
	return cmd
}
