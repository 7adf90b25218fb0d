// Package shellcmd reads a command line out of one of the project's shell
// scripts, so that tests can hold the shipped systemd units and config file
// to the flags `make up` passes (hack/*-up.sh). It parses the project's own
// plain style only (one flag or value per word, lines joined by a trailing
// backslash, the command ended by a redirection); it is no shell parser and
// expands nothing. It must not be used on input from outside the repository.
package shellcmd

import (
	"fmt"
	"os"
	"strings"
)

// FlagNames are the --flag (or -flag) names among args, in order.
func FlagNames(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		out = append(out, name)
	}
	return out
}

// ScriptFlags returns the flag names of the command line in script that
// starts on the first line containing start and ends at the first line
// without a trailing backslash.
func ScriptFlags(script, start string) ([]string, error) {
	data, err := os.ReadFile(script)
	if err != nil {
		return nil, err
	}
	var words []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		if !in && strings.Contains(line, start) {
			in = true
		}
		if !in {
			continue
		}
		for _, w := range strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), `\`)) {
			if strings.HasPrefix(w, ">") || w == "<" {
				break
			}
			words = append(words, w)
		}
		if !strings.HasSuffix(strings.TrimSpace(line), `\`) {
			break
		}
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("%s: no command line starting with %q", script, start)
	}
	return FlagNames(words), nil
}
