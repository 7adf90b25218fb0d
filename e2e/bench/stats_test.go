//go:build e2e

package main

import (
	"reflect"
	"testing"
	"time"
)

func TestParseLoadAvg(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    loadAvg
		wantErr bool
	}{
		{in: "0.52 0.58 0.59 1/234 5678\n", want: loadAvg{0.52, 0.58, 0.59}},
		{in: "12.00 3.5 0 2/900 1", want: loadAvg{12, 3.5, 0}},
		{in: "0.52 0.58", wantErr: true},
		{in: "x 0.58 0.59 1/2 3", wantErr: true},
		{in: "", wantErr: true},
	} {
		got, err := parseLoadAvg(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("parseLoadAvg(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestParseStatusKiB(t *testing.T) {
	status := "Name:\tbootlet\nVmPeak:\t 1296720 kB\nVmHWM:\t   51000 kB\nVmRSS:\t   40960 kB\nRssAnon:\t   30000 kB\n"
	for _, tc := range []struct {
		name    string
		in      string
		field   string
		want    int64
		wantErr bool
	}{
		{name: "status file", in: status, want: 40960},
		{name: "peak", in: status, field: "VmHWM", want: 51000},
		{name: "prefix of another field", in: "VmRSSx:\t 1 kB\n", wantErr: true},
		{name: "no VmRSS (kernel thread)", in: "Name:\tkthreadd\nState:\tS\n", wantErr: true},
		{name: "other unit", in: "VmRSS:\t 40 MB\n", wantErr: true},
		{name: "not a number", in: "VmRSS:\t x kB\n", wantErr: true},
	} {
		if tc.field == "" {
			tc.field = "VmRSS"
		}
		got, err := parseStatusKiB(tc.in, tc.field)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("%s: got %d, %v; want %d, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{1.2, 0.9, 1.0, 5, 0.95}, 1.0},
	} {
		in := append([]float64(nil), tc.in...)
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !reflect.DeepEqual(in, tc.in) {
			t.Errorf("median reordered its input: %v, was %v", tc.in, in)
		}
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		a, b, want float64
	}{
		{160, 170, 0.941},
		{1, 1, 1},
		{0, 170, 0},  // numerator not measured
		{160, 0, 0},  // denominator not measured
		{-1, 170, 0}, // never a negative ratio
	} {
		if got := ratio(tc.a, tc.b); got != tc.want {
			t.Errorf("ratio(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestPercentileAndSummarize(t *testing.T) {
	var d []time.Duration
	for i := 10; i >= 1; i-- { // unsorted on purpose
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(d, 0.5); got != 5 {
		t.Errorf("p50 = %v, want 5", got)
	}
	if got := percentile(d, 0.9); got != 9 {
		t.Errorf("p90 = %v, want 9", got)
	}
	if got, want := summarize(d), (stats{P50: 5, P90: 9, Max: 10, N: 10}); got != want {
		t.Errorf("summarize = %+v, want %+v", got, want)
	}
	if got := summarize(nil); got != (stats{}) {
		t.Errorf("summarize(nil) = %+v", got)
	}
	if got := percentile([]time.Duration{7 * time.Millisecond}, 0.9); got != 7 {
		t.Errorf("p90 of one = %v, want 7", got)
	}
}

func TestParseScales(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "1,10,50", want: []int{1, 10, 50}},
		{in: " 10 , 50", want: []int{10, 50}},
		{in: "0", wantErr: true},
		{in: "1,,2", wantErr: true},
		{in: "ten", wantErr: true},
	} {
		got, err := parseScales(tc.in)
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseScales(%q) = %v, %v; want %v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestSelectScenarios(t *testing.T) {
	table := []scenario{{name: "pods"}, {name: "recovery"}, {name: "footprint"}}
	names := func(ss []scenario) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.name)
		}
		return out
	}
	for _, tc := range []struct {
		only    string
		want    []string
		wantErr bool
	}{
		{only: "", want: []string{"pods", "recovery", "footprint"}},
		{only: "footprint", want: []string{"footprint"}},
		// Table order, whatever the order asked for.
		{only: "footprint,pods", want: []string{"pods", "footprint"}},
		{only: "nope", wantErr: true},
	} {
		got, err := selectScenarios(table, tc.only)
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(names(got), tc.want) {
			t.Errorf("selectScenarios(%q) = %v, %v; want %v, error %v", tc.only, names(got), err, tc.want, tc.wantErr)
		}
	}
}

func TestRepsFor(t *testing.T) {
	o := options{}
	if got := o.repsFor(5); got != 5 {
		t.Errorf("default reps = %d, want 5", got)
	}
	o.reps = 2
	if got := o.repsFor(5); got != 2 {
		t.Errorf("-reps 2 gave %d", got)
	}
	if got := o.scalesOr([]int{1, 10, 50}); !reflect.DeepEqual(got, []int{1, 10, 50}) {
		t.Errorf("default scales = %v", got)
	}
	o.scales = []int{10}
	if got := o.scalesOr([]int{1, 10, 50}); !reflect.DeepEqual(got, []int{10}) {
		t.Errorf("-scales 10 gave %v", got)
	}
}
