//go:build e2e

package main

import (
	"strings"
	"testing"
)

// A failed check of RunLifecycle, reached through testing.TB as the e2e
// helpers call it, is recorded and does not end the bench or mark it
// failed; a long message keeps its head.
func TestRecordingTBRecordsErrorf(t *testing.T) {
	r := &recordingTB{tb: &tb{}}
	var x testing.TB = r
	x.Errorf("the probe client saw %d failed requests of %d", 1, 692)
	x.Errorf("the adoption changed the runtime objects:\n%s", strings.Repeat("x", 5000))
	if x.Failed() {
		t.Error("Failed() is true after a recorded Errorf: RunLifecycle would stop")
	}
	if len(r.errs) != 2 || r.errs[0] != "the probe client saw 1 failed requests of 692" {
		t.Fatalf("recorded %q", r.errs)
	}
	if !strings.HasPrefix(r.errs[1], "the adoption changed") || len(r.errs[1]) > 2010 {
		t.Errorf("long message recorded as %d bytes starting %q", len(r.errs[1]), r.errs[1][:30])
	}
}

// zeroSummary counts pivots and upgrades, sums the keep-alive failures and
// the new-connection requests nobody answered, and counts a run with a
// failure or an error as failed.
func TestZeroSummary(t *testing.T) {
	for _, tc := range []struct {
		name                                 string
		runs                                 []zeroRun
		pivots, upgrades, failed, failedRuns int
	}{
		{name: "none"},
		{name: "all zero", runs: []zeroRun{{Kind: "pivot", Requests: 800}, {Kind: "upgrade", Requests: 900}, {Kind: "upgrade"}},
			pivots: 1, upgrades: 2},
		{name: "failures of both clients", runs: []zeroRun{{Kind: "pivot", Failed: 1}, {Kind: "upgrade", NewConnNotAnswered: 3}, {Kind: "upgrade"}},
			pivots: 1, upgrades: 2, failed: 4, failedRuns: 2},
		{name: "a failed check without a failed request", runs: []zeroRun{{Kind: "pivot", Errors: []string{"restart"}}},
			pivots: 1, failedRuns: 1},
	} {
		s := zeroSummary(tc.runs)
		if s["pivots"] != tc.pivots || s["upgrades"] != tc.upgrades || s["failed_requests_total"] != tc.failed || s["zero_failed_runs"] != tc.failedRuns {
			t.Errorf("%s: %v", tc.name, s)
		}
	}
}
