package describe

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/kubectl/pkg/describe"

	"github.com/bootlet/bootlet/cmd/internal/cli"
)

// NewCommand shows an object with kubectl's own describers, events
// included, so the output is what operators know from kubectl describe.
func NewCommand(server *string) *cobra.Command {
	var ns string
	cmd := &cobra.Command{
		Use:   cli.DescribeUse,
		Short: cli.DescribeShort,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cli.Client(server)
			if err != nil {
				return err
			}
			var d describe.ResourceDescriber
			switch cli.NormalizeResource(args[0]) {
			case "pods":
				d = &describe.PodDescriber{Interface: c}
			case "secrets":
				d = &describe.SecretDescriber{Interface: c}
			case "configmaps":
				d = &describe.ConfigMapDescriber{Interface: c}
			default:
				return fmt.Errorf("describe supports pods, secrets and configmaps, not %q", args[0])
			}
			out, err := d.Describe(ns, args[1], describe.DescriberSettings{ShowEvents: true, ChunkSize: 500})
			if err != nil {
				return err
			}
			fmt.Print(out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "default", "namespace")
	return cmd
}
