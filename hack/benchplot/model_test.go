package main

import (
	"reflect"
	"testing"
)

// TestCharts: each bench file's ratios, and only those, become bars; a
// ratio the bench did not compute (absent, or 0) leaves its bar out, and a
// group without bars is dropped.
func TestCharts(t *testing.T) {
	tests := []struct {
		name   string
		chart  func([]byte) (Chart, error)
		data   string
		series []string
		groups []Group
	}{
		{
			name:   "pods: both ratios per scale",
			chart:  podsChart,
			data:   `{"scenarios":[{"pods":1,"median_bootlet_over_kubelet":0.87,"median_bootlet_over_floor":1.01},{"pods":50,"median_bootlet_over_kubelet":1.28,"median_bootlet_over_floor":0.97}]}`,
			series: []string{vsKubelet, vsFloor},
			groups: []Group{
				{Label: "1 pod", Bars: []Bar{{0, 0.87}, {1, 1.01}}},
				{Label: "50 pods", Bars: []Bar{{0, 1.28}, {1, 0.97}}},
			},
		},
		{
			name:   "pods: -contenders bootlet,cri_floor keeps the floor's ratio only",
			chart:  podsChart,
			data:   `{"scenarios":[{"pods":10,"median_bootlet_over_floor":1.05,"median_bootlet_over_kubelet":0}]}`,
			series: []string{vsKubelet, vsFloor},
			groups: []Group{{Label: "10 pods", Bars: []Bar{{1, 1.05}}}},
		},
		{
			name:   "pods: bootlet alone, nothing to draw",
			chart:  podsChart,
			data:   `{"scenarios":[{"pods":10,"bootlet":{"p50_ms":400}}]}`,
			series: []string{vsKubelet, vsFloor},
		},
		{
			name:   "recovery: the median of the per-repetition ratios, not the ratio of the medians",
			chart:  recoveryChart,
			data:   `{"scenarios":[{"pods":10,"ratio":1.5,"median_ratio":1.09},{"pods":50,"ratio":1.1,"median_ratio":1.02}]}`,
			series: []string{"recovery / cold start"},
			groups: []Group{{Label: "10 pods", Bars: []Bar{{0, 1.09}}}, {Label: "50 pods", Bars: []Bar{{0, 1.02}}}},
		},
		{
			name:   "footprint: the RSS divided, a missing contender skipped",
			chart:  footprintChart,
			data:   `{"scenarios":[{"pods":10,"bootlet_rss_mib":33,"kubelet_rss_mib":82.5},{"pods":50,"bootlet_rss_mib":40}]}`,
			series: []string{vsKubelet},
			groups: []Group{{Label: "10 pods", Bars: []Bar{{0, 0.4}}}},
		},
		{
			name:   "bootstrap: one group, both ratios",
			chart:  bootstrapChart,
			data:   `{"bootlet_seconds":6.14,"median_ratio_bootlet_floor":1.48,"median_ratio_bootlet_kubelet":0.89}`,
			series: []string{vsKubelet, vsFloor},
			groups: []Group{{Label: "start → /readyz", Bars: []Bar{{0, 0.89}, {1, 1.48}}}},
		},
		{
			name:   "handoff: a file without the self-hosted ratio draws /readyz only",
			chart:  handoffChart,
			data:   `{"median_ratio_reboot_to_readyz_cold":1.09,"ratios_reboot_to_readyz_cold":[1.19,1.09,1.03]}`,
			series: []string{"reboot / cold"},
			groups: []Group{{Label: "to /readyz", Bars: []Bar{{0, 1.09}}}},
		},
		{
			name:   "handoff: both",
			chart:  handoffChart,
			data:   `{"median_ratio_reboot_to_readyz_cold":1.0,"median_ratio_reboot_to_selfhosted_cold_to_selfhosted":0.93}`,
			series: []string{"reboot / cold"},
			groups: []Group{{Label: "to /readyz", Bars: []Bar{{0, 1}}}, {Label: "to self-hosted again", Bars: []Bar{{0, 0.93}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.chart([]byte(tt.data))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Series, tt.series) {
				t.Errorf("series %q, want %q", c.Series, tt.series)
			}
			if !reflect.DeepEqual(c.Groups, tt.groups) {
				t.Errorf("groups %+v, want %+v", c.Groups, tt.groups)
			}
			if c.File == "" || c.Title == "" {
				t.Errorf("chart without a file or a title: %+v", c)
			}
		})
	}
}

// TestChartsRejectBadJSON: a damaged data file is an error, not an empty plot.
func TestChartsRejectBadJSON(t *testing.T) {
	for _, p := range plots {
		if _, err := p.chart([]byte(`{"scenarios": [`)); err == nil {
			t.Errorf("%s: truncated JSON accepted", p.file)
		}
	}
}

func TestNewestFirst(t *testing.T) {
	got := newestFirst([]string{"2026-11-23", "2026-12-01", "2026-11-29"})
	want := []string{"2026-12-01", "2026-11-29", "2026-11-23"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("newestFirst: %q, want %q", got, want)
	}
}

func TestPodsLabel(t *testing.T) {
	for n, want := range map[int]string{1: "1 pod", 10: "10 pods", 50: "50 pods"} {
		if got := podsLabel(n); got != want {
			t.Errorf("podsLabel(%d) = %q, want %q", n, got, want)
		}
	}
}
