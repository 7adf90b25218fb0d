package node

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

const smapsSample = `00400000-018f2000 r--p 00000000 fd:01 123 /usr/bin/bootlet
Size:              21448 kB
Rss:                3016 kB
Anonymous:             0 kB
018f2000-04275000 r-xp 014f2000 fd:01 123 /usr/bin/bootlet
Size:              42508 kB
Rss:               25976 kB
Anonymous:             0 kB
070e1000-070e2000 r--p 06ce0000 fd:01 123 /usr/bin/bootlet
Rss:                   4 kB
Anonymous:             4 kB
070e2000-07223000 rw-p 06ce1000 fd:01 123 /usr/bin/bootlet
Rss:                 832 kB
Anonymous:           640 kB
07223000-0927d000 rw-p 00000000 00:00 0
Rss:                 248 kB
Anonymous:           248 kB
7fa55a27b000-7fa55a3d1000 r-xp 00028000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 916 kB
Anonymous:             0 kB
7fa55a400000-7fa55a401000 r--p 00000000 fd:01 789 /usr/bin/bootlet (deleted)
Rss:                   4 kB
Anonymous:             0 kB
`

func TestParseExeMappings(t *testing.T) {
	got, err := parseExeMappings(strings.NewReader(smapsSample), "/usr/bin/bootlet")
	if err != nil {
		t.Fatal(err)
	}
	want := []exeMapping{
		{start: 0x400000, end: 0x18f2000, perms: "r--p", rssKiB: 3016},
		{start: 0x18f2000, end: 0x4275000, perms: "r-xp", rssKiB: 25976},
		{start: 0x70e1000, end: 0x70e2000, perms: "r--p", rssKiB: 4, anonKiB: 4},
		{start: 0x70e2000, end: 0x7223000, perms: "rw-p", rssKiB: 832, anonKiB: 640},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// Only never-written, read-only mappings with pages are released: not
	// the relocated RELRO page, not the data segment.
	var releasable []bool
	for _, m := range got {
		releasable = append(releasable, m.releasable())
	}
	if want := []bool{true, true, false, false}; !reflect.DeepEqual(releasable, want) {
		t.Errorf("releasable = %v, want %v", releasable, want)
	}
	if _, err := parseExeMappings(strings.NewReader("zz-01 r--p 0 0:0 1 /usr/bin/bootlet\n"), "/usr/bin/bootlet"); err == nil {
		t.Error("a malformed mapping was accepted")
	}
}

// TestReleaseStartupPages runs the release in the test binary itself: the
// binary's read-only mappings lose their pages and the process keeps
// running the code it needs (this test, after the call).
func TestReleaseStartupPages(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	rss := func() (total int64) {
		f, err := os.Open("/proc/self/smaps")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		maps, err := parseExeMappings(f, exe)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range maps {
			if !strings.Contains(m.perms, "w") && m.anonKiB == 0 {
				total += m.rssKiB
			}
		}
		return total
	}
	before := rss()
	released, err := releaseStartupPages()
	if err != nil {
		t.Fatal(err)
	}
	after := rss()
	if released < before/2 || after >= before/2 {
		t.Errorf("read-only mappings of the binary: %d KiB resident before, %d KiB released, %d KiB after", before, released, after)
	}
}

func TestReleaseDecision(t *testing.T) {
	for _, tc := range []struct {
		atLast, now uint64
		still       time.Duration
		want        bool
	}{
		{0, 0, time.Hour, false},                  // nothing happened since start-up's release
		{5, 5, time.Hour, false},                  // nothing since the last release
		{5, 9, 0, false},                          // a burst under way
		{5, 9, releaseQuiet - time.Second, false}, // not quiet long enough
		{5, 9, releaseQuiet, true},                // a burst over
		{5, 9, time.Hour, true},
	} {
		if got := releaseDecision(tc.atLast, tc.now, tc.still); got != tc.want {
			t.Errorf("releaseDecision(%d, %d, %v) = %v, want %v", tc.atLast, tc.now, tc.still, got, tc.want)
		}
	}
}
