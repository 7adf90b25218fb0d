package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newStatusCmd(server *string) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the daemon's readiness checks (recovery, container runtime)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cs, err := client(server)
			if err != nil {
				return err
			}
			v, err := cs.Discovery().ServerVersion()
			if err != nil {
				return err
			}
			fmt.Printf("server: %s\n", v.GitVersion)
			body, err := cs.CoreV1().RESTClient().Get().AbsPath("/readyz").Param("verbose", "").DoRaw(cmd.Context())
			fmt.Print(string(body))
			if err != nil {
				return fmt.Errorf("not ready")
			}
			return nil
		},
	}
}
