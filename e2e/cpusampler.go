//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bootlet/bootlet/e2e/nodes"
)

// CPUSampler snapshots every process's CPU time and the kernel's CPU and IO
// pressure every interval, so that a failed probe request can be explained
// by where the machine's CPU went around it (Around). A probe that took
// more than 1 s on a 2-CPU machine is either the hand-over's fault (a
// connection to a listener that does not serve) or the machine's load; the
// sample says which processes held the CPU in that second.
type CPUSampler struct {
	mu      sync.Mutex
	samples []cpuSample
	stop    chan struct{}
	done    chan struct{}
}

type cpuSample struct {
	at      time.Time
	procs   nodes.CPUSnapshot
	cpuSome uint64 // /proc/pressure/cpu "some" total, µs
	ioSome  uint64 // /proc/pressure/io "some" total, µs
}

// StartCPUSampler samples until t ends or Stop.
func StartCPUSampler(t testing.TB, every time.Duration) *CPUSampler {
	s := &CPUSampler{stop: make(chan struct{}), done: make(chan struct{})}
	s.sample()
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
				s.sample()
			}
		}
	}()
	t.Cleanup(s.Stop)
	return s
}

// Stop ends the sampling; the samples stay for Around.
func (s *CPUSampler) Stop() {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Unlock()
	<-s.done
}

func (s *CPUSampler) sample() {
	c := cpuSample{at: time.Now(), procs: nodes.SnapshotCPU(), cpuSome: pressureSomeTotal("/proc/pressure/cpu"), ioSome: pressureSomeTotal("/proc/pressure/io")}
	s.mu.Lock()
	s.samples = append(s.samples, c)
	s.mu.Unlock()
}

// Around says where the CPU went between the last sample at or before from
// and the first at or after to: the top n commands, and the share of that
// span in which some task waited for a CPU or for IO (PSI "some").
func (s *CPUSampler) Around(from, to time.Time, n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var before, after *cpuSample
	for i := range s.samples {
		c := &s.samples[i]
		if !c.at.After(from) {
			before = c
		}
		if after == nil && !c.at.Before(to) {
			after = c
		}
	}
	if before == nil || after == nil || !after.at.After(before.at) {
		return "no CPU samples around it"
	}
	span := after.at.Sub(before.at)
	return fmt.Sprintf("%s to %s (%s): %s; waiting for CPU %s, for IO %s",
		before.at.Format("15:04:05.000"), after.at.Format("15:04:05.000"), span.Round(time.Millisecond),
		after.procs.TopSince(before.procs, n), pressureShare(after.cpuSome-before.cpuSome, span), pressureShare(after.ioSome-before.ioSome, span))
}

func pressureShare(stalledMicros uint64, span time.Duration) string {
	return fmt.Sprintf("%.0f%%", 100*float64(stalledMicros)/float64(span.Microseconds()))
}

// pressureSomeTotal is the "some" line's total= of a PSI file (0 when the
// kernel has no PSI).
func pressureSomeTotal(path string) uint64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return parsePressureSomeTotal(string(data))
}

func parsePressureSomeTotal(data string) uint64 {
	for _, line := range strings.Split(data, "\n") {
		if !strings.HasPrefix(line, "some ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				return n
			}
		}
	}
	return 0
}

// explainWindows is, for each failure window of res, where the CPU went
// around it.
func explainWindows(s *CPUSampler, res ProbeResult) string {
	var b strings.Builder
	for _, w := range res.Windows {
		fmt.Fprintf(&b, "\n  failure window %s to %s: CPU %s", w.Start.Format("15:04:05.000"), w.End.Format("15:04:05.000"), s.Around(w.Start, w.End, 8))
	}
	return b.String()
}
