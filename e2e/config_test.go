//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDaemonConfigFile runs the daemon from a BootletConfiguration file, as
// an OS image's unit would: the file's limits.maxPods is enforced, a flag
// given on the command line wins over the file after a restart (the
// kubelet's precedence), and a file with an unknown field stops the daemon
// before it starts anything, naming the field.
func TestDaemonConfigFile(t *testing.T) {
	c := StartContainerd(t)
	cfg := filepath.Join(c.Dir, "bootlet-config.yaml")
	writeConfig := func(body string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte("apiVersion: bootlet.dev/v1alpha1\nkind: BootletConfiguration\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("limits:\n  maxPods: 2\n")

	// The framework's own flags (socket, root dir, runtime endpoint) are
	// flags, so they win over the file's defaults: only maxPods comes from it.
	b := StartBootlet(t, c, "--config", cfg)
	ctx := context.Background()
	pods := b.Client.CoreV1().Pods("default")
	for _, n := range []string{"one", "two"} {
		if _, err := pods.Create(ctx, limitsPod(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pods.Create(ctx, limitsPod("three"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "maximum of 2 pods") {
		t.Fatalf("third pod under the file's maxPods 2: %v, want 403 naming the maximum", err)
	}

	// The same file, and --max-pods=3 on the command line: the flag wins.
	b.Stop()
	b.Args = append(b.Args, "--max-pods=3")
	b.Start(t)
	if _, err := pods.Create(ctx, limitsPod("three"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("third pod with --max-pods=3 over the file's 2: %v", err)
	}
	if _, err := pods.Create(ctx, limitsPod("four"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "maximum of 3 pods") {
		t.Fatalf("fourth pod with --max-pods=3: %v, want 403 naming the maximum", err)
	}
	checkAlive(t, b)

	// A misspelt field: the daemon refuses the file, names the field, and
	// exits without making its root dir.
	writeConfig("limits:\n  maxPod: 2\n")
	root := filepath.Join(c.Dir, "bad-root")
	runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(runCtx, Bin(t, "bootlet"), "daemon", "--config", cfg,
		"--root-dir", root, "--socket", filepath.Join(c.Dir, "bad.sock")).CombinedOutput()
	if err == nil || runCtx.Err() != nil {
		t.Fatalf("daemon with an unknown field in --config: err %v (context %v), want a prompt failure\n%s", err, runCtx.Err(), out)
	}
	if !strings.Contains(string(out), `unknown field "limits.maxPod"`) || !strings.Contains(string(out), cfg) {
		t.Errorf("the error does not name the field and the file:\n%s", out)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the refused daemon made its root dir %s: %v", root, err)
	}
}
