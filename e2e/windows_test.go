//go:build e2e

package e2e

import (
	"testing"
	"time"
)

func TestFailureWindows(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 15, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ok := func(ms int) ProbeOutcome { return ProbeOutcome{At: at(ms), Took: 5 * time.Millisecond} }
	fail := func(ms, took int) ProbeOutcome {
		return ProbeOutcome{At: at(ms), Took: time.Duration(took) * time.Millisecond, Failed: true}
	}
	for _, tc := range []struct {
		name  string
		in    []ProbeOutcome
		want  []FailureWindow
		total time.Duration
	}{
		{name: "none", in: []ProbeOutcome{ok(0), ok(50), ok(100)}},
		{name: "one timeout", in: []ProbeOutcome{ok(0), fail(50, 1000), ok(100)},
			want: []FailureWindow{{Start: at(50), End: at(1050), Failed: 1}}, total: time.Second},
		{name: "a run of timeouts is one window to the last one's end",
			in:   []ProbeOutcome{ok(0), fail(50, 1000), fail(100, 1000), fail(150, 1000), ok(200)},
			want: []FailureWindow{{Start: at(50), End: at(1150), Failed: 3}}, total: 1100 * time.Millisecond},
		{name: "two separate runs",
			in:   []ProbeOutcome{fail(0, 10), fail(50, 10), ok(100), ok(150), fail(200, 30), ok(250)},
			want: []FailureWindow{{Start: at(0), End: at(60), Failed: 2}, {Start: at(200), End: at(230), Failed: 1}}, total: 90 * time.Millisecond},
		{name: "a failure inside the previous window's time joins it",
			in:   []ProbeOutcome{fail(0, 1000), ok(50), fail(100, 20), ok(150)},
			want: []FailureWindow{{Start: at(0), End: at(1000), Failed: 2}}, total: time.Second},
		{name: "unsorted input (parallel loops) is taken in send order",
			in:   []ProbeOutcome{ok(150), fail(100, 10), fail(50, 10), ok(0)},
			want: []FailureWindow{{Start: at(50), End: at(110), Failed: 2}}, total: 60 * time.Millisecond},
		{name: "failing at the end stays open to its last end",
			in:   []ProbeOutcome{ok(0), fail(50, 1000)},
			want: []FailureWindow{{Start: at(50), End: at(1050), Failed: 1}}, total: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FailureWindows(tc.in)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d windows %v, want %v", len(got), got, tc.want)
			}
			for i := range got {
				if !got[i].Start.Equal(tc.want[i].Start) || !got[i].End.Equal(tc.want[i].End) || got[i].Failed != tc.want[i].Failed {
					t.Errorf("window %d: got %v, want %v", i, got[i], tc.want[i])
				}
			}
			if d := TotalFailureTime(got); d != tc.total {
				t.Errorf("total %s, want %s", d, tc.total)
			}
		})
	}
}
