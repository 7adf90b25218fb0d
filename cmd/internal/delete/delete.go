package delete

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/podapi/podclient"
)

func NewCommand(server *string) *cobra.Command {
	var namespace string
	var grace int64
	var wait bool
	cmd := &cobra.Command{
		Use:   "delete (pod|secret|configmap) NAME...",
		Short: "Delete objects; pods are stopped gracefully",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, err := cli.NamespacedClient(server, &namespace)
			if err != nil {
				return err
			}
			o := podclient.DeleteOptions{
				Wait:    wait,
				Deleted: func(kind, name string) { fmt.Printf("%s %q deleted\n", kind, name) },
			}
			if grace >= 0 {
				o.GracePeriodSeconds = &grace
			}
			return podclient.Delete(cmd.Context(), cs, cli.NormalizeResource(args[0]), namespace, args[1:], o)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace")
	cmd.Flags().Int64Var(&grace, "grace-period", -1, "seconds given to the pod to terminate (-1: the pod's own)")
	cmd.Flags().BoolVar(&wait, "wait", true, "wait until the pod is gone")
	return cmd
}
