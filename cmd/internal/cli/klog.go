package cli

import (
	goflag "flag"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// AddKlogFlags shows klog's flags (-v, --logtostderr, ...) where they matter,
// on `daemon`, and keeps them working but hidden on every other command, as
// kubectl hides them from its commands' help.
func AddKlogFlags(root, daemon *cobra.Command) {
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	// Two pflag views of the same klog values: visible on daemon, hidden
	// and persistent everywhere else. A command's own flag wins over an
	// inherited one of the same name, so daemon shows its copy.
	daemon.Flags().AddGoFlagSet(klogFlags)
	hidden := pflag.NewFlagSet("klog", pflag.ContinueOnError)
	hidden.AddGoFlagSet(klogFlags)
	hidden.VisitAll(func(f *pflag.Flag) {
		f.Hidden = true
		root.PersistentFlags().AddFlag(f)
	})
}
