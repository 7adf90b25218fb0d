package root

import (
	"bytes"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bootlet/bootlet/cmd/internal/cli"
)

func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewCommand("test", cli.ExecTools())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestHelpHidesKlogFlagsOutsideDaemon(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"get", "--help"}, {"logs", "--help"}, {"kubeconfig", "--help"}} {
		out, err := runRoot(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		for _, klogFlag := range []string{"--logtostderr", "--v Level", "--vmodule", "--skip_headers", "--add_dir_header"} {
			if strings.Contains(out, klogFlag) {
				t.Errorf("bootlet %s shows klog flag %s:\n%s", strings.Join(args, " "), klogFlag, out)
			}
		}
		if !strings.Contains(out, "--server") {
			t.Errorf("bootlet %s lost --server:\n%s", strings.Join(args, " "), out)
		}
	}
	out, err := runRoot(t, "daemon", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--runtime-endpoint", "-v, --v Level", "--vmodule", "--logtostderr"} {
		if !strings.Contains(out, want) {
			t.Errorf("bootlet daemon --help misses %s:\n%s", want, out)
		}
	}
	// The first flag the root help lists is a real one, not klog's.
	out, _ = runRoot(t, "--help")
	if n := strings.Count(out, "\n  -") + strings.Count(out, "\n      --"); n > 3 {
		t.Errorf("bootlet --help lists %d flags, want --help and --server only:\n%s", n, out)
	}
}

func TestHiddenKlogFlagsStillParse(t *testing.T) {
	if _, err := runRoot(t, "-v=4", "version"); err != nil {
		t.Fatalf("bootlet -v=4 version: %v", err)
	}
	if _, err := runRoot(t, "version", "--v", "2"); err != nil {
		t.Fatalf("bootlet version --v 2: %v", err)
	}
}

func TestNoDaemonSaysWhatToTry(t *testing.T) {
	dir := t.TempDir()
	missing := "unix://" + filepath.Join(dir, "absent.sock")
	// A socket file nobody listens on: connection refused.
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	t.Setenv("BOOTLET_SERVER", "")
	for _, server := range []string{missing, "unix://" + stale} {
		for _, args := range [][]string{{"get", "pods"}, {"status"}, {"logs", "x"}} {
			_, err := runRoot(t, append(args, "--server", server)...)
			if err == nil {
				t.Fatalf("%v against %s: no error", args, server)
			}
			msg := cli.DescribeError(err)
			for _, want := range []string{"cannot reach the bootlet daemon at " + server, "no daemon is listening there", "bootlet daemon", "--server", "BOOTLET_SERVER"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%v against %s: %q misses %q", args, server, msg, want)
				}
			}
			if strings.Contains(msg, "dial unix") {
				t.Errorf("%v: raw dial error leaks: %q", args, msg)
			}
		}
	}
	// $BOOTLET_SERVER is honoured and named.
	t.Setenv("BOOTLET_SERVER", missing)
	if _, err := runRoot(t, "get", "pods"); err == nil || !strings.Contains(cli.DescribeError(err), missing) {
		t.Fatalf("BOOTLET_SERVER not used: %v", err)
	}
}

func TestToolVerbsListedInHelp(t *testing.T) {
	out, err := runRoot(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, short := range []string{cli.DescribeShort, cli.RenderShort, cli.CertsShort, cli.EtcdShort, cli.RecoverShort} {
		if !strings.Contains(out, short) {
			t.Errorf("bootlet --help lacks %q:\n%s", short, out)
		}
	}
}
