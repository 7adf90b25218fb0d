package render

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/bootlet/bootlet/cmd/internal/clitest"
	"github.com/bootlet/bootlet/cmd/internal/join"
)

var masterArgs = []string{"--master", "master-1=192.0.2.11", "--master", "master-2=192.0.2.12", "--master", "master-3=192.0.2.13"}

// `bootlet render --master ...` writes one dir per master, and `bootlet
// join print` gives the same command (the endpoint, the shared token and
// CA) from each.
func TestRenderMastersCLI(t *testing.T) {
	dir := t.TempDir()
	out, err := runRoot(t, append([]string{"render", "--asset-dir", dir, "--control-plane-endpoint", "192.0.2.10:6443"}, masterArgs...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, m := range []string{"master-1 (192.0.2.11, API https://192.0.2.10:6443) into " + filepath.Join(dir, "master-1"),
		"master-3 (192.0.2.13, API https://192.0.2.10:6443) into " + filepath.Join(dir, "master-3")} {
		if !strings.Contains(out, m) {
			t.Errorf("output lacks %q:\n%s", m, out)
		}
	}
	// The controller-manager and the scheduler are DaemonSets on the
	// masters, one pod per master by construction, not Deployments.
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		data, err := os.ReadFile(filepath.Join(dir, "master-2", "self-hosted", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "\nkind: DaemonSet\n") || strings.Contains(string(data), "kind: Deployment") {
			t.Errorf("%s.yaml of master-2 holds no DaemonSet, or a Deployment:\n%s", name, data)
		}
	}
	var first string
	for _, m := range []string{"master-1", "master-2", "master-3"} {
		line, err := runRoot(t, "join", "print", "--asset-dir", filepath.Join(dir, m))
		if err != nil {
			t.Fatalf("%s: join print: %v", m, err)
		}
		if !strings.Contains(line, "192.0.2.10:6443") {
			t.Errorf("%s: join print does not name the endpoint: %s", m, line)
		}
		if first == "" {
			first = line
		} else if line != first {
			t.Errorf("%s: join print %q, master-1's %q", m, line, first)
		}
	}
}

// Contradictory or bad flags are one Invalid status naming every flag, and
// nothing is written.
func TestRenderMastersCLIRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"node name with masters", append([]string{"--node-name", "node1", "--control-plane-endpoint", "192.0.2.10"}, masterArgs...), []string{"--node-name: Forbidden"}},
		{"advertise address with masters", append([]string{"--advertise-address", "192.0.2.11", "--control-plane-endpoint", "192.0.2.10"}, masterArgs...), []string{"--advertise-address: Forbidden"}},
		{"no endpoint", masterArgs, []string{"--control-plane-endpoint: Required value"}},
		{"malformed master and a duplicate", []string{"--master", "master-1", "--master", "a=192.0.2.11", "--master", "b=192.0.2.11", "--control-plane-endpoint", "192.0.2.10"},
			[]string{`--master[0]: Invalid value: "master-1": must be NAME=IP`, `--master[2].address: Duplicate value: "192.0.2.11"`}},
		{"master asset dir without masters", []string{"--node-name", "node1", "--advertise-address", "192.0.2.10", "--master-asset-dir", "/x"}, []string{"--master-asset-dir: Forbidden"}},
		{"endpoint on another port", append([]string{"--control-plane-endpoint", "192.0.2.10:443"}, masterArgs...), []string{"--control-plane-endpoint: Invalid value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "assets")
			_, err := runRoot(t, append([]string{"render", "--asset-dir", dir}, tc.args...)...)
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want Invalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
				t.Errorf("wrote %s", dir)
			}
		})
	}
}

// runRoot runs args as bootlet would, with this package's verbs.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return clitest.Run(t, func(*string) []*cobra.Command { return []*cobra.Command{NewCommand(), join.NewCommand()} }, args...)
}
