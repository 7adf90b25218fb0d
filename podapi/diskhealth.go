package podapi

import (
	"fmt"
	"time"
)

// DefaultFsyncReadyTimeout is how long a checkpoint fsync may be pending
// before /readyz fails (--fsync-ready-timeout). A healthy disk fsyncs in
// milliseconds; a write the registry cannot make durable is never
// acknowledged, so every write waits behind a hung one while reads go on.
const DefaultFsyncReadyTimeout = 10 * time.Second

// FsyncCheck is the /readyz check "checkpoint-fsync": it fails while a
// checkpoint fsync has been pending longer than threshold (a hung or very
// slow disk), so a daemon that can serve reads but no writes says so.
func (r *Registry) FsyncCheck(threshold time.Duration) func() error {
	return func() error {
		if p := r.store.FsyncPending(); threshold > 0 && p > threshold {
			return fmt.Errorf("an fsync has been pending for %s", p.Round(time.Second))
		}
		return nil
	}
}
