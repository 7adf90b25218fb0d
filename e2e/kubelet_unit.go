//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// KubeletUnit plays systemd's bootlet-kubelet.service for a test's
// kubelet, for the upgrade's node agent: the kubelet runs from a file of
// its own (a copy of _output/bin/kubelet, where make install puts the
// unit's), which the agent may replace, and Restart is a command the agent
// runs that asks the "unit" to restart the kubelet and returns once it has
// (systemctl restart's contract): the kubelet stopped with SIGTERM and
// started again from the file, whatever it holds now.
type KubeletUnit struct {
	// Binary is the unit's kubelet file; Restart the agent's command.
	Binary, Restart string
	dir             string
	request         string
	// act is held while the unit restarts the kubelet, and by Held.
	act      sync.Mutex
	mu       sync.Mutex
	restarts []time.Time
	stop     chan struct{}
	done     chan struct{}
}

// AsUnit makes k a KubeletUnit's kubelet before it first starts. The
// supervision ends at t's cleanup.
func (k *Kubelet) AsUnit(t testing.TB) *KubeletUnit {
	t.Helper()
	dir := filepath.Join(k.Ctrd.Dir, "kubelet-unit")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	u := &KubeletUnit{Binary: filepath.Join(dir, "kubelet"), Restart: filepath.Join(dir, "restart"), dir: dir,
		stop: make(chan struct{}), done: make(chan struct{})}
	data, err := os.ReadFile(Bin(t, "kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(u.Binary, data, 0o755); err != nil {
		t.Fatal(err)
	}
	req, ack := filepath.Join(dir, "restart.request"), filepath.Join(dir, "restart.done")
	u.request = req
	script := fmt.Sprintf(`#!/bin/sh
# systemctl restart, for the test's kubelet (KubeletUnit).
rm -f %[2]q
: > %[1]q
i=0
while [ $i -lt 1200 ]; do
  [ -f %[2]q ] && exit 0
  sleep 0.1
  i=$((i+1))
done
echo "the test's kubelet unit did not restart the kubelet in 120 s" >&2
exit 1
`, req, ack)
	if err := os.WriteFile(u.Restart, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	k.Binary, k.unit = u.Binary, u
	go func() {
		defer close(u.done)
		for {
			select {
			case <-u.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			u.act.Lock()
			if _, err := os.Stat(req); errors.Is(err, os.ErrNotExist) {
				u.act.Unlock()
				continue
			}
			_ = os.Remove(req)
			k.Stop()
			if err := k.spawn(); err != nil {
				u.act.Unlock()
				t.Errorf("the test's kubelet unit could not start the kubelet again: %v", err)
				continue
			}
			u.mu.Lock()
			u.restarts = append(u.restarts, time.Now())
			u.mu.Unlock()
			_ = os.WriteFile(ack, nil, 0o644)
			u.act.Unlock()
		}
	}()
	t.Cleanup(func() { close(u.stop); <-u.done })
	return u
}

// kubeletUnitBinary is bootlet's --kubelet-binary for k: its unit's file,
// or none (no node agent) when k is not a unit's.
func kubeletUnitBinary(k *Kubelet) string {
	if k.unit == nil {
		return ""
	}
	return k.unit.Binary
}

func kubeletUnitRestart(k *Kubelet) string {
	if k.unit == nil {
		return "false"
	}
	return k.unit.Restart
}

// Held runs fn (a power cut and the boot after it) with the unit's
// supervision held, as a power cut holds systemd: a restart under way
// ends first, and a restart asked for and not yet taken is dropped.
func (u *KubeletUnit) Held(fn func()) {
	u.act.Lock()
	defer u.act.Unlock()
	_ = os.Remove(u.request)
	fn()
}

// Restarts are the times the unit restarted the kubelet.
func (u *KubeletUnit) Restarts() []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.restarts...)
}
