package nodeagent

import (
	"errors"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// f runs under SCHED_IDLE, its error comes back, and the caller's thread
// keeps its own policy.
func TestAtIdlePriority(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Fatalf("sched_getattr: %v", err)
	}
	var policy uint32
	want := errors.New("f's error")
	err = atIdlePriority(func() error {
		a, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			return err
		}
		policy = a.Policy
		return want
	})
	if !errors.Is(err, want) {
		t.Fatalf("err %v, want f's", err)
	}
	if policy != unix.SCHED_IDLE {
		t.Errorf("f ran under policy %d, want SCHED_IDLE (%d)", policy, unix.SCHED_IDLE)
	}
	after, err := unix.SchedGetAttr(0, 0)
	if err != nil || after.Policy != before.Policy {
		t.Errorf("the caller's policy changed: %d to %d (%v)", before.Policy, after.Policy, err)
	}
}
