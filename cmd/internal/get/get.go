package get

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/podapi/podclient"
)

func NewCommand(server *string) *cobra.Command {
	o := &cli.GetOptions{}
	cmd := &cobra.Command{
		Use:   "get (pods|secrets|configmaps|events|namespaces|nodes) [NAME]",
		Short: "Display objects",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, err := cli.Client(server)
			if err != nil {
				return err
			}
			q := podclient.Query{Resource: cli.NormalizeResource(args[0]), Namespace: o.NS(), Selector: o.Selector}
			if len(args) == 2 {
				q.Name = args[1]
			}
			obj, err := podclient.Get(cmd.Context(), cs, q)
			if err != nil {
				return err
			}
			return cli.PrintGet(obj, q.Resource, o, os.Stdout)
		},
	}
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", "", "namespace")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "list across all namespaces")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "", "output format: wide|yaml|json|name")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "label selector")
	return cmd
}
