// Package tools is the tool verbs built in, as bootlet-tools has them (the
// libraries bootlet must not link: kubeadm's, the etcd client, kubectl's
// describers). Only cmd/bootlet-tools and the reference generator import
// it; cmd/bootlet/deps_test.go holds bootlet to that.
package tools

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/certs"
	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/cmd/internal/describe"
	"github.com/bootlet/bootlet/cmd/internal/etcd"
	"github.com/bootlet/bootlet/cmd/internal/join"
	"github.com/bootlet/bootlet/cmd/internal/master"
	"github.com/bootlet/bootlet/cmd/internal/recover"
	"github.com/bootlet/bootlet/cmd/internal/render"
)

// Builtin are the tool verbs themselves; the binary that runs them is this
// one.
func Builtin() cli.Tools {
	return cli.Tools{
		Commands: func(server *string) []*cobra.Command {
			return []*cobra.Command{describe.NewCommand(server), render.NewCommand(), certs.NewCommand(), etcd.NewCommand(), recover.NewCommand(server), join.NewCommand(), master.NewCommand()}
		},
		Path: func(string) (string, error) { return os.Executable() },
	}
}
