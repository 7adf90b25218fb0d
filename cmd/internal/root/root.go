// Package root assembles bootlet's command tree, shared by both binaries:
// cmd/bootlet passes forwarders for the tool verbs, cmd/bootlet-tools the
// verbs themselves (cli.Tools), so the daemon's binary never links them.
package root

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/cmd/internal/apply"
	"github.com/bootlet/bootlet/cmd/internal/checkpoint"
	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/cmd/internal/daemon"
	"github.com/bootlet/bootlet/cmd/internal/delete"
	"github.com/bootlet/bootlet/cmd/internal/get"
	"github.com/bootlet/bootlet/cmd/internal/images"
	"github.com/bootlet/bootlet/cmd/internal/kubeconfig"
	"github.com/bootlet/bootlet/cmd/internal/kubeletgate"
	"github.com/bootlet/bootlet/cmd/internal/logs"
	"github.com/bootlet/bootlet/cmd/internal/status"
	upgradecmd "github.com/bootlet/bootlet/cmd/internal/upgrade"
	versioncmd "github.com/bootlet/bootlet/cmd/internal/version"
)

// Main runs the command line and returns the process's exit code.
func Main(version string, tools cli.Tools) int {
	if err := NewCommand(version, tools).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", cli.DescribeError(err))
		klog.Flush()
		return 1
	}
	return 0
}

// NewCommand builds the command tree.
func NewCommand(version string, tools cli.Tools) *cobra.Command {
	root := &cobra.Command{
		Use:           "bootlet",
		Short:         "A node-local pod write API over the CRI, with checkpoints and kubelet handoff",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var server string
	root.PersistentFlags().StringVar(&server, "server", "", "bootlet API address (unix:///path); default $BOOTLET_SERVER or unix:///run/bootlet/bootlet.sock")
	daemonCmd := daemon.NewCommand(tools.Path)
	cli.AddKlogFlags(root, daemonCmd)
	root.AddCommand(
		daemonCmd,
		apply.NewCommand(&server),
		get.NewCommand(&server),
		delete.NewCommand(&server),
		logs.NewCommand(&server),
		images.NewCommand(),
		checkpoint.NewCommand(),
		status.NewCommand(&server),
		kubeconfig.NewCommand(&server),
		kubeletgate.NewCommand(),
		upgradecmd.NewCommand(),
		versioncmd.NewCommand(version),
	)
	root.AddCommand(tools.Commands(&server)...)
	return root
}
