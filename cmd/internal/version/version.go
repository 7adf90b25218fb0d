package version

import (
	"fmt"

	"github.com/spf13/cobra"
)

// NewCommand prints version, which the binary's main got from the linker
// (-ldflags -X main.version=...).
func NewCommand(version string) *cobra.Command {
	return &cobra.Command{Use: "version", Short: "Print the version", Run: func(*cobra.Command, []string) { fmt.Println("bootlet", version) }}
}
