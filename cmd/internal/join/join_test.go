package join

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/clitest"
	"github.com/bootlet/bootlet/cmd/internal/render"
	"github.com/bootlet/bootlet/manifests"
)

// TestJoinPrintTTL: --create-token's --ttl is bounded like render's
// --bootstrap-token-ttl, checked before anything is read or made, and the
// error names the flag and the bound.
func TestJoinPrintTTL(t *testing.T) {
	if d := newPrintCmd().Flags().Lookup("ttl").DefValue; d != "1h0m0s" {
		t.Errorf("join print --ttl defaults to %s, want 1h", d)
	}
	missing := filepath.Join(t.TempDir(), "none")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--create-token", "--ttl", "25h"}, "--ttl 25h0m0s: must be at most 24h0m0s"},
		{[]string{"--create-token", "--ttl", "8760h"}, "must be at most 24h0m0s"},
		{[]string{"--create-token", "--ttl", "0s"}, "--ttl 0s: must be positive"},
		{[]string{"--create-token", "--ttl", "-1h"}, "must be positive"},
		{[]string{"--ttl", "1h"}, "--ttl is the lifetime of the token --create-token makes"},
		// Within the bound: refused later, for the missing admin.conf.
		{[]string{"--create-token", "--ttl", "24h"}, "admin.conf"},
		{[]string{"--create-token"}, "admin.conf"},
	} {
		out, err := runRoot(t, append([]string{"join", "print", "--asset-dir", missing}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("join print %v: %v, want %q\n%s", c.args, err, c.want, out)
		}
	}
}

// TestRenderTTL: render's --bootstrap-token-ttl defaults under kubeadm's
// 24h, and one over the bound is refused, naming the flag, with nothing
// written.
func TestRenderTTL(t *testing.T) {
	if d := render.NewCommand().Flags().Lookup("bootstrap-token-ttl").DefValue; d != manifests.DefaultBootstrapTokenTTL.String() || manifests.DefaultBootstrapTokenTTL >= 24*time.Hour {
		t.Errorf("render --bootstrap-token-ttl defaults to %s, want %s, under 24h", d, manifests.DefaultBootstrapTokenTTL)
	}
	dir := filepath.Join(t.TempDir(), "assets")
	out, err := runRoot(t, "render", "--asset-dir", dir, "--node-name", "n1", "--advertise-address", "192.0.2.10", "--bootstrap-token-ttl", "48h")
	if err == nil || !strings.Contains(err.Error(), "--bootstrap-token-ttl") || !strings.Contains(err.Error(), "must be at most 24h0m0s") {
		t.Errorf("render --bootstrap-token-ttl 48h: %v, want refused naming the flag and the bound\n%s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused render wrote %s (%v)", dir, err)
	}
}

// runRoot runs args as bootlet would, with this package's verbs.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return clitest.Run(t, func(*string) []*cobra.Command { return []*cobra.Command{NewCommand(), render.NewCommand()} }, args...)
}
