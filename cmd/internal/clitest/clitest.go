// Package clitest runs command lines against verbs put under a root
// command as the binaries assemble it (its --server, klog's flags beside a
// daemon), for the tests of the verb packages, which cannot import
// cmd/internal/root without a cycle.
package clitest

import (
	"bytes"
	"testing"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/cli"
)

// Run executes args against a root holding the commands cmds builds and
// returns what the commands wrote to their cobra output.
func Run(t testing.TB, cmds func(server *string) []*cobra.Command, args ...string) (string, error) {
	t.Helper()
	root := &cobra.Command{Use: "bootlet", SilenceUsage: true, SilenceErrors: true}
	var server string
	root.PersistentFlags().StringVar(&server, "server", "", "bootlet API address")
	root.AddCommand(cmds(&server)...)
	for _, c := range root.Commands() {
		if c.Name() == "daemon" {
			cli.AddKlogFlags(root, c)
		}
	}
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}
