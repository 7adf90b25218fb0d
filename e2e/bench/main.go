//go:build e2e

// Command bench measures pod start latency on one private containerd for
// three contenders, one after the other: bootlet (API POST → container
// RUNNING in CRI), the kubelet with static pods (file written → RUNNING) and
// the raw CRI floor (RunPodSandbox+CreateContainer+StartContainer issued
// directly → RUNNING). Run from the repository root:
//
//	go run -tags e2e ./e2e/bench
//
// It writes _output/bench/pods.json and prints a table.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/e2e"
	"github.com/bootlet/bootlet/podapi"
	"github.com/bootlet/bootlet/shim"
)

const (
	image    = "docker.io/library/busybox:1.36"
	nodeName = "e2e-node"
	poll     = 10 * time.Millisecond
)

type scenario struct {
	name       string
	pods, reps int
}

type stats struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	Max float64 `json:"max_ms"`
	N   int     `json:"n"`
}

type result struct {
	Name     string `json:"name"`
	Bootlet  stats  `json:"bootlet"`
	Kubelet  stats  `json:"kubelet"`
	CRIFloor stats  `json:"cri_floor"`
}

// contender starts n pods named names at once and returns, per name, the
// moment its start was issued (the POST returned, the file was written, the
// first CRI call was made).
type contender struct {
	name    string
	start   func(t *tb, round int, names []string) map[string]time.Time
	cleanup func(t *tb, names []string)
}

func main() {
	verbosity := flag.String("bootlet-v", "2", "bootlet daemon -v level")
	only := flag.String("contenders", "bootlet,kubelet,cri_floor", "contenders to run (comma-separated)")
	suite := flag.String("suite", "pods,recovery,bootstrap", "suites to run (comma-separated): pods (pods.json), recovery (recovery.json, see recovery.go), bootstrap (bootstrap.json, see bootstrap.go)")
	flag.Parse()
	run := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		run[n] = true
	}
	t := &tb{}
	defer t.runCleanups()
	for _, s := range strings.Split(*suite, ",") {
		switch s {
		case "pods":
			benchPods(t, run, *verbosity)
		case "recovery":
			benchRecovery(t)
		case "bootstrap":
			benchBootstrap(t)
		default:
			t.Fatalf("unknown suite %q", s)
		}
	}
}

