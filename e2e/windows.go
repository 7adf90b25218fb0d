//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"time"
)

// Failure windows: how a master's loss is measured, and bounded (its failures
// only in windows of at most 2 s in total). A client that sends a request
// every 50 ms sees a lost master as a run of failed requests; the window is
// how long that run kept the client from being served.

// ProbeOutcome is one request of a probe client: when it was sent, how long
// it took, and whether it failed.
type ProbeOutcome struct {
	At     time.Time
	Took   time.Duration
	Failed bool
}

// FailureWindow is a run of failed requests with no success sent between
// them: from the first one's send to the last one's end (its answer, error
// or timeout), which is how long a client that needed an answer waited in
// vain.
type FailureWindow struct {
	Start, End time.Time
	Failed     int
}

// Took is the window's length.
func (w FailureWindow) Took() time.Duration { return w.End.Sub(w.Start) }

func (w FailureWindow) String() string {
	return fmt.Sprintf("%s-%s (%s, %d failed)", w.Start.Format("15:04:05.000"), w.End.Format("15:04:05.000"), w.Took().Round(time.Millisecond), w.Failed)
}

// FailureWindows groups outcomes into windows. Outcomes are taken in the
// order they were sent (parallel loops interleave); a success sent after a
// failure closes the window, even if it ended before the failure did, since
// a client sending then was served. Windows that overlap in time (a failure
// that outlived the next success and the next failure) are merged, so the
// total never counts the same instant twice.
func FailureWindows(outcomes []ProbeOutcome) []FailureWindow {
	sorted := slices.Clone(outcomes)
	slices.SortStableFunc(sorted, func(a, b ProbeOutcome) int { return a.At.Compare(b.At) })
	var out []FailureWindow
	var cur *FailureWindow
	for _, o := range sorted {
		if !o.Failed {
			cur = nil
			continue
		}
		end := o.At.Add(o.Took)
		if cur == nil {
			if n := len(out); n > 0 && !o.At.After(out[n-1].End) {
				cur = &out[n-1] // still inside the previous window
			} else {
				out = append(out, FailureWindow{Start: o.At, End: end})
				cur = &out[len(out)-1]
			}
		}
		cur.Failed++
		if end.After(cur.End) {
			cur.End = end
		}
	}
	return out
}

// TotalFailureTime is the sum of the windows' lengths.
func TotalFailureTime(ws []FailureWindow) time.Duration {
	var d time.Duration
	for _, w := range ws {
		d += w.Took()
	}
	return d
}
