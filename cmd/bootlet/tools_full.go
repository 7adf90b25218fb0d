//go:build bootlet_tools

package main

import "github.com/spf13/cobra"

// toolCommands are the heavy verbs themselves (tools.go).
func toolCommands(server *string) []*cobra.Command {
	return []*cobra.Command{newDescribeCmd(server), newRenderCmd(), newCertsCmd(), newEtcdCmd(), newRecoverCmd(server)}
}
