package certs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/certificates"
)

// TestPathsNameTheFlag: with no daemon to ask, the flags keep what the
// command line says, and a missing file's error names the flag of the
// innermost directory that holds it.
func TestPathsNameTheFlag(t *testing.T) {
	t.Setenv("BOOTLET_SERVER", "unix://"+filepath.Join(t.TempDir(), "no-daemon.sock"))
	assets, root := t.TempDir(), t.TempDir()
	kubeconfig := filepath.Join(assets, "other", "admin.conf")
	for _, tc := range []struct {
		name, missing, want string
	}{
		{name: "under the asset dir", missing: filepath.Join(assets, "pki", "ca.crt"), want: "(set --asset-dir)"},
		{name: "under the root dir", missing: filepath.Join(root, "pki", "apiserver.crt"), want: "(set --root-dir)"},
		{name: "the kubeconfig, inside the asset dir", missing: kubeconfig, want: "(set --kubeconfig)"},
		{name: "elsewhere", missing: filepath.Join(t.TempDir(), "x"), want: "no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var o certificates.RenewOptions
			p := paths{&o.AssetDir, &o.RootDir, &o.Kubeconfig, &o.ServingCert}
			cmd := &cobra.Command{Use: "x"}
			p.addFlags(cmd.Flags(), pathHelp{})
			if err := cmd.ParseFlags([]string{"--asset-dir", assets, "--root-dir", root, "--kubeconfig", kubeconfig}); err != nil {
				t.Fatal(err)
			}
			err := p.run(cmd, func() error {
				if o.AssetDir != assets || o.RootDir != root {
					t.Errorf("asset dir %s, root dir %s: the command line's not kept", o.AssetDir, o.RootDir)
				}
				_, err := os.ReadFile(tc.missing)
				return err
			})
			if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
				t.Errorf("error %v, want it to end with %q", err, tc.want)
			}
		})
	}
}
