package logs

import (
	"os"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/podapi/podclient"
)

func NewCommand(server *string) *cobra.Command {
	var namespace, container string
	var follow, previous, timestamps bool
	var tail int64
	cmd := &cobra.Command{
		Use:   "logs POD",
		Short: "Print a container's logs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, err := cli.NamespacedClient(server, &namespace)
			if err != nil {
				return err
			}
			opts := &v1.PodLogOptions{Container: container, Follow: follow, Previous: previous, Timestamps: timestamps}
			if tail >= 0 {
				opts.TailLines = &tail
			}
			return podclient.Logs(cmd.Context(), cs, namespace, args[0], opts, os.Stdout)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&namespace, "namespace", "n", "", "namespace")
	f.StringVarP(&container, "container", "c", "", "container name")
	f.BoolVarP(&follow, "follow", "f", false, "stream new lines")
	f.BoolVarP(&previous, "previous", "p", false, "the previous, terminated container")
	f.BoolVar(&timestamps, "timestamps", false, "prefix lines with timestamps")
	f.Int64Var(&tail, "tail", -1, "lines from the end to show")
	return cmd
}
