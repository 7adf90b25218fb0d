package images

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cri"
)

func NewCommand() *cobra.Command {
	var address string
	cmd := &cobra.Command{Use: "images", Short: "Manage images in the runtime"}
	imp := &cobra.Command{
		Use:   "import FILE...",
		Short: "Import OCI or docker image archives into containerd's k8s.io namespace",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := cri.ImportPaths(cmd.Context(), address, args)
			for _, n := range names {
				fmt.Println("imported", n)
			}
			return err
		},
	}
	imp.Flags().StringVar(&address, "address", "/run/containerd/containerd.sock", "containerd socket")
	cmd.AddCommand(imp)
	return cmd
}
