package node

// The daemon's memory settings: once started it drops its mappings of its own binary's read-only pages
// and returns freed heap after bursts of pod work; why and how: docs/design/architecture.md, "Footprint".

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// exeMapping is one mapping of the executable in /proc/self/smaps.
type exeMapping struct {
	start, end uintptr
	perms      string
	rssKiB     int64
	anonKiB    int64
}

// releasable reports whether dropping the mapping's pages loses nothing:
// not writable, and no page of it ever copied on write (a RELRO page the
// dynamic loader relocated, a breakpoint a debugger set), so every page
// reads back from the file as it is now.
func (m exeMapping) releasable() bool {
	return !strings.Contains(m.perms, "w") && m.anonKiB == 0 && m.rssKiB > 0
}

// parseExeMappings returns the mappings of the file exe in a smaps listing.
func parseExeMappings(r io.Reader, exe string) ([]exeMapping, error) {
	var out []exeMapping
	var cur *exeMapping
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for s.Scan() {
		line := s.Text()
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") { // a mapping header: ADDR-ADDR PERMS OFFSET DEV INODE [PATH]
			cur = nil
			if len(f) < 6 || strings.Join(f[5:], " ") != exe {
				continue
			}
			lo, hi, ok := strings.Cut(f[0], "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if !ok || err1 != nil || err2 != nil || end <= start {
				return nil, fmt.Errorf("smaps: bad mapping %q", line)
			}
			out = append(out, exeMapping{start: uintptr(start), end: uintptr(end), perms: f[1]})
			cur = &out[len(out)-1]
			continue
		}
		if cur == nil || len(f) < 2 {
			continue
		}
		v, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "Rss:":
			cur.rssKiB = v
		case "Anonymous:":
			cur.anonKiB = v
		}
	}
	return out, s.Err()
}

// releaseStartupPages drops the daemon's mappings of its binary's
// read-only pages (see the file comment) and returns how many KiB were
// mapped before.
func releaseStartupPages() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	maps, err := parseExeMappings(bytes.NewReader(smaps), exe)
	if err != nil {
		return 0, err
	}
	var released int64
	for _, m := range maps {
		if !m.releasable() {
			continue
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("madvise %x-%x: %w", m.start, m.end, errno)
		}
		released += m.rssKiB
	}
	return released, nil
}

// releaseQuiet is how long the pods' one-off work (mutating CRI calls:
// create, start, stop, remove) must have stood still before the pages it
// mapped are released. Short enough that a burst's pages do not stay
// mapped for the node's lifetime, long enough that a burst is over and a
// release does not interrupt one (each costs a few thousand minor faults
// to map the working set again, about a millisecond).
const releaseQuiet = 5 * time.Second

// releaseDecision is the pure part of releaseAfterBursts: given the count
// of finished mutating calls at the last release, the count now, and since
// when the count has not moved, it says whether to release now.
func releaseDecision(atLastRelease, now uint64, stillFor time.Duration) bool {
	return now != atLastRelease && stillFor >= releaseQuiet
}

// releaseAfterBursts releases the binary's pages again each time a burst
// of pod work is over: pod creation, start and deletion run code the
// steady state (observing running pods) does not, and without a release
// its pages stay mapped for the daemon's lifetime. done is
// runner.Manager.MutatingCallsDone; it runs until ctx ends.
func releaseAfterBursts(ctx context.Context, enabled bool, done func() uint64) {
	if !enabled {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	released, last := done(), done()
	lastMoved := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			n := done()
			if n != last {
				last, lastMoved = n, now
				continue
			}
			if releaseDecision(released, n, now.Sub(lastMoved)) {
				releaseStartupPagesAt(true, "pod work done")
				released = n
			}
		}
	}
}

// releaseStartupPagesAt is called twice: when the API serves (package init
// and flag parsing are behind, the runtime may not answer for long) and
// when the daemon is ready (recovery, image import and --manifests-dir are
// behind too).
func releaseStartupPagesAt(enabled bool, stage string) {
	if !enabled {
		return
	}
	// The heap too: a burst (package init, recovery, creating pods) leaves
	// the GC's goal at twice the burst's live heap and the freed spans
	// mapped; a forced collection returns them and sets the goal from what
	// is live now.
	debug.FreeOSMemory()
	kib, err := releaseStartupPages()
	if err != nil {
		klog.ErrorS(err, "Releasing start-up pages of the binary failed")
		return
	}
	klog.V(2).InfoS("Released the start-up pages of the binary", "stage", stage, "KiB", kib)
}
