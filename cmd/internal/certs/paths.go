package certs

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/config"
)

// paths are the files and directories a certs verb reads, each set by a
// flag, defined here once for both verbs so that they default and fail
// alike: --asset-dir and --root-dir default to the running daemon's (its
// configuration, when it answers), and an error about a missing file says
// which flag sets the directory it is in.
type paths struct {
	assetDir, rootDir, kubeconfig, servingCert *string
}

// pathHelp is each verb's help of the flags whose meaning differs between
// them.
type pathHelp struct {
	assetDir, kubeconfig, servingCert string
}

// addFlags defines the four flags on f.
func (p paths) addFlags(f *pflag.FlagSet, help pathHelp) {
	f.StringVar(p.assetDir, "asset-dir", cli.DefaultAssetDir, help.assetDir)
	f.StringVar(p.rootDir, "root-dir", config.DefaultRootDir, "the daemon's --root-dir (its checkpoints and its own PKI)")
	f.StringVar(p.kubeconfig, "kubeconfig", "", help.kubeconfig)
	f.StringVar(p.servingCert, "serving-cert", "", help.servingCert)
}

// run runs verb with the flags not given on the command line taken from
// the daemon, and names the flag of a missing path in its error.
func (p paths) run(cmd *cobra.Command, verb func() error) error {
	cli.NodeDefaults(cmd, p.assetDir, p.rootDir)
	return cli.NameFlag(verb(), cli.DirFlag{Dir: *p.assetDir, Flag: "--asset-dir"}, cli.DirFlag{Dir: *p.rootDir, Flag: "--root-dir"},
		cli.DirFlag{Dir: *p.kubeconfig, Flag: "--kubeconfig"}, cli.DirFlag{Dir: *p.servingCert, Flag: "--serving-cert"})
}
