//go:build e2e

package main

// The recovery scenario (-only recovery, recovery.json): pods back after a reboot against a cold start,
// and the API's durable-write acknowledgement; method and fields:
// docs/bench.md, "Recovery after a reboot (`_output/bench/recovery.json`)".

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/e2e"
	"github.com/bootlet/bootlet/podapi"
	btypes "github.com/bootlet/bootlet/types"
)

type phaseStats struct {
	P50        float64 `json:"p50_ms"`
	P90        float64 `json:"p90_ms"`
	Max        float64 `json:"max_ms"`
	AllRunning float64 `json:"all_running_ms"`
	// ReadyMs (recovery only): daemon exec → /readyz ok, median.
	ReadyMs float64 `json:"ready_ms,omitempty"`
	N       int     `json:"n"`
	Reps    int     `json:"reps"`
}

type recoveryResult struct {
	Name     string     `json:"name"`
	Pods     int        `json:"pods"`
	Cold     phaseStats `json:"cold"`
	Recovery phaseStats `json:"recovery"`
	// Ratio is the ratio of the medians; MedianRatio the median of the
	// per-repetition ratios, which a load drift between repetitions does
	// not skew.
	Ratio        float64       `json:"ratio"`
	Reps         []recoveryRep `json:"reps"`
	Ratios       []float64     `json:"ratios"`
	MedianRatio  float64       `json:"median_ratio"`
	LoadAvgStart loadAvg       `json:"loadavg_start"`
	LoadAvgEnd   loadAvg       `json:"loadavg_end"`
}

// recoveryRep is one repetition: a cold start and a recovery, back to back.
type recoveryRep struct {
	Rep                int     `json:"rep"`
	ColdAllRunning     float64 `json:"cold_all_running_ms"`
	RecoveryAllRunning float64 `json:"recovery_all_running_ms"`
	ReadyMs            float64 `json:"ready_ms"`
	Ratio              float64 `json:"ratio"`
	LoadAvg            loadAvg `json:"loadavg"`
}

