// Command bootlet-tools is bootlet with the heavy verbs built in: describe,
// render, certs, etcd, recover, join and master, which bootlet execs it for. Every
// other verb is bootlet's own, so either binary answers any command line.
package main

import (
	"os"

	"github.com/bootlet/bootlet/cmd/internal/root"
	"github.com/bootlet/bootlet/cmd/internal/tools"
)

// version is set at build time (-ldflags -X main.version=...).
var version = "dev"

func main() { os.Exit(root.Main(version, tools.Builtin())) }
