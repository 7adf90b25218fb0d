package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestDoubling(t *testing.T) {
	var waits []time.Duration
	calls := 0
	ok := Doubling(context.Background(), time.Millisecond, 4*time.Millisecond, func() error {
		calls++
		if calls < 5 {
			return errors.New("not yet")
		}
		return nil
	}, func(_ error, next time.Duration) { waits = append(waits, next) })
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}
	if !ok || calls != 5 || len(waits) != len(want) {
		t.Fatalf("ok %v, %d calls, waits %v", ok, calls, waits)
	}
	for i := range want {
		if waits[i] != want[i] {
			t.Errorf("wait %d: %v, want %v", i, waits[i], want[i])
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Doubling(ctx, time.Hour, time.Hour, func() error { return errors.New("never") }, func(error, time.Duration) {}) {
		t.Error("succeeded after ctx ended")
	}
}
