//go:build e2e

package main

// The pods scenario (pods.json): pod start latency for bootlet, the kubelet and the raw CRI floor,
// interleaved; method and fields: docs/bench.md, "Pods: start latency (`_output/bench/pods.json`)".

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/e2e"
	"github.com/bootlet/bootlet/podapi"
	btypes "github.com/bootlet/bootlet/types"
)

// kubeletSettle is how long a freshly started kubelet is left alone before
// its repetition: long enough for its start-up housekeeping to finish, so
// that it is timed as the long-running agent it is on a node.
const kubeletSettle = 3 * time.Second

// contenderOrder is the order within every repetition.
var contenderOrder = []string{"bootlet", "kubelet", "cri_floor"}

// contender starts pods its own way.
type contender struct {
	name string
	// prepare runs before each repetition, untimed (the kubelet starts).
	prepare func(t *tb)
	// start starts every pod in names at once and returns, per name, the
	// moment its start was issued (the POST returned, the file was
	// written, the first CRI call was made).
	start func(t *tb, names []string) map[string]time.Time
	// cleanup removes the pods after each repetition, untimed, and leaves
	// the runtime empty.
	cleanup func(t *tb, names []string)
	// agent matches the contender's process for its CPU use (cpu.go).
	agent func(argv []string) bool
}

// podsRep is one repetition at one scale: every contender's p50, and
// bootlet's ratios to the others in this repetition.
type podsRep struct {
	Rep                int                `json:"rep"`
	P50                map[string]float64 `json:"p50_ms"`
	BootletOverFloor   float64            `json:"bootlet_over_floor,omitempty"`
	BootletOverKubelet float64            `json:"bootlet_over_kubelet,omitempty"`
	LoadAvg            loadAvg            `json:"loadavg"`
	// CPU is each contender's CPU use from its first start issued to its
	// last container RUNNING (cpu.go).
	CPU map[string]cpuUse `json:"cpu"`
}

type podsResult struct {
	Name     string `json:"name"`
	Pods     int    `json:"pods"`
	Bootlet  stats  `json:"bootlet"`
	Kubelet  stats  `json:"kubelet"`
	CRIFloor stats  `json:"cri_floor"`
	// Reps and the ratios: bootlet's p50 over the floor's and the
	// kubelet's, per repetition and their median.
	Reps                     []podsRep `json:"reps"`
	RatiosBootletOverFloor   []float64 `json:"ratios_bootlet_over_floor,omitempty"`
	MedianBootletOverFloor   float64   `json:"median_bootlet_over_floor,omitempty"`
	RatiosBootletOverKubelet []float64 `json:"ratios_bootlet_over_kubelet,omitempty"`
	MedianBootletOverKubelet float64   `json:"median_bootlet_over_kubelet,omitempty"`
	LoadAvgStart             loadAvg   `json:"loadavg_start"`
	LoadAvgEnd               loadAvg   `json:"loadavg_end"`
}

