package images

import (
	"fmt"
	"os"
	"sort"

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
			var files []string
			for _, a := range args {
				if fi, err := os.Stat(a); err == nil && fi.IsDir() {
					more, err := cri.ArchivesIn(a)
					if err != nil {
						return err
					}
					files = append(files, more...)
				} else {
					files = append(files, a)
				}
			}
			sort.Strings(files)
			names, err := cri.ImportArchives(cmd.Context(), address, files)
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
