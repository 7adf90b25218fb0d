package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/podapi"
)

// serveConfig is a daemon's socket that serves body as its effective
// configuration.
func serveConfig(t *testing.T, body string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "b.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(podapi.EffectiveConfigPath, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) })
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { srv.Close() })
	return "unix://" + sock
}

func TestNodeDefaults(t *testing.T) {
	server := serveConfig(t, "apiVersion: bootlet.dev/v1alpha1\nkind: BootletConfiguration\nrootDir: /var/lib/up/bootlet\npivot:\n  kubeconfig: /var/lib/up/assets/admin.conf\n  selfHostedAssets: /var/lib/up/assets/self-hosted\n")
	run := func(args ...string) (string, string) {
		t.Helper()
		root := &cobra.Command{Use: "bootlet"}
		var srv, asset, rootDir string
		root.PersistentFlags().StringVar(&srv, "server", "", "")
		cmd := &cobra.Command{Use: "x", RunE: func(cmd *cobra.Command, _ []string) error {
			NodeDefaults(cmd, &asset, &rootDir)
			return nil
		}}
		cmd.Flags().StringVar(&asset, "asset-dir", DefaultAssetDir, "")
		cmd.Flags().StringVar(&rootDir, "root-dir", "/var/lib/bootlet", "")
		root.AddCommand(cmd)
		root.SetArgs(append([]string{"x"}, args...))
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		return asset, rootDir
	}
	if a, r := run("--server", server); a != "/var/lib/up/assets" || r != "/var/lib/up/bootlet" {
		t.Errorf("from the daemon: %q, %q", a, r)
	}
	if a, r := run("--server", server, "--asset-dir", "/given"); a != "/given" || r != "/var/lib/up/bootlet" {
		t.Errorf("a given flag must win: %q, %q", a, r)
	}
	t.Setenv("BOOTLET_SERVER", server)
	if a, _ := run(); a != "/var/lib/up/assets" {
		t.Errorf("$BOOTLET_SERVER not asked: %q", a)
	}
	t.Setenv("BOOTLET_SERVER", "unix://"+filepath.Join(t.TempDir(), "none.sock"))
	if a, r := run(); a != DefaultAssetDir || r != "/var/lib/bootlet" {
		t.Errorf("no daemon: the defaults must stay, got %q, %q", a, r)
	}
}

func TestNameFlag(t *testing.T) {
	_, missing := os.Stat("/nonexistent-bootlet/etc/kubernetes/pki")
	dirs := []DirFlag{{Dir: "/nonexistent-bootlet/etc/kubernetes", Flag: "--asset-dir"}, {Dir: "/nonexistent-bootlet/var/lib/bootlet", Flag: "--root-dir"}}
	if got := NameFlag(missing, dirs...).Error(); got != "stat /nonexistent-bootlet/etc/kubernetes/pki: no such file or directory (set --asset-dir)" {
		t.Errorf("NameFlag = %q", got)
	}
	if got := NameFlag(fmt.Errorf("reading the PKI: %w", missing), dirs...); !errors.Is(got, fs.ErrNotExist) {
		t.Errorf("the cause is lost: %v", got)
	}
	other := &fs.PathError{Op: "open", Path: "/elsewhere/x", Err: fs.ErrNotExist}
	if got := NameFlag(other, dirs...); got != error(other) {
		t.Errorf("a path under no flag's directory: %v", got)
	}
	denied := &fs.PathError{Op: "open", Path: "/nonexistent-bootlet/etc/kubernetes/pki/ca.key", Err: fs.ErrPermission}
	if got := NameFlag(denied, dirs...); got != error(denied) {
		t.Errorf("only a missing path names its flag: %v", got)
	}
}
