package logs

import (
	"io"
	"os"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/bootlet/bootlet/cmd/internal/cli"
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
			rc, err := cs.CoreV1().Pods(namespace).GetLogs(args[0], opts).Stream(cmd.Context())
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(os.Stdout, rc)
			return err
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