type ackStats struct {
	What string  `json:"what"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
	Max  float64 `json:"max_ms"`
	N    int     `json:"n"`
}

func benchRecovery(t *tb, o options) {
	scales, reps := o.scalesOr([]int{1, 10, 50}), o.repsFor(5)
	loadStart := readLoadAvg(t)
	c := e2e.StartContainerd(t)
	var results []recoveryResult
	nth := 0 // the daemon's instance number, unique over the scenario
	for _, pods := range scales {
		r := recoveryResult{Name: fmt.Sprintf("pods-%d", pods), Pods: pods, LoadAvgStart: readLoadAvg(t)}
		var coldLat, recLat, coldAll, recAll, ready []time.Duration
		for rep := 1; rep <= reps; rep++ {
			nth++
			cl, ca, rl, ra, rd := recoveryRound(t, c, pods, nth)
			coldLat, recLat = append(coldLat, cl...), append(recLat, rl...)
			coldAll, recAll, ready = append(coldAll, ca), append(recAll, ra), append(ready, rd)
			rr := recoveryRep{Rep: rep, ColdAllRunning: ms(ca), RecoveryAllRunning: ms(ra), ReadyMs: ms(rd),
				Ratio: ratio(ms(ra), ms(ca)), LoadAvg: readLoadAvg(t)}
			r.Reps = append(r.Reps, rr)
			r.Ratios = append(r.Ratios, rr.Ratio)
			fmt.Printf("recovery %-8s rep %d/%d: cold all running %7.1f ms, recovery all running %7.1f ms (ready %6.1f ms) | recovery/cold %.2f | %s\n",
				r.Name, rep, reps, rr.ColdAllRunning, rr.RecoveryAllRunning, rr.ReadyMs, rr.Ratio, rr.LoadAvg)
		}
		r.Cold, r.Recovery = phase(coldLat, coldAll, nil), phase(recLat, recAll, ready)
		r.Ratio = ratio(r.Recovery.AllRunning, r.Cold.AllRunning)
		r.MedianRatio = round(median(r.Ratios), 3)
		r.LoadAvgEnd = readLoadAvg(t)
		results = append(results, r)
	}
	ack := benchAckConfigMaps(t, c, 1000)
	ackPod := benchAckPods(t, 1000)

	out := writeJSON(t, "recovery.json", map[string]any{"scenarios": results, "ack": ack, "ack_pod": ackPod, "reps": reps,
		"loadavg_start": loadStart, "loadavg_end": readLoadAvg(t)})
	printRecoveryTable(results, ack, ackPod)
	fmt.Printf("\nwrote %s\n", out)
}

// recoveryRound runs one cold start and one recovery of pods pods on a
// fresh daemon and removes everything afterwards. It returns the per-pod
// latencies and the all-running time of each phase, and the recovery's
// time to /readyz.
func recoveryRound(t *tb, c *e2e.Containerd, pods, round int) (coldLat []time.Duration, coldAll time.Duration, recLat []time.Duration, recAll, ready time.Duration) {
	ctx := context.Background()
	b := &e2e.Bootlet{Ctrd: c, Dir: filepath.Join(c.Dir, fmt.Sprintf("bootlet-rec-%d", round)), LogDir: filepath.Join(c.Dir, "pod-logs"),
		Socket: filepath.Join(c.Dir, fmt.Sprintf("rec-%d.sock", round)), NodeName: nodeName}
	b.Start(t)
	t.Cleanup(b.Stop)
	names := make([]string, pods)
	want := map[string]bool{}
	for i := range names {
		names[i] = fmt.Sprintf("rec-r%d-p%d", round, i)
		want[btypes.StaticPodName(names[i], nodeName)] = true
	}

	// Cold: create every pod at once on the ready daemon. One dry-run create
	// first builds the API's field manager (a one-time ~85 ms on the first
	// write after a start), so cold times the pod start path alone and the
	// comparison with recovery stays conservative.
	warm := benchPod(fmt.Sprintf("warm-r%d", round))
	if _, err := b.Client.CoreV1().Pods("default").Create(ctx, warm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("dry-run create: %v", err)
	}
	seen, start := timeRunning(t, c, want, func() {
		var wg sync.WaitGroup
		for _, n := range names {
			wg.Add(1)
			go func(n string) {
				defer wg.Done()
				if _, err := b.Client.CoreV1().Pods("default").Create(ctx, benchPod(n), metav1.CreateOptions{}); err != nil {
					t.Fatalf("create %s: %v", n, err)
				}
			}(n)
		}
		wg.Wait()
	})
	coldLat, coldAll = latencies(seen, start)
	uids := map[string]string{}
	waitAPIRunning(t, b, names, uids, 60*time.Second)

	// Recovery: reboot, containerd back, then time the daemon.
	e2e.SimulateReboot(t, c, b)
	c.Restart(t)
	readyAt := make(chan time.Time, 1)
	seen, start = timeRunning(t, c, want, func() {
		b.Spawn(t)
		go func() {
			for {
				body, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
				if err == nil && string(body) == "ok" {
					readyAt <- time.Now()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	})
	recLat, recAll = latencies(seen, start)
	select {
	case at := <-readyAt:
		ready = at.Sub(start)
	case <-time.After(30 * time.Second):
		t.Fatalf("recovery round %d: /readyz never ok", round)
	}
	waitAPIRunning(t, b, names, uids, 60*time.Second)

	// Clean up: delete the pods (their old sandboxes go with them).
	for _, n := range names {
		if err := b.Client.CoreV1().Pods("default").Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
			t.Fatalf("delete %s: %v", n, err)
		}
	}
	waitEmpty(t, c, 120*time.Second, false)
	b.Stop()
	return
}

// timeRunning starts watching CRI, records the start time, runs issue and
// waits until every pod in want has a RUNNING container.
func timeRunning(t *tb, c *e2e.Containerd, want map[string]bool, issue func()) (map[string]time.Time, time.Time) {
	running := make(chan map[string]time.Time, 1)
	stop := make(chan struct{})
	go func() { running <- watchRunning(c, want, stop) }()
	start := time.Now()
	issue()
	select {
	case seen := <-running:
		return seen, start
	case <-time.After(180 * time.Second):
		close(stop)
		t.Fatalf("pods not RUNNING after 180s")
	}
	return nil, start
}

func latencies(seen map[string]time.Time, start time.Time) ([]time.Duration, time.Duration) {
	var lat []time.Duration
	var all time.Duration
	for _, at := range seen {
		d := at.Sub(start)
		lat = append(lat, d)
		if d > all {
			all = d
		}
	}
	return lat, all
}

// waitAPIRunning waits until the API shows every pod Running; uids records
// each pod's UID the first time and checks it afterwards.
func waitAPIRunning(t *tb, b *e2e.Bootlet, names []string, uids map[string]string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		l, err := b.Client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
		running := 0
		if err == nil {
			byName := map[string]v1.Pod{}
			for _, p := range l.Items {
				byName[p.Name] = p
			}
			for _, n := range names {
				p, ok := byName[n]
				if !ok {
					t.Fatalf("pod %s is gone", n)
				}
				if uid, ok := uids[n]; ok && uid != string(p.UID) {
					t.Fatalf("pod %s came back with UID %s, was %s", n, p.UID, uid)
				}
				uids[n] = string(p.UID)
				if e2e.Running(&p) {
					running++
				}
			}
		}
		if running == len(names) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d pods Running in the API after %s (%v)", running, len(names), timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unlimited returns a client without client-go's rate limiter, so a
// sequence of writes measures the server alone.
func unlimited(t *tb, socket string) *kubernetes.Clientset {
	cfg, err := podapi.RESTConfig("unix://" + socket)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS = -1
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func benchAckConfigMaps(t *tb, c *e2e.Containerd, n int) ackStats {
	b := &e2e.Bootlet{Ctrd: c, Dir: filepath.Join(c.Dir, "bootlet-ack"), LogDir: filepath.Join(c.Dir, "pod-logs"),
		Socket: filepath.Join(c.Dir, "ack.sock"), NodeName: nodeName}
	b.Start(t)
	t.Cleanup(b.Stop)
	cs := unlimited(t, b.Socket)
	value := strings.Repeat("v", 256)
	lat := timeWrites(t, n, func(i int) error {
		_, err := cs.CoreV1().ConfigMaps("default").Create(context.Background(),
			&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ack-%d", i)}, Data: map[string]string{"k": value}}, metav1.CreateOptions{})
		return err
	})
	b.Stop()
	return ackSummary("ConfigMap create, live daemon", lat)
}

func benchAckPods(t *tb, n int) ackStats {
	dir, err := os.MkdirTemp("", "bootlet-bench-ack-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// A runtime endpoint nobody listens on: the daemon serves and stores,
	// and starts nothing.
	absent := &e2e.Containerd{Dir: dir, Socket: filepath.Join(dir, "absent.sock")}
	b := &e2e.Bootlet{Ctrd: absent, Dir: filepath.Join(dir, "root"), LogDir: filepath.Join(dir, "pod-logs"),
		Socket: filepath.Join(dir, "bootlet.sock"), NodeName: nodeName,
		// The writes outnumber the kubelet's 110 pods, which the daemon
		// holds by default: this measures the write path, not the limit.
		Args: []string{"--max-pods=0"}}
	b.Spawn(t)
	t.Cleanup(b.Stop)
	cs := unlimited(t, b.Socket)
	deadline := time.Now().Add(30 * time.Second)
	for {
		body, err := cs.CoreV1().RESTClient().Get().AbsPath("/healthz").DoRaw(context.Background())
		if err == nil && string(body) == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon without runtime never served: %v\n%s", err, b.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	lat := timeWrites(t, n, func(i int) error {
		_, err := cs.CoreV1().Pods("default").Create(context.Background(), benchPod(fmt.Sprintf("ack-%d", i)), metav1.CreateOptions{})
		return err
	})
	b.Stop()
	return ackSummary("Pod create, runtime not connected (API + checkpoint only)", lat)
}

// timeWrites runs 20 unmeasured writes, then n measured ones, one at a time.
func timeWrites(t *tb, n int, write func(i int) error) []time.Duration {
	var lat []time.Duration
	for i := -20; i < n; i++ {
		start := time.Now()
		if err := write(i + 20); err != nil {
			t.Fatalf("write %d: %v", i+20, err)
		}
		if i >= 0 {
			lat = append(lat, time.Since(start))
		}
	}
	return lat
}

func phase(lat, all, ready []time.Duration) phaseStats {
	s := phaseStats{P50: percentile(lat, 0.5), P90: percentile(lat, 0.9), Max: percentile(lat, 1), AllRunning: percentile(all, 0.5), N: len(lat), Reps: len(all)}
	if len(ready) > 0 {
		s.ReadyMs = percentile(ready, 0.5)
	}
	return s
}

func ackSummary(what string, lat []time.Duration) ackStats {
	return ackStats{What: what, P50: percentile(lat, 0.5), P90: percentile(lat, 0.9), P99: percentile(lat, 0.99), Max: percentile(lat, 1), N: len(lat)}
}

func printRecoveryTable(results []recoveryResult, ack, ackPod ackStats) {
	fmt.Printf("\n%-8s | %-30s | %-36s | %-40s | %s\n", "scenario", "cold p50/p90/all-running ms", "recovery p50/p90/all-running (ready)",
		"recovery/cold median [reps]", "load avg at end")
	fmt.Println(strings.Repeat("-", 150))
	for _, r := range results {
		mark := "ok"
		if r.MedianRatio > 1.2 {
			mark = "MISS"
		}
		fmt.Printf("%-8s | %-30s | %-36s | %-40s | %s\n", r.Name,
			fmt.Sprintf("%.0f/%.0f/%.0f (%d reps)", r.Cold.P50, r.Cold.P90, r.Cold.AllRunning, r.Cold.Reps),
			fmt.Sprintf("%.0f/%.0f/%.0f (ready %.0f)", r.Recovery.P50, r.Recovery.P90, r.Recovery.AllRunning, r.Recovery.ReadyMs),
			fmt.Sprintf("%.2f %-4s [%s]", r.MedianRatio, mark, fmtRatios(r.Ratios)), r.LoadAvgEnd)
	}
	fmt.Println("target: median of the per-repetition ratios recovery all-running / cold all-running <= 1.2")
	for _, a := range []ackStats{ack, ackPod} {
		fmt.Printf("ack %-58s p50 %5.2f ms  p90 %5.2f ms  p99 %5.2f ms  max %6.2f ms  (n=%d)\n", a.What+":", a.P50, a.P90, a.P99, a.Max, a.N)
	}
}
