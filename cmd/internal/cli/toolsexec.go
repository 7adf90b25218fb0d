package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// toolsBinary is the file name of cmd/bootlet-tools, installed next to
// bootlet (make build writes both to _output/bin).
const toolsBinary = "bootlet-tools"

// ExecTools are the tool verbs of bootlet: each execs bootlet-tools.
func ExecTools() Tools { return Tools{Commands: execCommands, Path: toolsPath} }

// execCommands are the heavy verbs as thin commands that exec bootlet-tools
// with this process's arguments (tools.go). Flags are not parsed here, so
// that bootlet-tools sees them, --help included, exactly as typed.
func execCommands(*string) []*cobra.Command {
	forward := func(use, short string) *cobra.Command {
		return &cobra.Command{
			Use:                use,
			Short:              short,
			DisableFlagParsing: true,
			RunE: func(cmd *cobra.Command, _ []string) error {
				self, _ := os.Executable()
				path, err := findTools(cmd.Name(), self, exec.LookPath)
				if err != nil {
					return err
				}
				// Exec, not a child: the tool gets the terminal, the
				// signals and the exit code as if it were bootlet.
				return syscall.Exec(path, append([]string{path}, os.Args[1:]...), os.Environ())
			},
		}
	}
	return []*cobra.Command{forward(DescribeUse, DescribeShort), forward(RenderUse, RenderShort), forward(CertsUse, CertsShort), forward(EtcdUse, EtcdShort), forward(RecoverUse, RecoverShort), forward(JoinUse, JoinShort), forward(MasterUse, MasterShort)}
}

// findTools returns bootlet-tools next to the running bootlet (self), else
// the one on PATH, else an error that names the verb and what to install.
func findTools(verb, self string, lookPath func(string) (string, error)) (string, error) {
	if self != "" {
		p := filepath.Join(filepath.Dir(self), toolsBinary)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: %w", p, err)
		}
	}
	if p, err := lookPath(toolsBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("bootlet %s runs %s, which is neither next to bootlet (in %s) nor on PATH: install it beside bootlet (`make build` writes both to _output/bin)",
		verb, toolsBinary, filepath.Dir(self))
}

// toolsPath is the bootlet-tools binary that runs the tool verb verb for
// the daemon (its automatic certificate renewal).
func toolsPath(verb string) (string, error) {
	self, _ := os.Executable()
	return findTools(verb, self, exec.LookPath)
}
