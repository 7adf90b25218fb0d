package recover

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/clitest"
	"github.com/bootlet/bootlet/cmd/internal/daemon"
	"github.com/bootlet/bootlet/noderecover/recoverlock"
)

func TestDaemonSocket(t *testing.T) {
	t.Setenv("BOOTLET_SERVER", "")
	if got := daemonSocket(""); got != "/run/bootlet/bootlet.sock" {
		t.Errorf("default: %q", got)
	}
	if got := daemonSocket("unix:///tmp/x.sock"); got != "/tmp/x.sock" {
		t.Errorf("--server: %q", got)
	}
	t.Setenv("BOOTLET_SERVER", "unix:///tmp/env.sock")
	if got := daemonSocket(""); got != "/tmp/env.sock" {
		t.Errorf("$BOOTLET_SERVER: %q", got)
	}
	if got := daemonSocket("https://10.0.0.1:10250"); got != "" {
		t.Errorf("not a unix socket: %q, want none", got)
	}
}

// TestRecoverRefusesAnEmptyAssetDir: the CLI runs Observe and Decide, and
// a node with nothing rendered is refused before anything changes, naming
// the bootstrap pods and render, and the PKI.
func TestRecoverRefusesAnEmptyAssetDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("BOOTLET_SERVER", "unix://"+filepath.Join(dir, "none.sock"))
	out, err := runRoot(t, "recover", "--asset-dir", dir, "--root-dir", filepath.Join(dir, "root"), "--kubelet-healthz-url", "", "--kubelet-static-pod-path", filepath.Join(dir, "m"))
	if err == nil {
		t.Fatalf("recover with nothing rendered succeeded:\n%s", out)
	}
	for _, want := range []string{"recover refused", filepath.Join(dir, "bootstrap-manifests", "etcd.yaml") + " is missing: run `bootlet render --asset-dir " + dir + "`",
		filepath.Join(dir, "pki", "etcd", "ca.key") + " is missing: the node's PKI cannot be re-made"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal lacks %q:\n%v", want, err)
		}
	}
}

// TestRecoverAndDaemonShareTheLock: recover refuses while a daemon holds
// the node's lock (ROOT.lock, beside --root-dir), naming it; a daemon does
// not start while recover holds it, and touches nothing.
func TestRecoverAndDaemonShareTheLock(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	t.Setenv("BOOTLET_SERVER", "unix://"+filepath.Join(dir, "none.sock"))
	pid := strconv.Itoa(os.Getpid())

	daemon, err := recoverlock.Acquire(root, recoverlock.Daemon)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runRoot(t, "recover", "--asset-dir", dir, "--root-dir", root, "--kubelet-healthz-url", "", "--kubelet-static-pod-path", filepath.Join(dir, "m"))
	if want := "a bootlet daemon runs on this root dir (lock " + root + ".lock held by pid " + pid + ")"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("recover while a daemon holds the lock: %v, want %q\n%s", err, want, out)
	}
	daemon.Release()

	rec, err := recoverlock.Acquire(root, recoverlock.Recover)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	_, err = runRoot(t, "daemon", "--root-dir", root, "--socket", filepath.Join(dir, "bootlet.sock"), "--kubelet-healthz-url=", "--manifests-dir", "")
	if want := "a bootlet recover is under way (lock " + root + ".lock held by pid " + pid + ")"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("daemon start while recover holds the lock: %v, want %q", err, want)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the daemon made its root dir during recover: %v", err)
	}
}

// runRoot runs args as bootlet would, with this package's verbs.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return clitest.Run(t, func(server *string) []*cobra.Command {
		return []*cobra.Command{NewCommand(server), daemon.NewCommand(nil)}
	}, args...)
}