// benchPods is the pod start latency suite.
func benchPods(t *tb, run map[string]bool, verbosity string) {
	scenarios := []scenario{{"pods-1", 1, 10}, {"pods-10", 10, 3}, {"pods-50", 50, 1}}

	c := e2e.StartContainerd(t)
	ctx := context.Background()
	imgStatus, err := c.IS.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
	if err != nil || imgStatus.GetImage() == nil {
		t.Fatalf("image %s is not present: %v", image, err)
	}
	imageRef := imgStatus.Image.Id
	logDir := filepath.Join(c.Dir, "pod-logs")

	samples := map[string]map[string][]time.Duration{} // contender → scenario → latencies
	record := func(contender, sc string, d []time.Duration) {
		if samples[contender] == nil {
			samples[contender] = map[string][]time.Duration{}
		}
		samples[contender][sc] = append(samples[contender][sc], d...)
	}

	// (a) bootlet.
	if run["bootlet"] {
		b := e2e.StartBootlet(t, c, "-v="+verbosity)
		bootlet := contender{name: "bootlet",
			start: func(t *tb, round int, names []string) map[string]time.Time {
				return issueConcurrently(names, func(n string) time.Time {
					_, err := b.Client.CoreV1().Pods("default").Create(ctx, benchPod(n), metav1.CreateOptions{})
					now := time.Now()
					if err != nil {
						t.Fatalf("create %s: %v", n, err)
					}
					return now
				})
			},
			cleanup: func(t *tb, names []string) {
				for _, n := range names {
					if err := b.Client.CoreV1().Pods("default").Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
						t.Fatalf("delete %s: %v", n, err)
					}
				}
				waitEmpty(t, c, 60*time.Second, false)
			}}
		runContender(t, c, bootlet, scenarios, record)
		if verbosity != "2" {
			// Keep the daemon log for profiling (-bootlet-v=4 has per-step timestamps).
			if data, err := os.ReadFile(filepath.Join(c.Dir, "bootlet-1.log")); err == nil {
				_ = os.MkdirAll(filepath.Join(e2e.Repo, "_output", "bench"), 0o755)
				_ = os.WriteFile(filepath.Join(e2e.Repo, "_output", "bench", "bootlet.log"), data, 0o644)
			}
		}
		b.Stop()
		waitEmpty(t, c, 30*time.Second, true)
	}

	// (b) the kubelet, static pods.
	if run["kubelet"] {
		k := e2e.StartKubelet(t, c)
		kubelet := contender{name: "kubelet",
			start: func(t *tb, round int, names []string) map[string]time.Time {
				return issueConcurrently(names, func(n string) time.Time {
					data, err := json.Marshal(benchPod(n))
					if err != nil {
						t.Fatal(err)
					}
					k.WriteManifest(t, n, string(data))
					return time.Now()
				})
			},
			cleanup: func(t *tb, names []string) {
				k.RemoveManifests(t)
				waitEmpty(t, c, 60*time.Second, true)
			}}
		runContender(t, c, kubelet, scenarios, record)
		k.Stop()
		waitEmpty(t, c, 30*time.Second, true)
	}

	// (c) the raw CRI floor, with the configs bootlet's conversion (the
	// kubelet's, per the parity test) makes for the same pod.
	floor := contender{name: "cri_floor",
		start: func(t *tb, round int, names []string) map[string]time.Time {
			type prepared struct {
				sb *runtimeapi.PodSandboxConfig
				ct *runtimeapi.ContainerConfig
			}
			preps := map[string]prepared{}
			for _, n := range names {
				pod, err := podapi.DefaultPod(benchPod(n), nodeName)
				if err != nil {
					t.Fatal(err)
				}
				rp := shim.RuntimePod(pod, nodeName)
				sb, err := cri.SandboxConfig(rp, 0, cri.SandboxOptions{PodLogsDir: logDir, CgroupDriver: cri.CgroupDriverCgroupfs})
				if err != nil {
					t.Fatal(err)
				}
				// The same two file mounts bootlet and the kubelet give the
				// container (/etc/hosts, the termination-log file).
				dir := filepath.Join(c.Dir, "floor", string(pod.UID))
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				for _, f := range []string{"etc-hosts", "termination-log"} {
					if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				mounts := []*runtimeapi.Mount{{HostPath: filepath.Join(dir, "etc-hosts"), ContainerPath: "/etc/hosts"},
					{HostPath: filepath.Join(dir, "termination-log"), ContainerPath: "/dev/termination-log"}}
				ct, err := cri.ContainerConfig(rp, &rp.Spec.Containers[0], 0, cri.ContainerOptions{PodLogsDir: logDir, ImageRef: imageRef, Mounts: mounts})
				if err != nil {
					t.Fatal(err)
				}
				preps[n] = prepared{sb, ct}
			}
			return issueConcurrently(names, func(n string) time.Time {
				p := preps[n]
				issued := time.Now()
				if err := os.MkdirAll(filepath.Join(p.sb.LogDirectory, "main"), 0o755); err != nil {
					t.Fatal(err)
				}
				id, err := c.RT.RunPodSandbox(ctx, p.sb, "")
				if err != nil {
					t.Fatalf("RunPodSandbox %s: %v", n, err)
				}
				cid, err := c.RT.CreateContainer(ctx, id, p.ct, p.sb)
				if err != nil {
					t.Fatalf("CreateContainer %s: %v", n, err)
				}
				if err := c.RT.StartContainer(ctx, cid); err != nil {
					t.Fatalf("StartContainer %s: %v", n, err)
				}
				return issued
			})
		},
		cleanup: func(t *tb, names []string) { waitEmpty(t, c, 30*time.Second, true) }}
	if run["cri_floor"] {
		runContender(t, c, floor, scenarios, record)
	}

	var results []result
	for _, sc := range scenarios {
		results = append(results, result{Name: sc.name,
			Bootlet: summarize(samples["bootlet"][sc.name]), Kubelet: summarize(samples["kubelet"][sc.name]),
			CRIFloor: summarize(samples["cri_floor"][sc.name])})
	}
	out := filepath.Join(e2e.Repo, "_output", "bench", "pods.json")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := json.MarshalIndent(map[string]any{"scenarios": results}, "", "  ")
	if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	printTable(results)
	fmt.Printf("\nwrote %s\n", out)
}

// runContender runs every scenario's rounds for one contender, measuring
// each pod from its start until its container is RUNNING in CRI.
// issueConcurrently runs issue for every name at once and collects the
// moment each start was issued, as issue reports it.
func issueConcurrently(names []string, issue func(name string) time.Time) map[string]time.Time {
	issued := make(map[string]time.Time, len(names))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		go func(n string) {
			defer wg.Done()
			at := issue(n)
			mu.Lock()
			issued[n] = at
			mu.Unlock()
		}(n)
	}
	wg.Wait()
	return issued
}

