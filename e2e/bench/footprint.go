//go:build e2e

package main

// The footprint scenario (-only footprint, footprint.json): bootlet's and the kubelet's resident memory
// running the same pods; method and fields: docs/bench.md, "Footprint (`_output/bench/footprint.json`)".

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/e2e"
	btypes "github.com/bootlet/bootlet/types"
)

const (
	// footprintSettle lets start-up allocations be collected and the
	// sync loops reach their steady state before the first sample.
	footprintSettle  = 10 * time.Second
	footprintSamples = 5
)

type footprintRow struct {
	Pods           int       `json:"pods"`
	BootletRSSMiB  float64   `json:"bootlet_rss_mib"`
	KubeletRSSMiB  float64   `json:"kubelet_rss_mib"`
	BootletSamples []float64 `json:"bootlet_rss_samples_mib"`
	KubeletSamples []float64 `json:"kubelet_rss_samples_mib"`
	BootletHWMMiB  float64   `json:"bootlet_hwm_mib"`
	KubeletHWMMiB  float64   `json:"kubelet_hwm_mib"`
	// The two parts of the RSS (medians of the same samples): heap, stacks
	// and runtime (RssAnon); pages of the binary and libraries (RssFile).
	BootletAnonMiB float64 `json:"bootlet_rss_anon_mib"`
	BootletFileMiB float64 `json:"bootlet_rss_file_mib"`
	KubeletAnonMiB float64 `json:"kubelet_rss_anon_mib"`
	KubeletFileMiB float64 `json:"kubelet_rss_file_mib"`
	LoadAvg        loadAvg `json:"loadavg"`
}

// benchFootprint is the footprint scenario (footprint.json). -reps does not
// apply: each measurement is already the median of several samples, and
// RSS does not drift with the background load as latency does.
func benchFootprint(t *tb, o options) {
	scales := o.scalesOr([]int{10, 50})
	loadStart := readLoadAvg(t)
	c := e2e.StartContainerd(t)
	k := e2e.NewKubelet(t, c)
	t.Cleanup(k.Stop)
	ctx := context.Background()

	var rows []footprintRow
	for i, pods := range scales {
		row := footprintRow{Pods: pods}
		names := make([]string, pods)
		want := map[string]bool{}
		for j := range names {
			names[j] = fmt.Sprintf("fp-%d-p%d", pods, j)
			want[btypes.StaticPodName(names[j], nodeName)] = true
		}

		// bootlet: a fresh daemon with the pods created through its API.
		b := &e2e.Bootlet{Ctrd: c, Dir: filepath.Join(c.Dir, fmt.Sprintf("bootlet-fp-%d", i)), LogDir: filepath.Join(c.Dir, "pod-logs"),
			Socket: filepath.Join(c.Dir, fmt.Sprintf("fp-%d.sock", i)), NodeName: nodeName}
		b.Start(t)
		t.Cleanup(b.Stop)
		startAll(t, c, want, func(n string) {
			if _, err := b.Client.CoreV1().Pods("default").Create(ctx, benchPod(n), metav1.CreateOptions{}); err != nil {
				t.Fatalf("create %s: %v", n, err)
			}
		}, names)
		waitAPIRunning(t, b, names, map[string]string{}, 120*time.Second)
		bs := sampleRSS(t, "bootlet", b.PID())
		row.BootletSamples, row.BootletRSSMiB, row.BootletHWMMiB, row.BootletAnonMiB, row.BootletFileMiB = bs.samples, bs.med, bs.hwm, bs.anon, bs.file
		for _, n := range names {
			if err := b.Client.CoreV1().Pods("default").Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
				t.Fatalf("delete %s: %v", n, err)
			}
		}
		waitEmpty(t, c, 120*time.Second, false)
		b.Stop()

		// The kubelet: a fresh process with the same pods as static pods.
		k.Start(t)
		startAll(t, c, want, func(n string) {
			data, err := json.Marshal(benchPod(n))
			if err != nil {
				t.Fatal(err)
			}
			k.WriteManifest(t, n, string(data))
		}, names)
		ks := sampleRSS(t, "kubelet", k.PID())
		row.KubeletSamples, row.KubeletRSSMiB, row.KubeletHWMMiB, row.KubeletAnonMiB, row.KubeletFileMiB = ks.samples, ks.med, ks.hwm, ks.anon, ks.file
		k.RemoveManifests(t)
		waitEmpty(t, c, 120*time.Second, true)
		k.Stop()

		row.LoadAvg = readLoadAvg(t)
		fmt.Printf("footprint %3d pods: bootlet RSS %.1f MiB (anon %.1f, file %.1f; samples %v, peak %.1f)  kubelet RSS %.1f MiB (anon %.1f, file %.1f; samples %v, peak %.1f) | %s\n",
			pods, row.BootletRSSMiB, row.BootletAnonMiB, row.BootletFileMiB, row.BootletSamples, row.BootletHWMMiB,
			row.KubeletRSSMiB, row.KubeletAnonMiB, row.KubeletFileMiB, row.KubeletSamples, row.KubeletHWMMiB, row.LoadAvg)
		rows = append(rows, row)
	}

	out := writeJSON(t, "footprint.json", map[string]any{"scenarios": rows, "settle_s": footprintSettle.Seconds(),
		"samples": footprintSamples, "loadavg_start": loadStart, "loadavg_end": readLoadAvg(t)})
	fmt.Printf("\n%-6s | %-16s | %-16s | %-16s | %s\n", "pods", "bootlet RSS MiB", "kubelet RSS MiB", "bootlet/kubelet", "load avg")
	fmt.Println(strings.Repeat("-", 90))
	for _, r := range rows {
		fmt.Printf("%-6d | %-16.1f | %-16.1f | %-16.2f | %s\n", r.Pods, r.BootletRSSMiB, r.KubeletRSSMiB, ratio(r.BootletRSSMiB, r.KubeletRSSMiB), r.LoadAvg)
	}
	fmt.Printf("target: bootlet RSS <= 40 MiB with 10 running pods\n\nwrote %s\n", out)
}

