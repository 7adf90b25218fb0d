// Command etcd is a minimal wrapper around etcd's server entry point, pinned
// via this module's go.mod so hack/toolchain.sh can build it from the module
// proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
