// Command bootlet is the node daemon and its CLI: `bootlet daemon` runs pods
// through containerd's CRI with no apiserver; the other verbs talk to it.
// The heavy verbs (describe, render, certs, etcd, recover, join, master) exec
// bootlet-tools, so that the daemon's binary never links their libraries
// (deps_test.go holds that line).
package main

import (
	"os"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/cmd/internal/root"
)

// version is set at build time (-ldflags -X main.version=...).
var version = "dev"

func main() { os.Exit(root.Main(version, cli.ExecTools())) }
