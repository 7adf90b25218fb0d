//go:build bootlet_tools

package main

import (
	"os"

	"github.com/spf13/cobra"
)

// toolCommands are the heavy verbs themselves (tools.go).
func toolCommands(server *string) []*cobra.Command {
	return []*cobra.Command{newDescribeCmd(server), newRenderCmd(), newCertsCmd(), newEtcdCmd(), newRecoverCmd(server), newJoinCmd()}
}

// toolsPath is the binary that runs the tool verbs: this one.
func toolsPath(string) (string, error) { return os.Executable() }
