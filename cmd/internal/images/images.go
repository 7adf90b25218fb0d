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
		Short: "Import OCI or docker image archives into containerd's k8s.io namespace, pinned against the kubelet's image GC",
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
	ext := &cobra.Command{
		Use:   "extract IMAGE FILE DEST",
		Short: "Copy a file out of an imported image to DEST, atomically (how a node installs the kubelet of bootlet.dev/kubelet:VERSION)",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cri.ExtractFile(cmd.Context(), address, args[0], args[1], args[2]); err != nil {
				return err
			}
			fmt.Printf("extracted %s from %s to %s\n", args[1], args[0], args[2])
			return nil
		},
	}
	ext.Flags().StringVar(&address, "address", "/run/containerd/containerd.sock", "containerd socket")
	cmd.AddCommand(imp, ext)
	return cmd
}
