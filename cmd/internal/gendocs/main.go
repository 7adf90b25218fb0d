// Command gendocs writes the reference under docs/reference from the code,
// so that it cannot drift from it (`make docs`; main_test.go fails while
// the committed pages differ): cli/*.md from the command tree of
// bootlet-tools (every verb built in; bootlet has the same tree, its tool
// verbs forwarded to bootlet-tools), config.md from the
// BootletConfiguration types (their json names, their doc comments in
// config/types.go, and the daemon flag each field stands for), and
// README.md, the index. It lives under cmd/ because only cmd/ may import
// the verb packages in cmd/internal.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("out", "docs/reference", "the reference directory to write (its cli/ is replaced)")
	types := flag.String("config-types", "config/types.go", "the source of the BootletConfiguration types, for their doc comments")
	flag.Parse()
	if err := write(*out, *types); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}