// benchPods is the pods scenario (pods.json).
func benchPods(t *tb, o options) {
	scales, reps := o.scalesOr([]int{1, 10, 50}), o.repsFor(5)
	loadStart := readLoadAvg(t)
	c := e2e.StartContainerd(t)
	ctx := context.Background()
	imgStatus, err := c.IS.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
	if err != nil || imgStatus.GetImage() == nil {
		t.Fatalf("image %s is not present: %v", image, err)
	}

	var contenders []contender
	for _, name := range contenderOrder {
		if !o.contenders[name] {
			continue
		}
		switch name {
		case "bootlet":
			contenders = append(contenders, bootletContender(t, c, o.bootletV))
		case "kubelet":
			contenders = append(contenders, kubeletContender(t, c))
		case "cri_floor":
			contenders = append(contenders, floorContender(t, c, imgStatus.Image.Id))
		}
	}
	if len(contenders) == 0 {
		t.Fatalf("-contenders: none of %v", contenderOrder)
	}

	var results []podsResult
	for _, pods := range scales {
		r := podsResult{Name: fmt.Sprintf("pods-%d", pods), Pods: pods, LoadAvgStart: readLoadAvg(t)}
		all := map[string][]time.Duration{}
		for rep := 1; rep <= reps; rep++ {
			rr := podsRep{Rep: rep, P50: map[string]float64{}, CPU: map[string]cpuUse{}}
			for _, ct := range contenders {
				names := make([]string, pods)
				for i := range names {
					names[i] = fmt.Sprintf("bench-%s-%d-r%d-p%d", strings.ReplaceAll(ct.name, "_", ""), pods, rep, i)
				}
				lat, cpu := runRound(t, c, ct, r.Name, names)
				rr.CPU[ct.name] = cpu
				all[ct.name] = append(all[ct.name], lat...)
				rr.P50[ct.name] = percentile(lat, 0.5)
			}
			rr.LoadAvg = readLoadAvg(t)
			rr.BootletOverFloor = ratio(rr.P50["bootlet"], rr.P50["cri_floor"])
			rr.BootletOverKubelet = ratio(rr.P50["bootlet"], rr.P50["kubelet"])
			if rr.BootletOverFloor > 0 {
				r.RatiosBootletOverFloor = append(r.RatiosBootletOverFloor, rr.BootletOverFloor)
			}
			if rr.BootletOverKubelet > 0 {
				r.RatiosBootletOverKubelet = append(r.RatiosBootletOverKubelet, rr.BootletOverKubelet)
			}
			r.Reps = append(r.Reps, rr)
			fmt.Printf("%-8s rep %d/%d  p50 ms: bootlet %7.1f  kubelet %7.1f  floor %7.1f  | bootlet/floor %.2f  bootlet/kubelet %.2f  | %s\n",
				r.Name, rep, reps, rr.P50["bootlet"], rr.P50["kubelet"], rr.P50["cri_floor"], rr.BootletOverFloor, rr.BootletOverKubelet, rr.LoadAvg)
			for _, ct := range contenders {
				u := rr.CPU[ct.name]
				fmt.Printf("         %-9s wall %6.2fs  CPU s: agent %5.2f  containerd %5.2f  machine %5.2f (of %.2f on %d CPUs)\n",
					ct.name, u.WallSeconds, u.AgentSeconds, u.ContainerdSeconds, u.MachineSeconds, u.WallSeconds*float64(runtime.NumCPU()), runtime.NumCPU())
			}
		}
		r.Bootlet, r.Kubelet, r.CRIFloor = summarize(all["bootlet"]), summarize(all["kubelet"]), summarize(all["cri_floor"])
		r.MedianBootletOverFloor = round(median(r.RatiosBootletOverFloor), 3)
		r.MedianBootletOverKubelet = round(median(r.RatiosBootletOverKubelet), 3)
		r.LoadAvgEnd = readLoadAvg(t)
		results = append(results, r)
	}

	if o.bootletV != "2" {
		// Keep the daemon log for profiling (-bootlet-v=4 has per-step timestamps).
		if data, err := os.ReadFile(filepath.Join(c.Dir, "bootlet-1.log")); err == nil {
			_ = os.MkdirAll(filepath.Join(e2e.Repo, "_output", "bench"), 0o755)
			_ = os.WriteFile(filepath.Join(e2e.Repo, "_output", "bench", "bootlet.log"), data, 0o644)
		}
	}
	out := writeJSON(t, "pods.json", map[string]any{
		"scenarios": results, "reps": reps, "contender_order": contenderOrder,
		"loadavg_start": loadStart, "loadavg_end": readLoadAvg(t),
	})
	printPodsTable(results)
	fmt.Printf("\nwrote %s\n", out)
}

