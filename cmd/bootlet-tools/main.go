// Command bootlet-tools is bootlet with the heavy verbs built in: describe,
// render, certs, etcd, recover and join, which bootlet execs it for. Every
// other verb is bootlet's own, so either binary answers any command line.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/certs"
	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/cmd/internal/describe"
	"github.com/bootlet/bootlet/cmd/internal/etcd"
	"github.com/bootlet/bootlet/cmd/internal/join"
	"github.com/bootlet/bootlet/cmd/internal/recover"
	"github.com/bootlet/bootlet/cmd/internal/render"
	"github.com/bootlet/bootlet/cmd/internal/root"
)

// version is set at build time (-ldflags -X main.version=...).
var version = "dev"

func main() {
	os.Exit(root.Main(version, cli.Tools{
		Commands: func(server *string) []*cobra.Command {
			return []*cobra.Command{describe.NewCommand(server), render.NewCommand(), certs.NewCommand(), etcd.NewCommand(), recover.NewCommand(server), join.NewCommand()}
		},
		// This binary runs the tool verbs itself.
		Path: func(string) (string, error) { return os.Executable() },
	}))
}
