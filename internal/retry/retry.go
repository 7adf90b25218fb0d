// Package retry is the one doubling retry loop of bootlet's daemon: the
// runtime connection at start and the pivot's waits use it. It holds no
// state and knows nothing of what it retries.
package retry

import (
	"context"
	"time"
)

// Doubling runs f until it succeeds (true) or ctx ends (false),
// telling failed of each failure and waiting delay, doubled while under
// limit.
func Doubling(ctx context.Context, delay, limit time.Duration, f func() error, failed func(err error, next time.Duration)) bool {
	for {
		err := f()
		if err == nil {
			return true
		}
		failed(err, delay)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
		if delay < limit {
			delay *= 2
		}
	}
}
