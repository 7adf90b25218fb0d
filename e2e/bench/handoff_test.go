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
