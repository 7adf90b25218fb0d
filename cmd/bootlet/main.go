// Command bootlet is the node daemon and its CLI: `bootlet daemon` runs pods
// through containerd's CRI with no apiserver; the other verbs talk to it.
package main

import (
	goflag "flag"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

// version is set at build time (-ldflags -X main.version=...).
var version = "dev"

func main() {
	root := &cobra.Command{
		Use:           "bootlet",
		Short:         "A node-local pod write API over the CRI, with checkpoints and kubelet handoff",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	klogFlags := goflag.NewFlagSet("klog", goflag.ExitOnError)
	klog.InitFlags(klogFlags)
	root.PersistentFlags().AddGoFlagSet(klogFlags)
	var server string
	root.PersistentFlags().StringVar(&server, "server", "", "bootlet API address (unix:///path); default $BOOTLET_SERVER or unix:///run/bootlet/bootlet.sock")
	root.AddCommand(
		newDaemonCmd(),
		newApplyCmd(&server),
		newGetCmd(&server),
		newDeleteCmd(&server),
		newLogsCmd(&server),
		newImagesCmd(),
		newCheckpointCmd(),
		newStatusCmd(&server),
		newKubeconfigCmd(&server),
		newDescribeCmd(&server),
		newRenderCmd(),
		&cobra.Command{Use: "version", Short: "Print the version", Run: func(*cobra.Command, []string) { fmt.Println("bootlet", version) }},
	)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", errorMessage(err))
		klog.Flush()
		os.Exit(1)
	}
}
