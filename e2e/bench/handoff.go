//go:build e2e

package main

// The handoff scenario (-only handoff, handoff.json): the lifecycle's numbers with the real kubelet.
// What each field measures and the targets:
// docs/bench.md, "Handoff to the kubelet, pivot and reboot (`_output/bench/handoff.json`)".

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/bootlet/bootlet/e2e"
)

// handoffTargetRatio: a rebooted master must reach /readyz within 1.2 ×
// its cold bootstrap, so a checkpoint costs a reboot little over a first
// boot.
const handoffTargetRatio = 1.2

// handoffComparison is the reference the issue gives: bootkube's
// pod-checkpointer brought a rebooted single master back in "more than 5
// min" (kubernetes-incubator/bootkube#837).
const handoffComparison = `bootkube's pod-checkpointer: "more than 5 min" for a rebooted single master to come back (bootkube#837)`

// recordingTB is the bench's tb for one repetition of the lifecycle: an
// Errorf is printed and recorded, and does not fail the run (Failed stays
// false), so RunLifecycle goes on and its numbers are written; the errors go
// into the repetition's record and make the bench exit 1 at the end.
type recordingTB struct {
	*tb
	errs []string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(os.Stderr, "bench: ERROR (recorded; the run goes on): %s\n", msg)
	if len(msg) > 2000 { // the head says what failed; the rest is context
		msg = msg[:2000] + " ..."
	}
	r.errs = append(r.errs, msg)
}

// handoffRep is one repetition, seconds as RunLifecycle measured them.
type handoffRep struct {
	Rep                       int     `json:"rep"`
	ContainerRestartsOnAdopt  int     `json:"container_restarts_on_adoption"`
	FailedRequestsDuringPivot int     `json:"failed_requests_during_pivot"`
	ProbeRequests             int     `json:"probe_requests"`
	AdoptionSeconds           float64 `json:"adoption_seconds"`
	PivotSeconds              float64 `json:"pivot_seconds"`
	RebootToReadyzSeconds     float64 `json:"reboot_to_readyz_seconds"`
	RebootToSelfHostedSeconds float64 `json:"reboot_to_selfhosted_seconds"`
	// The earlier end of "self-hosted again" (the checkpoint withdrawn),
	// and the checkpoint pod gone from bootlet (its graceful stop ended).
	RebootToWithdrawnSeconds      float64 `json:"reboot_to_withdrawn_seconds"`
	RebootToCheckpointGoneSeconds float64 `json:"reboot_to_checkpoint_gone_seconds"`
	ColdToSelfHostedSeconds       float64 `json:"cold_to_selfhosted_seconds"`
	RatioRebootSelfHostedToCold   float64 `json:"ratio_reboot_to_selfhosted_cold_to_selfhosted"`
	// RebootBreakdown: each moment of the reboot, seconds from the power-on.
	RebootBreakdown         map[string]float64 `json:"reboot_breakdown"`
	ColdBootstrapSeconds    float64            `json:"cold_bootstrap_seconds"`
	RatioRebootReadyzToCold float64            `json:"ratio_reboot_to_readyz_cold_bootstrap"`
	TCPMigrateReq           string             `json:"tcp_migrate_req"`
	LoadAvgStart            loadAvg            `json:"loadavg_start"`
	LoadAvgEnd              loadAvg            `json:"loadavg_end"`
	TotalSeconds            float64            `json:"lifecycle_seconds"`
	Errors                  []string           `json:"errors,omitempty"` // the checks RunLifecycle failed (recordingTB)
}

