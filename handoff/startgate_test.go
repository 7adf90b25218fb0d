package handoff

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStartingAt(t *testing.T) {
	now := time.Date(2026, 11, 27, 23, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		at   time.Time
		want bool
	}{
		{"just announced", now, true},
		{"announced a minute ago", now.Add(-time.Minute), true},
		{"announced longer ago than StartingValid: bootlet acts again", now.Add(-StartingValid), false},
		{"a clock stepped back a little", now.Add(30 * time.Second), true},
		{"far in the future: not trusted", now.Add(time.Hour), false},
	} {
		if got := startingAt(tc.at, now); got != tc.want {
			t.Errorf("%s: startingAt = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStartGate runs both sides of the gate on real file locks (flock is
// per open file description, so one process shows the interlock): the
// kubelet's side waits for a sync that holds the lock, and a sync that
// holds it after the announcement sees the kubelet starting.
func TestStartGate(t *testing.T) {
	dir := t.TempDir()
	g := NewStartGate(dir)
	if g.Starting() {
		t.Fatal("a kubelet is starting before any announcement")
	}

	// A sync holds the lock: the kubelet waits until it is released.
	release := g.Hold()
	type result struct {
		waited time.Duration
		err    error
	}
	done := make(chan result, 1)
	go func() {
		w, err := OpenForKubelet(context.Background(), dir, 10*time.Second)
		done <- result{w, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("the kubelet's side passed while a sync held the lock: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	if !g.Starting() {
		t.Error("the announcement is not seen while the kubelet's side waits")
	}
	release()
	select {
	case r := <-done:
		if r.err != nil || r.waited < 300*time.Millisecond {
			t.Errorf("the kubelet's side: waited %s, err %v; want >= 300ms and no error", r.waited, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the kubelet's side still waits after the sync released the lock")
	}

	// Syncs after the announcement hold the lock together and see it.
	r1, r2 := g.Hold(), g.Hold()
	if !g.Starting() {
		t.Error("a sync after the announcement does not see the kubelet starting")
	}
	r1()
	r2()

	// Stopped: withdrawn; a second withdrawal is no error.
	if err := KubeletStopped(dir); err != nil {
		t.Fatal(err)
	}
	if err := KubeletStopped(dir); err != nil {
		t.Fatal(err)
	}
	if g.Starting() {
		t.Error("a kubelet is starting after its unit stopped")
	}

	// A stale announcement (a kubelet that never answered) stops holding.
	if _, err := OpenForKubelet(context.Background(), dir, time.Second); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-StartingValid - time.Second)
	if err := os.Chtimes(filepath.Join(dir, StartingFile), old, old); err != nil {
		t.Fatal(err)
	}
	if g.Starting() {
		t.Error("an announcement older than StartingValid still holds bootlet's hands off")
	}
}

func TestStartGateTimeout(t *testing.T) {
	dir := t.TempDir()
	g := NewStartGate(dir)
	release := g.Hold()
	defer release()
	waited, err := OpenForKubelet(context.Background(), dir, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "the kubelet starts anyway") || waited < 200*time.Millisecond {
		t.Errorf("OpenForKubelet under a held lock: waited %s, err %v; want the timeout's error", waited, err)
	}
	if !g.Starting() {
		t.Error("the announcement is gone after a timeout: bootlet would start what the kubelet starts")
	}
}

func TestStartGateNoBootlet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	if w, err := OpenForKubelet(context.Background(), dir, time.Second); err != nil || w != 0 {
		t.Errorf("no bootlet directory: waited %s, err %v; want nothing to wait for", w, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the kubelet's side made %s: %v", dir, err)
	}
	var none *StartGate
	none.Hold()()
	if none.Starting() || NewStartGate("").Starting() {
		t.Error("no gate reports a kubelet starting")
	}
}
