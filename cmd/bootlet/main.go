// Command bootlet is the node daemon and its CLI: `bootlet daemon` runs pods
// through containerd's CRI with no apiserver; the other verbs talk to it.
package main

import (
	goflag "flag"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// version is set at build time (-ldflags -X main.version=...).
var version = "dev"

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", describeError(err))
		klog.Flush()
		os.Exit(1)
	}
}

// newRootCmd builds the command tree.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "bootlet",
		Short:         "A node-local pod write API over the CRI, with checkpoints and kubelet handoff",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var server string
	root.PersistentFlags().StringVar(&server, "server", "", "bootlet API address (unix:///path); default $BOOTLET_SERVER or unix:///run/bootlet/bootlet.sock")
	daemon := newDaemonCmd()
	addKlogFlags(root, daemon)
	root.AddCommand(
		daemon,
		newApplyCmd(&server),
		newGetCmd(&server),
		newDeleteCmd(&server),
		newLogsCmd(&server),
		newImagesCmd(),
		newCheckpointCmd(),
		newStatusCmd(&server),
		newKubeconfigCmd(&server),
		newKubeletGateCmd(),
		&cobra.Command{Use: "version", Short: "Print the version", Run: func(*cobra.Command, []string) { fmt.Println("bootlet", version) }},
	)
	root.AddCommand(toolCommands(&server)...) // tools.go
	return root
}

// addKlogFlags shows klog's flags (-v, --logtostderr, ...) where they matter,
// on `daemon`, and keeps them working but hidden on every other command, as
// kubectl hides them from its commands' help.
func addKlogFlags(root, daemon *cobra.Command) {
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
