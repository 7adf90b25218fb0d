package main

import (
	"os/exec"
	"strings"
	"testing"
)

// toolLibraries are what bootlet-tools exists for: kubeadm (render, certs,
// join), the etcd client (etcd snapshot, recover) and kubectl's describers
// (describe). Their package init would run in the daemon on every node and
// their code would sit in its binary, so bootlet must link none of them.
var toolLibraries = []string{
	"k8s.io/kubernetes/cmd/kubeadm",
	"go.etcd.io/etcd/client",
	"k8s.io/kubectl/pkg/describe",
}

// deps are the packages the main package dir links, as `go list -deps`
// reports them (test files not included).
func deps(t *testing.T, dir string) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list the dependencies with: %v", err)
	}
	out, err := exec.Command(goBin, "list", "-deps", dir).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", dir, err, stderr)
	}
	return strings.Fields(string(out))
}

// linked are the packages of pkgs under the import path prefix.
func linked(pkgs []string, prefix string) []string {
	var out []string
	for _, p := range pkgs {
		if p == prefix || strings.HasPrefix(p, prefix+"/") {
			out = append(out, p)
		}
	}
	return out
}

func TestBootletLinksNoToolLibrary(t *testing.T) {
	lean := deps(t, ".")
	for _, lib := range toolLibraries {
		if got := linked(lean, lib); len(got) > 0 {
			t.Errorf("bootlet links %s (%s): a tool verb's package is imported by the daemon's binary; it belongs in cmd/bootlet-tools", lib, strings.Join(got, ", "))
		}
	}
	// The other side of the line: bootlet-tools links each, so a pattern
	// that matches nothing (a library renamed upstream) cannot make the
	// check above pass vacuously.
	tools := deps(t, "../bootlet-tools")
	for _, lib := range toolLibraries {
		if len(linked(tools, lib)) == 0 {
			t.Errorf("bootlet-tools links nothing under %s: the pattern is stale", lib)
		}
	}
}
