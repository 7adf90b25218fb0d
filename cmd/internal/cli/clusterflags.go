package cli

import (
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
)

// ClusterFlags are the flags of a verb that talks to the cluster's API as
// its administrator, on a master: --kubeconfig and --asset-dir.
type ClusterFlags struct {
	Kubeconfig, AssetDir string
}

// Add declares the flags on cmd.
func (f *ClusterFlags) Add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.Kubeconfig, "kubeconfig", "", "the cluster's kubeconfig (default $KUBECONFIG, else --asset-dir/admin.conf)")
	cmd.Flags().StringVar(&f.AssetDir, "asset-dir", DefaultAssetDir, "the directory `bootlet render` wrote, for its admin.conf (default: the running daemon's)")
}

// KubeconfigPath is the kubeconfig to use: the flag, $KUBECONFIG, or the
// asset dir's admin.conf, the node's own as its daemon runs with it.
func (f *ClusterFlags) KubeconfigPath(cmd *cobra.Command) (string, error) {
	if f.Kubeconfig != "" {
		return f.Kubeconfig, nil
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		return env, nil
	}
	NodeDefaults(cmd, &f.AssetDir, nil)
	p := filepath.Join(f.AssetDir, "admin.conf")
	if _, err := os.Stat(p); err != nil {
		return "", NameFlag(err, DirFlag{Dir: f.AssetDir, Flag: "--asset-dir (or --kubeconfig)"})
	}
	return p, nil
}
