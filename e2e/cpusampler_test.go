//go:build e2e

package e2e

import (
	"testing"
	"time"
)

func TestParsePressureSomeTotal(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     uint64
	}{
		{"cpu", "some avg10=18.89 avg60=24.99 avg300=26.44 total=23844157466\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", 23844157466},
		{"io, full first", "full avg10=0.00 avg60=0.43 avg300=2.48 total=1122367667\nsome avg10=0.10 avg60=0.80 avg300=3.50 total=2453331010\n", 2453331010},
		{"no some line", "full avg10=0.00 total=5\n", 0},
		{"empty", "", 0},
	} {
		if got := parsePressureSomeTotal(tc.in); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestPressureShare(t *testing.T) {
	if got := pressureShare(250_000, time.Second); got != "25%" {
		t.Errorf("250 ms stalled of 1 s: got %s, want 25%%", got)
	}
}
