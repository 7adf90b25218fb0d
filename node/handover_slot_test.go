package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bootlet/bootlet/reuseport"
)

// A worker's slot knows no listener and hands nothing over until its
// router is there, and builds that router only once the identity is on
// disk; a router that cannot be built leaves the port unrouted.
func TestRouterSlotWaitsForTheIdentity(t *testing.T) {
	s := &routerSlot{drain: time.Minute}
	if known, serving := s.ServedBy(6443, func(string) bool { return true }); known || serving {
		t.Errorf("an empty slot's verdict = (%v, %v), want none", known, serving)
	}
	done := make(chan struct{})
	go func() { s.handover(context.Background(), "incoming", "outgoing"); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an empty slot's hand-over waited; there is nothing to wait for")
	}

	identity := filepath.Join(t.TempDir(), "bootlet-checkpointer.conf")
	var builds atomic.Int32
	built := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		s.routeWhenPresent(ctx, identity, 5*time.Millisecond, func() (*reuseport.Router, error) {
			builds.Add(1)
			return nil, errors.New("no port group here")
		})
		close(built)
	}()
	time.Sleep(50 * time.Millisecond)
	if n := builds.Load(); n != 0 {
		t.Fatalf("the router was built %d times before the identity was there", n)
	}
	if err := os.WriteFile(identity, []byte("apiVersion: v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A build that fails is tried again at the next interval, until
	// the daemon ends.
	deadline := time.Now().Add(10 * time.Second)
	for builds.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := builds.Load(); n < 3 {
		t.Fatalf("the router was built %d times in 10 s once the identity was there; want a failed build tried again", n)
	}
	if s.router.Load() != nil {
		t.Error("a router that could not be built is in the slot")
	}
	cancel()
	select {
	case <-built:
	case <-time.After(10 * time.Second):
		t.Fatal("the retries outlived the daemon's context")
	}
}

// Without the identity, the wait ends with the daemon.
func TestRouterSlotStopsWithTheDaemon(t *testing.T) {
	s := &routerSlot{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		s.routeWhenPresent(ctx, filepath.Join(t.TempDir(), "absent"), 5*time.Millisecond, func() (*reuseport.Router, error) {
			t.Error("built without the identity")
			return nil, errors.New("unreachable")
		})
		close(done)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the wait for the identity outlived its context")
	}
}

// A first-boot master's router, whose identity is there from the start,
// is tried at once and again after a failed build: no file to wait for.
func TestRouterSlotRetriesWithoutAFile(t *testing.T) {
	s := &routerSlot{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var builds atomic.Int32
	done := make(chan struct{})
	go func() {
		s.routeWhenPresent(ctx, "", 5*time.Millisecond, func() (*reuseport.Router, error) {
			builds.Add(1)
			return nil, errors.New("the port group is not there yet")
		})
		close(done)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for builds.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := builds.Load(); n < 2 {
		t.Fatalf("the router was built %d times in 10 s without a file to wait for; want a failed build tried again", n)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the retries outlived the daemon's context")
	}
}
