//go:build e2e

package main

// The bench's pure decisions: percentiles, medians, ratios, and parsing of
// /proc/loadavg and /proc/PID/status. They do no I/O, so stats_test.go
// checks them with tables; the reading of the files stays in readLoadAvg and
// rssMiB.

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// loadAvg is the machine's load average (/proc/loadavg) at one moment. It
// goes next to every number the bench prints and into every JSON file: on
// this shared 2-core machine the background load drifts within a run, and a
// ratio means little without it.
type loadAvg struct {
	One     float64 `json:"1m"`
	Five    float64 `json:"5m"`
	Fifteen float64 `json:"15m"`
}

func (l loadAvg) String() string {
	return fmt.Sprintf("load %.2f %.2f %.2f", l.One, l.Five, l.Fifteen)
}

// parseLoadAvg parses the first three fields of /proc/loadavg
// ("0.52 0.58 0.59 1/234 5678").
func parseLoadAvg(s string) (loadAvg, error) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return loadAvg{}, fmt.Errorf("loadavg %q: want at least 3 fields", s)
	}
	var v [3]float64
	for i := range v {
		x, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return loadAvg{}, fmt.Errorf("loadavg %q: %v", s, err)
		}
		v[i] = x
	}
	return loadAvg{v[0], v[1], v[2]}, nil
}

// readLoadAvg reads /proc/loadavg; the bench cannot report honestly without
// it, so a failure is fatal.
func readLoadAvg(t *tb) loadAvg {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	l, err := parseLoadAvg(string(data))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// parseStatusKiB returns one memory line of a /proc/PID/status file
// ("VmRSS:     40960 kB"), in KiB.
func parseStatusKiB(status, field string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		rest, ok := strings.CutPrefix(line, field+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("unexpected %s line %q", field, line)
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, fmt.Errorf("no %s line (a kernel thread or a zombie has none)", field)
}

// statusMiB reads one memory line (VmRSS, VmHWM) of /proc/PID/status, in MiB.
func statusMiB(pid int, field string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	kib, err := parseStatusKiB(string(data), field)
	if err != nil {
		return 0, fmt.Errorf("pid %d: %v", pid, err)
	}
	return round(float64(kib)/1024, 1), nil
}

// median of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ratio is a/b rounded to 3 decimals, or 0 when either side was not
// measured (a contender left out with -contenders).
func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return round(a/b, 3)
}

func round(x float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(x*p) / p
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentile is the nearest-rank percentile p (0..1] of d, in ms; 0 for none.
func percentile(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(s) {
		i = len(s) - 1
	}
	return ms(s[i])
}

// stats are a set of per-pod latencies, in ms.
type stats struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	Max float64 `json:"max_ms"`
	N   int     `json:"n"`
}

func summarize(d []time.Duration) stats {
	if len(d) == 0 {
		return stats{}
	}
	return stats{P50: percentile(d, 0.5), P90: percentile(d, 0.9), Max: percentile(d, 1), N: len(d)}
}

// parseScales parses -scales ("1,10,50"): pod counts, each at least 1.
// Empty means each scenario's own default.
func parseScales(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-scales %q: %q is not a pod count >= 1", s, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// fmtRatios prints per-repetition ratios compactly ("0.94 1.03 0.87").
func fmtRatios(rs []float64) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%.2f", r)
	}
	return strings.Join(parts, " ")
}
