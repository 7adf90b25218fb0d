package apply

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/internal/manifestfile"
	"github.com/bootlet/bootlet/podapi/podclient"
)

func NewCommand(server *string) *cobra.Command {
	var files []string
	var namespace string
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create or update pods, secrets and configmaps from manifests",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("must specify -f")
			}
			cs, err := cli.Client(server)
			if err != nil {
				return err
			}
			objs, err := manifestfile.Read(files)
			if err != nil {
				return err
			}
			var failed bool
			for _, r := range podclient.Apply(cmd.Context(), cs, objs, namespace) {
				if r.Err != nil {
					fmt.Fprintln(os.Stderr, "error:", cli.ErrorMessage(r.Err))
					failed = true
					continue
				}
				fmt.Println(r.Message)
			}
			if failed {
				return fmt.Errorf("some objects were not applied")
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "manifest file, directory or - for stdin")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace for objects that name none")
	return cmd
}
