package kubeclient

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const kubeconfigA = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: a}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

func TestReloadingLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kc")
	r := &Reloading{Path: path}
	if _, _, err := r.Load(); err == nil {
		t.Fatal("a missing file loaded")
	}
	if err := os.WriteFile(path, []byte("{not yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Load(); err == nil {
		t.Fatal("a broken file loaded")
	}
	if err := os.WriteFile(path, []byte(kubeconfigA), 0o600); err != nil {
		t.Fatal(err)
	}
	cs, changed, err := r.Load()
	if err != nil || !changed || cs == nil {
		t.Fatalf("first load: %v %v %v", cs, changed, err)
	}
	if cs, changed, err := r.Load(); err != nil || changed || cs != nil {
		t.Fatalf("unchanged file: %v %v %v", cs, changed, err)
	}
	if err := os.WriteFile(path, []byte(kubeconfigA+"# renewed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, changed, err := r.Load(); err != nil || !changed {
		t.Fatalf("changed file: %v %v", changed, err)
	}
}

func TestRunWithClientRestartsOnChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kc")
	r := &Reloading{Path: path}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	starts, stops := 0, 0
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		RunWithClient(ctx, r, 10*time.Millisecond, func(error) {}, func(ctx context.Context, _ kubernetes.Interface) {
			mu.Lock()
			starts++
			mu.Unlock()
			<-ctx.Done()
			mu.Lock()
			stops++
			mu.Unlock()
		})
	}()
	count := func() (int, int) { mu.Lock(); defer mu.Unlock(); return starts, stops }
	waitFor := func(want int) {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			if s, _ := count(); s == want {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		s, _ := count()
		t.Fatalf("runs started: %d, want %d", s, want)
	}
	time.Sleep(30 * time.Millisecond)
	if s, _ := count(); s != 0 {
		t.Fatalf("ran before the file existed: %d", s)
	}
	if err := os.WriteFile(path, []byte(kubeconfigA), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(1)
	if err := os.WriteFile(path, []byte(kubeconfigA+"# renewed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(2)
	if _, st := count(); st != 1 {
		t.Fatalf("the first run was not stopped before the second: stops %d", st)
	}
	cancel()
	<-finished
	if s, st := count(); s != st {
		t.Fatalf("runs left running: %d started, %d stopped", s, st)
	}
}

// TestReloadingRecheck: once a client is built, the file is compared again
// only Recheck after the last comparison; a build that fails leaves the
// bytes unloaded, so the next comparison tries again.
func TestReloadingRecheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kc")
	if err := os.WriteFile(path, []byte(kubeconfigA), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	r := &Reloading{Path: path, Recheck: 10 * time.Second, Now: func() time.Time { return now }}
	if _, changed, err := r.Load(); err != nil || !changed {
		t.Fatalf("first load: %v %v", changed, err)
	}
	if err := os.WriteFile(path, []byte(kubeconfigA+"# renewed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now = now.Add(5 * time.Second)
	if _, changed, _ := r.Load(); changed {
		t.Fatal("compared before Recheck passed")
	}
	now = now.Add(5 * time.Second)
	failed := errors.New("no client")
	if changed, err := r.LoadWith(func(*rest.Config) error { return failed }); changed || !errors.Is(err, failed) {
		t.Fatalf("failed build: %v %v", changed, err)
	}
	now = now.Add(10 * time.Second)
	var cfg *rest.Config
	if changed, err := r.LoadWith(func(c *rest.Config) error { cfg = c; return nil }); err != nil || !changed {
		t.Fatalf("after a failed build the change was not tried again: %v %v", changed, err)
	}
	if d := requestDeadline(cfg); d < 4*time.Second || d > 5*time.Second || cfg.BearerToken != "a" {
		t.Errorf("config: request timeout %v token %q", d, cfg.BearerToken)
	}
}

// TestOneShot: a command's client carries its user agent and timeout,
// from a file or from a kubeconfig in memory alike.
func TestOneShot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(kubeconfigA), 0o600); err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		inMemory      bool
		timeout, want time.Duration
	}{
		{name: "file", timeout: 15 * time.Second, want: 15 * time.Second},
		{name: "file, default timeout", want: 5 * time.Second},
		{name: "in memory", inMemory: true, timeout: 30 * time.Second, want: 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := func() (*rest.Config, kubernetes.Interface, error) { return ForFile(path, "bootlet-test", tc.timeout) }
			if tc.inMemory {
				build = func() (*rest.Config, kubernetes.Interface, error) { return ForConfig(*kc, "bootlet-test", tc.timeout) }
			}
			cfg, cs, err := build()
			if err != nil || cs == nil {
				t.Fatalf("client: %v", err)
			}
			d := requestDeadline(cfg)
			if cfg.Host != "https://127.0.0.1:1" || cfg.UserAgent != "bootlet-test" || d < tc.want-time.Second || d > tc.want || cfg.BearerToken != "a" {
				t.Errorf("config: host %s, user agent %q, request timeout %s, token %q", cfg.Host, cfg.UserAgent, d, cfg.BearerToken)
			}
		})
	}
	if _, _, err := ForFile(filepath.Join(t.TempDir(), "none"), "bootlet-test", 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}