// runRound runs one repetition of one contender: it starts every pod in
// names, times each until its container is RUNNING in CRI, and cleans up.
func runRound(t *tb, c *e2e.Containerd, ct contender, label string, names []string) ([]time.Duration, cpuUse) {
	if ct.prepare != nil {
		ct.prepare(t)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[btypes.StaticPodName(n, nodeName)] = true
	}
	running := make(chan map[string]time.Time, 1)
	stop := make(chan struct{})
	go func() { running <- watchRunning(c, want, stop) }()
	agent := ct.agent
	if agent == nil {
		agent = noAgent
	}
	m0 := markCPU(agent, c.Socket)
	issued := ct.start(t, names)
	var seen map[string]time.Time
	var cpu cpuUse
	select {
	case seen = <-running:
		cpu = markCPU(agent, c.Socket).since(m0)
	case <-time.After(120 * time.Second):
		close(stop)
		t.Fatalf("%s %s: pods not running after 120s", ct.name, label)
	}
	var lat []time.Duration
	for _, n := range names {
		lat = append(lat, seen[btypes.StaticPodName(n, nodeName)].Sub(issued[n]))
	}
	ct.cleanup(t, names)
	return lat, cpu
}

// bootletContender starts one daemon for every repetition.
func bootletContender(t *tb, c *e2e.Containerd, verbosity string) contender {
	ctx := context.Background()
	b := e2e.StartBootlet(t, c, "-v="+verbosity)
	return contender{name: "bootlet", agent: isBootletDaemon(b.Socket),
		start: func(t *tb, names []string) map[string]time.Time {
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
}

// kubeletContender runs the kubelet (static pods) for its repetitions only.
func kubeletContender(t *tb, c *e2e.Containerd) contender {
	k := e2e.NewKubelet(t, c)
	t.Cleanup(k.Stop)
	return contender{name: "kubelet", agent: isKubelet,
		prepare: func(t *tb) {
			k.Start(t)
			time.Sleep(kubeletSettle)
		},
		start: func(t *tb, names []string) map[string]time.Time {
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
			k.Stop()
		}}
}

// floorContender issues the CRI calls directly, with the configs bootlet's
// conversion (the kubelet's, per the parity test) makes for the same pod.
func floorContender(t *tb, c *e2e.Containerd, imageRef string) contender {
	ctx := context.Background()
	logDir := filepath.Join(c.Dir, "pod-logs")
	return contender{name: "cri_floor",
		start: func(t *tb, names []string) map[string]time.Time {
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
				rp := btypes.RuntimePod(pod, nodeName)
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
}

func printPodsTable(results []podsResult) {
	fmt.Printf("\n%-8s | %-24s | %-24s | %-24s | %-30s | %-30s | %s\n", "scenario", "bootlet p50/p90/max (n)", "kubelet p50/p90/max (n)",
		"cri floor p50/p90/max (n)", "bootlet/floor median [reps]", "bootlet/kubelet median [reps]", "load avg at end")
	fmt.Println(strings.Repeat("-", 190))
	cell := func(s stats) string { return fmt.Sprintf("%.0f/%.0f/%.0f (%d)", s.P50, s.P90, s.Max, s.N) }
	mark := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "MISS"
	}
	for _, r := range results {
		fmt.Printf("%-8s | %-24s | %-24s | %-24s | %-30s | %-30s | %s\n", r.Name, cell(r.Bootlet), cell(r.Kubelet), cell(r.CRIFloor),
			fmt.Sprintf("%.2f %-4s [%s]", r.MedianBootletOverFloor, mark(r.MedianBootletOverFloor <= 1.15), fmtRatios(r.RatiosBootletOverFloor)),
			fmt.Sprintf("%.2f %-4s [%s]", r.MedianBootletOverKubelet, mark(r.MedianBootletOverKubelet <= 0.7), fmtRatios(r.RatiosBootletOverKubelet)),
			r.LoadAvgEnd)
	}
	fmt.Println("targets: median bootlet/floor <= 1.15, median bootlet/kubelet <= 0.7 (per-repetition p50 ratios)")
}
