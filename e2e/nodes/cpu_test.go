package nodes

import (
	"strings"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		comm       string
		ticks      uint64
		ok         bool
	}{
		{"plain", "1234 (kube-apiserver) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0", "kube-apiserver", 300, true},
		{"a name with spaces and parentheses", "77 (a (b) c) R 1 77 77 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5 0 0", "a (b) c", 10, true},
		{"cut short", "77 (etcd) R 1 77", "", 0, false},
		{"no name", "77 etcd R", "", 0, false},
	} {
		comm, ticks, ok := parseProcStat(tc.line)
		if comm != tc.comm || ticks != tc.ticks || ok != tc.ok {
			t.Errorf("%s: parseProcStat = %q, %d, %v; want %q, %d, %v", tc.name, comm, ticks, ok, tc.comm, tc.ticks, tc.ok)
		}
	}
}

func TestTopSince(t *testing.T) {
	before := CPUSnapshot{1: {"etcd", 100}, 2: {"kube-apiserver", 1000}, 3: {"bootlet", 50}, 4: {"kube-apiserver", 900}, 6: {"kworker/u8:4-writeback", 5000}}
	// PID 4 exited; 5 is a new apiserver; 3 was reused by a kubelet; 6 is
	// a kernel worker that took another work item (its name changed).
	now := CPUSnapshot{1: {"etcd", 400}, 2: {"kube-apiserver", 1200}, 3: {"kubelet", 20}, 5: {"kube-apiserver", 300}, 6: {"kworker/u8:4-events_unbound", 5010}}
	got := now.TopSince(before, 2)
	want := "8.3s of CPU in all: kube-apiserver 5.0s, etcd 3.0s"
	if got != want {
		t.Errorf("TopSince = %q, want %q", got, want)
	}
	if s := SnapshotCPU(); len(s) == 0 || !strings.Contains(s.TopSince(s, 3), "0.0s of CPU in all") {
		t.Errorf("SnapshotCPU read no process (%d), or a snapshot against itself used CPU", len(s))
	}
}
