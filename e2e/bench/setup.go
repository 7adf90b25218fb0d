//go:build e2e

package main

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// tb lets the bench use the e2e framework (written against testing.TB)
// outside `go test`: failures print, run the registered cleanups (stopping
// the private containerd, bootlet and the kubelet) and exit 1. Methods the
// framework does not call are left to the nil embedded interface.
type tb struct {
	testing.TB
	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

func (t *tb) Helper()      {}
func (t *tb) Name() string { return "bench" }

func (t *tb) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// runCleanups runs the cleanups last-registered first, like testing does.
func (t *tb) runCleanups() {
	t.mu.Lock()
	cs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

func (t *tb) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
func (t *tb) Log(args ...any)                 { fmt.Fprintln(os.Stderr, args...) }
func (t *tb) Errorf(format string, args ...any) {
	t.Fatalf(format, args...)
}
func (t *tb) Fatal(args ...any) { t.Fatalf("%s", fmt.Sprint(args...)) }
func (t *tb) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: FAIL: "+format+"\n", args...)
	t.mu.Lock()
	t.failed = true // the cleanups dump what a failed run needs (e2e.RunLifecycle's)
	t.mu.Unlock()
	t.runCleanups()
	os.Exit(1)
}

// FailNow ends the bench; Errorf already did (it is fatal here), so this is
// reached only through a framework helper that calls it directly.
func (t *tb) FailNow() { t.Fatalf("FailNow") }

// Failed is true only while the cleanups of a fatal failure run: Errorf is
// fatal, so no check after it sees a failure.
func (t *tb) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}