// startAll starts every pod in names at once with start and waits until
// CRI has a RUNNING container for each.
func startAll(t *tb, c *e2e.Containerd, want map[string]bool, start func(name string), names []string) {
	running := make(chan map[string]time.Time, 1)
	stop := make(chan struct{})
	go func() { running <- watchRunning(c, want, stop) }()
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func(n string) {
			defer wg.Done()
			start(n)
		}(n)
	}
	wg.Wait()
	select {
	case <-running:
	case <-time.After(180 * time.Second):
		close(stop)
		t.Fatalf("footprint: %d pods not RUNNING after 180s", len(names))
	}
}

// rssSample is what sampleRSS measured, in MiB.
type rssSample struct {
	samples    []float64 // VmRSS
	med, hwm   float64   // median VmRSS; VmHWM at the end
	anon, file float64   // medians of RssAnon and RssFile
}

// sampleRSS waits footprintSettle, then reads the process's VmRSS, RssAnon
// and RssFile footprintSamples times, 1 s apart. It returns the VmRSS
// samples, the medians and the process's VmHWM at the end.
func sampleRSS(t *tb, who string, pid int) rssSample {
	if pid == 0 {
		t.Fatalf("footprint: %s is not running", who)
	}
	time.Sleep(footprintSettle)
	var r rssSample
	var anon, file []float64
	for i := 0; i < footprintSamples; i++ {
		if i > 0 {
			time.Sleep(time.Second)
		}
		for _, f := range []struct {
			field string
			to    *[]float64
		}{{"VmRSS", &r.samples}, {"RssAnon", &anon}, {"RssFile", &file}} {
			v, err := statusMiB(pid, f.field)
			if err != nil {
				t.Fatalf("footprint: %s: %v", who, err)
			}
			*f.to = append(*f.to, v)
		}
	}
	hwm, err := statusMiB(pid, "VmHWM")
	if err != nil {
		t.Fatalf("footprint: %s: %v", who, err)
	}
	r.med, r.hwm, r.anon, r.file = round(median(r.samples), 1), hwm, round(median(anon), 1), round(median(file), 1)
	return r
}
