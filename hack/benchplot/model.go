package main

// The pure part: a bench JSON file's bytes to a chart model. Each chart
// shows the ratios the bench itself computed (the medians of the
// per-repetition ratios, docs/bench.md, "Method, for every scenario"), not
// ratios of its aggregates, which a load drift between repetitions skews;
// only the footprint, which has no repetitions, is divided here.

import (
	"encoding/json"
	"fmt"
	"sort"
)

// Chart is one plot: groups of bars, one bar per series present in the
// group, each a ratio (1 is parity).
type Chart struct {
	File   string   // the SVG's name under -out
	Title  string   // what the ratios compare
	Note   string   // what a ratio below 1 means
	Source string   // the data file it was drawn from, as named to the generator
	Series []string // the legend, in bar order within a group
	Groups []Group
}

// Group is one x position (a scale, a phase): its bars, in series order.
type Group struct {
	Label string
	Bars  []Bar
}

// Bar is one ratio of one series; a series the data lacks for the group has
// no bar.
type Bar struct {
	Series int
	Value  float64
}

// plot is one bench file and how to read its ratios.
type plot struct {
	file  string // the bench's JSON file
	chart func(data []byte) (Chart, error)
}

// plots are the charts `make docs` draws, in the bench's scenario order.
var plots = []plot{
	{"pods.json", podsChart},
	{"recovery.json", recoveryChart},
	{"footprint.json", footprintChart},
	{"bootstrap.json", bootstrapChart},
	{"handoff.json", handoffChart},
}

// The series names shared by the charts, so that a comparison with the
// kubelet has the same colour in every plot (svg.go colours by name).
const (
	vsKubelet = "bootlet / kubelet"
	vsFloor   = "bootlet / floor"
)

// podsLabel names a scale.
func podsLabel(n int) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

// bars keeps the ratios that were measured: the bench omits a ratio it could
// not compute (a contender left out with -contenders) or writes 0.
func bars(values ...*float64) []Bar {
	var out []Bar
	for i, v := range values {
		if v != nil && *v > 0 {
			out = append(out, Bar{Series: i, Value: *v})
		}
	}
	return out
}

// withBars drops the groups without a bar and sorts nothing: the bench's
// order (ascending scales) is the chart's.
func withBars(c Chart, groups []Group) Chart {
	for _, g := range groups {
		if len(g.Bars) > 0 {
			c.Groups = append(c.Groups, g)
		}
	}
	return c
}

func podsChart(data []byte) (Chart, error) {
	var d struct {
		Scenarios []struct {
			Pods      int      `json:"pods"`
			VsKubelet *float64 `json:"median_bootlet_over_kubelet"`
			VsFloor   *float64 `json:"median_bootlet_over_floor"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return Chart{}, err
	}
	var groups []Group
	for _, s := range d.Scenarios {
		groups = append(groups, Group{Label: podsLabel(s.Pods), Bars: bars(s.VsKubelet, s.VsFloor)})
	}
	return withBars(Chart{File: "bench-pods.svg", Title: "Pod start: bootlet's p50 over the kubelet's and the CRI floor's",
		Note: "median of the per-repetition ratios; below 1: bootlet is faster", Series: []string{vsKubelet, vsFloor}}, groups), nil
}

func recoveryChart(data []byte) (Chart, error) {
	var d struct {
		Scenarios []struct {
			Pods  int      `json:"pods"`
			Ratio *float64 `json:"median_ratio"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return Chart{}, err
	}
	var groups []Group
	for _, s := range d.Scenarios {
		groups = append(groups, Group{Label: podsLabel(s.Pods), Bars: bars(s.Ratio)})
	}
	return withBars(Chart{File: "bench-recovery.svg", Title: "Recovery after a reboot: all pods running again over a cold start",
		Note: "median of the per-repetition ratios; target 1.2", Series: []string{"recovery / cold start"}}, groups), nil
}

func footprintChart(data []byte) (Chart, error) {
	var d struct {
		Scenarios []struct {
			Pods    int     `json:"pods"`
			Bootlet float64 `json:"bootlet_rss_mib"`
			Kubelet float64 `json:"kubelet_rss_mib"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return Chart{}, err
	}
	var groups []Group
	for _, s := range d.Scenarios {
		g := Group{Label: podsLabel(s.Pods)}
		if s.Bootlet > 0 && s.Kubelet > 0 {
			g.Bars = []Bar{{Series: 0, Value: s.Bootlet / s.Kubelet}}
		}
		groups = append(groups, g)
	}
	return withBars(Chart{File: "bench-footprint.svg", Title: "Footprint: bootlet's resident memory over the kubelet's, same pods",
		Note: "median VmRSS of each; below 1: bootlet uses less", Series: []string{vsKubelet}}, groups), nil
}

func bootstrapChart(data []byte) (Chart, error) {
	var d struct {
		VsKubelet *float64 `json:"median_ratio_bootlet_kubelet"`
		VsFloor   *float64 `json:"median_ratio_bootlet_floor"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return Chart{}, err
	}
	return withBars(Chart{File: "bench-bootstrap.svg", Title: "Control plane: a node agent's start to kube-apiserver /readyz",
		Note: "median of the per-repetition ratios; below 1: bootlet is faster", Series: []string{vsKubelet, vsFloor}},
		[]Group{{Label: "start → /readyz", Bars: bars(d.VsKubelet, d.VsFloor)}}), nil
}

func handoffChart(data []byte) (Chart, error) {
	var d struct {
		Readyz     *float64 `json:"median_ratio_reboot_to_readyz_cold"`
		SelfHosted *float64 `json:"median_ratio_reboot_to_selfhosted_cold_to_selfhosted"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return Chart{}, err
	}
	return withBars(Chart{File: "bench-handoff.svg", Title: "Reboot of a self-hosted master over its cold start",
		Note: "median of the per-repetition ratios; target 1.2", Series: []string{"reboot / cold"}},
		[]Group{
			{Label: "to /readyz", Bars: bars(d.Readyz)},
			{Label: "to self-hosted again", Bars: bars(d.SelfHosted)},
		}), nil
}

// newestFirst orders a data directory's campaign directories (named
// YYYY-MM-DD, so that the names sort as the days) newest first.
func newestFirst(names []string) []string {
	out := append([]string(nil), names...)
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}
