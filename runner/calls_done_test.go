package runner

import "testing"

// MutatingCallsDone counts finished mutating calls, refused ones not.
func TestMutatingCallsDone(t *testing.T) {
	m := &Manager{calls: newInflight()}
	if got := m.MutatingCallsDone(); got != 0 {
		t.Fatalf("fresh manager: %d calls done", got)
	}
	for i := 0; i < 3; i++ {
		if !m.calls.begin() {
			t.Fatal("begin refused")
		}
		m.calls.end()
	}
	m.calls.close()
	if m.calls.begin() {
		t.Fatal("begin accepted after close")
	}
	if got := m.MutatingCallsDone(); got != 3 {
		t.Errorf("MutatingCallsDone = %d, want 3", got)
	}
}