func benchHandoff(t *tb, o options) {
	reps := o.repsFor(3)
	loadStart := readLoadAvg(t)
	fmt.Fprintf(os.Stderr, "handoff: %d repetitions of the lifecycle (first boot, adoption, pivot, checkpoint, reboot), about 2 min each; %s\n", reps, loadStart)
	var out []handoffRep
	var zero []zeroRun // every pivot and upgrade under the probe clients, 0 failed requests (zero.go)
	for rep := 1; rep <= reps; rep++ {
		step := "0 setup"
		t.Cleanup(func() {
			if t.Failed() {
				fmt.Fprintf(os.Stderr, "handoff rep %d FAILED in step %s\n", rep, step)
			}
		})
		r := handoffRep{Rep: rep, LoadAvgStart: readLoadAvg(t)}
		began := time.Now()
		rt := &recordingTB{tb: t}
		lc := e2e.RunLifecycle(rt, &step)
		r.Errors = rt.errs
		r.TotalSeconds = round(time.Since(began).Seconds(), 1)
		n := lc.Numbers
		// bootlet sets net.ipv4.tcp_migrate_req where it may; recorded
		// because the pivot's failures depend on it (docs/pivot.md).
		if data, err := os.ReadFile("/proc/sys/net/ipv4/tcp_migrate_req"); err == nil {
			r.TCPMigrateReq = strings.TrimSpace(string(data))
		}
		r.ContainerRestartsOnAdopt = n.ContainerRestarts
		r.FailedRequestsDuringPivot = n.FailedRequests
		r.ProbeRequests = n.ProbeRequests
		r.AdoptionSeconds = round(n.Adoption.Seconds(), 2)
		r.PivotSeconds = round(n.Pivot.Seconds(), 2)
		r.RebootToReadyzSeconds = round(n.RebootToReadyz.Seconds(), 2)
		r.RebootToSelfHostedSeconds = round(n.RebootToSelfHosted.Seconds(), 2)
		r.ColdBootstrapSeconds = round(n.ColdBootstrap.Seconds(), 2)
		r.RebootToWithdrawnSeconds = round(n.RebootToWithdrawn.Seconds(), 2)
		r.RebootToCheckpointGoneSeconds = round(n.RebootToCheckpointGone.Seconds(), 2)
		r.ColdToSelfHostedSeconds = round(n.ColdToSelfHosted().Seconds(), 2)
		r.RatioRebootSelfHostedToCold = ratio(n.RebootToSelfHosted.Seconds(), n.ColdToSelfHosted().Seconds())
		r.RebootBreakdown = rebootBreakdown(n.Reboot)
		r.RatioRebootReadyzToCold = ratio(n.RebootToReadyz.Seconds(), n.ColdBootstrap.Seconds())
		zero = append(zero, pivotRun(t, rep, n, r.Errors))
		if rep == reps { // the rolling updates run on the last repetition's node
			zero = append(zero, benchUpgrades(t, lc, o.upgrades)...)
		}
		t.runCleanups() // the kubelet, bootlet and containerd of this repetition
		r.LoadAvgEnd = readLoadAvg(t)
		fmt.Fprintf(os.Stderr, "handoff rep %d (%d errors): cold %.2fs  restarts %d  failed %d of %d  pivot %.2fs  reboot→/readyz %.2fs  reboot→self-hosted %.2fs (withdrawn %.2fs, gone %.2fs; cold→self-hosted %.2fs, ratio %.2f)  reboot/cold %.2f  (whole run %.0fs; %s → %s)\n  reboot: %s\n",
			rep, len(r.Errors), r.ColdBootstrapSeconds, r.ContainerRestartsOnAdopt, r.FailedRequestsDuringPivot, r.ProbeRequests, r.PivotSeconds,
			r.RebootToReadyzSeconds, r.RebootToSelfHostedSeconds, r.RebootToWithdrawnSeconds, r.RebootToCheckpointGoneSeconds,
			r.ColdToSelfHostedSeconds, r.RatioRebootSelfHostedToCold, r.RatioRebootReadyzToCold, r.TotalSeconds, r.LoadAvgStart, r.LoadAvgEnd, n.Reboot.Breakdown())
		out = append(out, r)
	}
	zero = append(zero, benchPivots(t, reps+1, o.pivots-reps)...)
	loadEnd := readLoadAvg(t)

	med := func(f func(handoffRep) float64) float64 {
		v := make([]float64, len(out))
		for i, r := range out {
			v[i] = f(r)
		}
		return round(median(v), 2)
	}
	worst := func(f func(handoffRep) int) int {
		m := 0
		for _, r := range out {
			m = max(m, f(r))
		}
		return m
	}
	var ratios []float64
	for _, r := range out {
		ratios = append(ratios, r.RatioRebootReadyzToCold)
	}
	medianRatio := round(median(ratios), 3)
	failed := 0
	for _, r := range out {
		if len(r.Errors) > 0 {
			failed++
		}
	}
	res := map[string]any{
		"container_restarts_on_adoption":                       worst(func(r handoffRep) int { return r.ContainerRestartsOnAdopt }),
		"failed_requests_during_pivot":                         worst(func(r handoffRep) int { return r.FailedRequestsDuringPivot }),
		"pivot_seconds":                                        med(func(r handoffRep) float64 { return r.PivotSeconds }),
		"reboot_to_readyz_seconds":                             med(func(r handoffRep) float64 { return r.RebootToReadyzSeconds }),
		"reboot_to_selfhosted_seconds":                         med(func(r handoffRep) float64 { return r.RebootToSelfHostedSeconds }),
		"reboot_to_withdrawn_seconds":                          med(func(r handoffRep) float64 { return r.RebootToWithdrawnSeconds }),
		"reboot_to_checkpoint_gone_seconds":                    med(func(r handoffRep) float64 { return r.RebootToCheckpointGoneSeconds }),
		"cold_to_selfhosted_seconds":                           med(func(r handoffRep) float64 { return r.ColdToSelfHostedSeconds }),
		"median_ratio_reboot_to_selfhosted_cold_to_selfhosted": med(func(r handoffRep) float64 { return r.RatioRebootSelfHostedToCold }),
		"cold_bootstrap_seconds":                               med(func(r handoffRep) float64 { return r.ColdBootstrapSeconds }),
		"median_ratio_reboot_to_readyz_cold":                   medianRatio,
		"ratios_reboot_to_readyz_cold":                         ratios,
		"target_ratio_reboot_to_readyz_cold":                   handoffTargetRatio,
		"targets":                                              "0 restarts, 0 failed requests, reboot_to_readyz_seconds <= 1.2 x cold_bootstrap_seconds",
		"comparison":                                           handoffComparison,
		"loadavg_start":                                        loadStart,
		"loadavg_end":                                          loadEnd,
		"cpus":                                                 runtime.NumCPU(),
		"reps":                                                 reps,
		"failed_repetitions":                                   failed,
		"repetitions":                                          out,
		"method": "each repetition is e2e.RunLifecycle (TestLifecycle's steps 1-5) on a fresh containerd, kubelet v1.36.3 and bootlet; " +
			"the counts are the worst repetition's, the seconds the median of the repetitions, the ratio the median of each repetition's " +
			"reboot_to_readyz / cold_bootstrap; a repetition whose checks fail (a restart, a failed request, ...) is recorded with its errors and fails the bench",
	}
	zs := zeroSummary(zero)
	for k, v := range zs {
		res[k] = v
	}
	path := writeJSON(t, "handoff.json", res)
	fmt.Printf("\nhandoff (single master, real kubelet; %d repetitions; %s → %s on %d CPUs)\n", reps, loadStart, loadEnd, runtime.NumCPU())
	fmt.Printf("  restarts on adoption %d (target 0)   failed requests during the pivot %d (target 0)   pivot %.2fs\n",
		res["container_restarts_on_adoption"], res["failed_requests_during_pivot"], res["pivot_seconds"])
	fmt.Printf("  cold bootstrap %.2fs   reboot → /readyz %.2fs   reboot → self-hosted %.2fs   reboot/cold %.2f [%s] (target ≤ %.1f)\n",
		res["cold_bootstrap_seconds"], res["reboot_to_readyz_seconds"], res["reboot_to_selfhosted_seconds"], medianRatio, fmtRatios(ratios), handoffTargetRatio)
	fmt.Printf("  for comparison: %s\n", handoffComparison)
	fmt.Printf("  pivots %d, rolling updates of the apiserver DaemonSet %d: failed requests %d in all (target 0), %d runs failed\n",
		zs["pivots"], zs["upgrades"], zs["failed_requests_total"], zs["zero_failed_runs"])
	fmt.Printf("wrote %s\n", path)
	if n := zs["zero_failed_runs"].(int); n > 0 {
		t.Fatalf("handoff: %d of %d pivots and upgrades failed a request or a check (their errors are in %s)", n, len(zero), path)
	}
	if failed > 0 {
		t.Fatalf("handoff: %d of %d repetitions failed a check of the lifecycle (their errors are in %s)", failed, reps, path)
	}
}

// rebootBreakdown is each moment of a reboot in seconds from the power-on
// (a moment not seen is left out).
func rebootBreakdown(r e2e.RebootTimes) map[string]float64 {
	out := map[string]float64{}
	for name, tm := range map[string]time.Time{
		"bootlet_ready": r.BootletReady, "kubelet_started": r.KubeletStarted, "checkpoint_activated": r.Activated,
		"checkpoint_listening": r.Listening, "readyz": r.Readyz, "selfhosted_apiserver_started": r.SelfHostedStarted,
		"selfhosted_apiserver_ready": r.SelfHostedReady, "withdrawal_decided": r.Decided, "handover_done": r.HandedOver,
		"checkpoint_withdrawn": r.Withdrawn, "checkpoint_stopped_serving": r.StoppedServing, "checkpoint_gone": r.Gone,
	} {
		if !tm.IsZero() {
			out[name] = round(tm.Sub(r.PoweredOn).Seconds(), 2)
		}
	}
	return out
}