func runContender(t *tb, c *e2e.Containerd, ct contender, scenarios []scenario, record func(string, string, []time.Duration)) {
	round := 0
	for _, sc := range scenarios {
		for rep := 0; rep < sc.reps; rep++ {
			round++
			names := make([]string, sc.pods)
			for i := range names {
				names[i] = fmt.Sprintf("bench-%s-r%d-p%d", strings.ReplaceAll(ct.name, "_", ""), round, i)
			}
			want := map[string]bool{}
			for _, n := range names {
				want[shim.StaticPodName(n, nodeName)] = true
			}
			running := make(chan map[string]time.Time, 1)
			stop := make(chan struct{})
			go func() { running <- watchRunning(c, want, stop) }()
			issued := ct.start(t, round, names)
			var seen map[string]time.Time
			select {
			case seen = <-running:
			case <-time.After(120 * time.Second):
				close(stop)
				t.Fatalf("%s %s round %d: pods not running after 120s", ct.name, sc.name, rep)
			}
			var lat []time.Duration
			for _, n := range names {
				lat = append(lat, seen[shim.StaticPodName(n, nodeName)].Sub(issued[n]))
			}
			record(ct.name, sc.name, lat)
			s := summarize(lat)
			fmt.Fprintf(os.Stderr, "%-9s %-7s rep %2d: p50 %7.1f ms  max %7.1f ms\n", ct.name, sc.name, rep+1, s.P50, s.Max)
			ct.cleanup(t, names)
		}
	}
}

// watchRunning polls ListContainers every 10 ms and returns when every pod
// in want has a RUNNING container, with the first time each was seen so.
func watchRunning(c *e2e.Containerd, want map[string]bool, stop chan struct{}) map[string]time.Time {
	seen := map[string]time.Time{}
	filter := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		cs, err := c.RT.ListContainers(context.Background(), filter)
		now := time.Now()
		if err == nil {
			for _, ct := range cs {
				name := ct.Labels[cri.LabelPodName]
				if want[name] {
					if _, ok := seen[name]; !ok {
						seen[name] = now
					}
				}
			}
		}
		if len(seen) == len(want) {
			return seen
		}
		select {
		case <-stop:
			return seen
		case <-tick.C:
		}
	}
}

// waitEmpty waits until the runtime has no sandboxes left; with force it
// also stops and removes them itself (errors from races with the owner
// are ignored; only the end state counts).
func waitEmpty(t *tb, c *e2e.Containerd, timeout time.Duration, force bool) {
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		sbs, err := c.RT.ListPodSandbox(ctx, nil)
		if err == nil && len(sbs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("runtime not empty after %s: %d sandboxes (%v)", timeout, len(sbs), err)
		}
		if force {
			for _, sb := range sbs {
				_ = c.RT.StopPodSandbox(ctx, sb.Id)
				_ = c.RT.RemovePodSandbox(ctx, sb.Id)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func benchPod(name string) *v1.Pod {
	return &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uuid.NewUUID())},
		Spec: v1.PodSpec{
			HostNetwork:                   true,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers:                    []v1.Container{{Name: "main", Image: image, Command: []string{"sleep", "infinity"}}},
		},
	}
}

func summarize(d []time.Duration) stats {
	if len(d) == 0 {
		return stats{}
	}
	ms := make([]float64, len(d))
	for i, x := range d {
		ms[i] = float64(x.Microseconds()) / 1000
	}
	sort.Float64s(ms)
	pct := func(p float64) float64 {
		i := int(p*float64(len(ms))+0.5) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(ms) {
			i = len(ms) - 1
		}
		return ms[i]
	}
	return stats{P50: pct(0.5), P90: pct(0.9), Max: ms[len(ms)-1], N: len(ms)}
}

func printTable(results []result) {
	fmt.Printf("\n%-8s | %-26s | %-26s | %-26s | %-14s | %-14s\n", "scenario", "bootlet p50/p90/max ms (n)", "kubelet p50/p90/max ms (n)", "cri floor p50/p90/max (n)", "bootlet/floor", "bootlet/kubelet")
	fmt.Println(strings.Repeat("-", 130))
	cell := func(s stats) string { return fmt.Sprintf("%.0f/%.0f/%.0f (%d)", s.P50, s.P90, s.Max, s.N) }
	for _, r := range results {
		rf, rk := r.Bootlet.P50/r.CRIFloor.P50, r.Bootlet.P50/r.Kubelet.P50
		mark := func(ok bool) string {
			if ok {
				return "ok"
			}
			return "MISS"
		}
		fmt.Printf("%-8s | %-26s | %-26s | %-26s | %5.2f (%-4s)   | %5.2f (%-4s)\n", r.Name, cell(r.Bootlet), cell(r.Kubelet), cell(r.CRIFloor),
			rf, mark(rf <= 1.15), rk, mark(rk <= 0.7))
	}
	fmt.Println("targets: bootlet p50 <= 1.15 x CRI floor, <= 0.7 x kubelet")
}
