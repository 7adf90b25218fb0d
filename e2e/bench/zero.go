//go:build e2e

package main

// The proof of 0 failed requests, part of the handoff scenario
// (handoff.json: pivots, upgrades, failed_requests_total, zero_runs): pivots
// and rolling updates of the self-hosted apiserver DaemonSet in a row, each
// under the 50 ms probe clients (docs/design/reuseport.md, "The probe client"), 0
// failed requests in all.

import (
	"fmt"
	"os"
	"time"

	"github.com/bootlet/bootlet/e2e"
)

// zeroRun is one pivot or one upgrade and what the probe clients saw.
type zeroRun struct {
	Kind string `json:"kind"` // "pivot" or "upgrade"
	N    int    `json:"n"`    // 1-based, per kind
	// From, To: an upgrade's images (two local tags, in turn).
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	// Seconds: a pivot's adoption to the last bootstrap pod withdrawn; an
	// upgrade's set image to the new pod alone and Ready, the old one gone.
	Seconds float64 `json:"seconds"`
	// Requests, Failed: the keep-alive client (HTTP/2, no retries).
	Requests int `json:"requests"`
	Failed   int `json:"failed"`
	// NewConnRequests, NewConnNotAnswered: the client that opens a new
	// connection per request, and its requests no serving apiserver
	// answered.
	NewConnRequests    int      `json:"new_conn_requests"`
	NewConnNotAnswered int      `json:"new_conn_not_answered"`
	LoadAvg            loadAvg  `json:"loadavg_end"`
	Errors             []string `json:"errors,omitempty"`
}

// failed is what counts in failed_requests_total.
func (r zeroRun) failed() int { return r.Failed + r.NewConnNotAnswered }

func (r zeroRun) print() {
	what := ""
	if r.Kind == "upgrade" {
		what = fmt.Sprintf(" %s -> %s", r.From, r.To)
	}
	fmt.Fprintf(os.Stderr, "ZERO %s %d%s: %.1fs  keep-alive %d failed of %d  new-connection %d not answered of %d  (%d errors; %s)\n",
		r.Kind, r.N, what, r.Seconds, r.Failed, r.Requests, r.NewConnNotAnswered, r.NewConnRequests, len(r.Errors), r.LoadAvg)
}

// pivotRun is the zeroRun of a pivot RunPivot or RunLifecycle measured.
func pivotRun(t *tb, n int, num e2e.HandoffNumbers, errs []string) zeroRun {
	r := zeroRun{Kind: "pivot", N: n, Seconds: round(num.Pivot.Seconds(), 2), Requests: num.ProbeRequests, Failed: num.FailedRequests,
		NewConnRequests: num.NewConnRequests, NewConnNotAnswered: num.NewConnNotAnswered, LoadAvg: readLoadAvg(t), Errors: errs}
	r.print()
	return r
}

// benchUpgrades runs n rolling updates of lc's apiserver DaemonSet back to
// back, between its image and a second local tag of it, in turn.
func benchUpgrades(t *tb, lc *e2e.LifecycleRun, n int) []zeroRun {
	if n == 0 {
		return nil
	}
	images := [2]string{lc.Image, lc.Image + "-zero"}
	e2e.TagImage(t, lc.C, images[0], images[1])
	fmt.Fprintf(os.Stderr, "handoff: %d rolling updates of the apiserver DaemonSet between %s and %s\n", n, images[0], images[1])
	var out []zeroRun
	for i := 1; i <= n; i++ {
		rt := &recordingTB{tb: t}
		up := e2e.UpgradeAPIServer(rt, lc, images[i%2])
		r := zeroRun{Kind: "upgrade", N: i, From: up.From, To: up.To, Seconds: round(up.Took.Seconds(), 2),
			Requests: up.KeepAlive.Requests, Failed: up.KeepAlive.Failed,
			NewConnRequests: up.NewConn.Requests, NewConnNotAnswered: up.NewConn.NotAnswered(), LoadAvg: readLoadAvg(t), Errors: rt.errs}
		r.print()
		out = append(out, r)
	}
	return out
}

// benchPivots runs n pivots, each on a fresh node (RunPivot: first boot,
// adoption, pivot), numbered from first.
func benchPivots(t *tb, first, n int) []zeroRun {
	var out []zeroRun
	for i := 0; i < n; i++ {
		step := "0 setup"
		began := time.Now()
		rt := &recordingTB{tb: t}
		lc := e2e.RunPivot(rt, &step)
		out = append(out, pivotRun(t, first+i, lc.Numbers, rt.errs))
		t.runCleanups()
		fmt.Fprintf(os.Stderr, "handoff: pivot %d's whole run %.0fs\n", first+i, time.Since(began).Seconds())
	}
	return out
}

// zeroSummary is the zero-failed-requests part of handoff.json.
func zeroSummary(runs []zeroRun) map[string]any {
	pivots, upgrades, failed, failedRuns := 0, 0, 0, 0
	for _, r := range runs {
		switch r.Kind {
		case "pivot":
			pivots++
		case "upgrade":
			upgrades++
		}
		failed += r.failed()
		if r.failed() > 0 || len(r.Errors) > 0 {
			failedRuns++
		}
	}
	return map[string]any{
		"pivots":                pivots,
		"upgrades":              upgrades,
		"failed_requests_total": failed,
		"zero_failed_runs":      failedRuns,
		"zero_runs":             runs,
		"zero_target":           "0 failed_requests_total: in every pivot and every rolling update of the apiserver DaemonSet, the keep-alive 50 ms client (GET /version and a pod list in turn, HTTP/2, 1 s timeout, no retries) fails no request and the new-connection client meets no connection that no serving apiserver answers",
	}
}
