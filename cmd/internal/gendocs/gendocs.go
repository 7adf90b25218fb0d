package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"github.com/spf13/pflag"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/cmd/internal/root"
	"github.com/bootlet/bootlet/cmd/internal/tools"
)

// machineDefaults are flags whose default is read from the machine the
// command runs on; the reference names where it comes from instead ("":
// the usage says it already), so it is the same wherever it is generated.
var machineDefaults = map[string]string{
	"daemon/node-name":         "the host name, lower-cased",
	"agent/node-name":          "the host name, lower-cased",
	"render/node-name":         "the host name",
	"render/advertise-address": "",
}

// write regenerates the reference in dir.
func write(dir, configTypes string) error {
	full := root.NewCommand("", tools.Builtin())
	lean := root.NewCommand("", cli.ExecTools())
	prepare(full)
	cliDir := filepath.Join(dir, "cli")
	if err := os.RemoveAll(cliDir); err != nil {
		return err
	}
	if err := os.MkdirAll(cliDir, 0o755); err != nil {
		return err
	}
	if err := doc.GenMarkdownTree(full, cliDir); err != nil {
		return err
	}
	daemonCmd, _, err := full.Find([]string{"daemon"})
	if err != nil {
		return err
	}
	cfg, err := configReference(configTypes, daemonCmd.Flags())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.md"), cfg, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "README.md"), index(full, lean), 0o644)
}

// prepare makes the tree's pages the same on every machine and day: no
// generation date, no machine-read default.
func prepare(c *cobra.Command) {
	c.DisableAutoGenTag = true
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if v, ok := machineDefaults[c.Name()+"/"+f.Name]; ok {
			f.DefValue = v
		}
	})
	for _, sub := range c.Commands() {
		prepare(sub)
	}
}

// index is README.md: each verb, which binary runs it, and its page.
func index(full, lean *cobra.Command) []byte {
	forwarded := map[string]bool{}
	for _, c := range lean.Commands() {
		if c.DisableFlagParsing {
			forwarded[c.Name()] = true
		}
	}
	var b bytes.Buffer
	b.WriteString(`# Reference

Generated from the code by ` + "`make docs`" + ` (` + "`go run ./cmd/internal/gendocs`" + `); do not edit: a
test fails while these pages differ from what the code generates.

- [The daemon's configuration file](config.md): every field of BootletConfiguration, its type,
  the flag it stands for, and what it does.
- [The command line](cli/bootlet.md): every verb with its flags.

Both binaries have the same verbs. ` + "`bootlet`" + ` runs the daemon and the light verbs itself and
execs ` + "`bootlet-tools`" + ` (installed beside it) for the heavy ones, whose libraries stay out of the
daemon's binary.

| verb | runs in | summary |
|------|---------|---------|
`)
	cmds := full.Commands()
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].Name() < cmds[j].Name() })
	for _, c := range cmds {
		if !c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() {
			continue
		}
		where := "bootlet"
		if forwarded[c.Name()] {
			where = "bootlet-tools (bootlet execs it)"
		}
		page := "cli/" + strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
		fmt.Fprintf(&b, "| [%s](%s) | %s | %s |\n", c.Name(), page, where, strings.ReplaceAll(c.Short, "|", `\|`))
	}
	return b.Bytes()
}
