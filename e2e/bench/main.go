//go:build e2e

// Command bench is `make bench`: bootlet against the kubelet and the raw CRI floor, one JSON file
// per scenario under _output/bench and, with -data (which `make bench` passes), a copy in the
// repository under docs/records/data/<date>/, where the records and the plots read it. Scenarios,
// flags and method: docs/bench.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
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
)

const (
	image    = "docker.io/library/busybox:1.36"
	nodeName = "e2e-node"
	poll     = 10 * time.Millisecond
)

// scenario is one `make bench` scenario: run measures, prints its table and
// writes its <name>.json (writeJSON). Everything it registers with
// t.Cleanup is torn down before the next scenario starts.
type scenario struct {
	name string
	run  func(t *tb, o options)
}

// scenarios run in this order. To add one, write its run func in its own
// file and add a line here.
var scenarios = []scenario{
	{"pods", benchPods},         // pods.go: pod start latency, pods.json
	{"recovery", benchRecovery}, // recovery.go: recovery after a reboot, recovery.json
	{"footprint", benchFootprint},
	{"bootstrap", benchBootstrap}, // bootstrap.go: control plane to /readyz, bootstrap.json
	{"handoff", benchHandoff},     // handoff.go: adoption, pivot, reboot with the real kubelet, handoff.json
	{"faults", benchFaults},       // faults.go: a process SIGKILLed at a random moment of the lifecycle, faults.json
}

// options are the command-line settings every scenario honours.
type options struct {
	// reps overrides every scenario's repetitions per scale (-reps); 0
	// keeps each scenario's default, which is at least 5 (handoff: 3, each
	// repetition being a whole lifecycle of about 2 minutes).
	reps int
	// scales overrides the pod counts (-scales); nil keeps the defaults.
	scales []int
	// contenders restricts the pods scenario's contenders (-contenders).
	contenders map[string]bool
	// bootletV is the daemon's -v in the pods scenario (-bootlet-v).
	bootletV string
	// pivots, upgrades: handoff scenario, the zero-failed-requests proof
	// (zero.go): the
	// pivots in all (each repetition's, then fresh first boots up to
	// pivots) and the rolling updates of the apiserver DaemonSet on the
	// last repetition's node.
	pivots, upgrades int
}

// repsFor is the number of repetitions per scale: -reps, or def.
func (o options) repsFor(def int) int {
	if o.reps > 0 {
		return o.reps
	}
	return def
}

// scalesOr is the list of pod counts: -scales, or def.
func (o options) scalesOr(def []int) []int {
	if len(o.scales) > 0 {
		return o.scales
	}
	return def
}

// selectScenarios keeps the scenarios named in only (comma-separated; all
// when empty), in table order.
func selectScenarios(table []scenario, only string) ([]scenario, error) {
	if strings.TrimSpace(only) == "" {
		return table, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []scenario
	for _, s := range table {
		if want[s.name] {
			out = append(out, s)
			delete(want, s.name)
		}
	}
	if len(want) > 0 {
		var known, unknown []string
		for _, s := range table {
			known = append(known, s.name)
		}
		for n := range want {
			unknown = append(unknown, n)
		}
		return nil, fmt.Errorf("unknown scenario(s) %v; known: %s", unknown, strings.Join(known, ","))
	}
	return out, nil
}

func main() {
	only := flag.String("only", "", "scenarios to run, comma-separated (default all: "+names()+")")
	reps := flag.Int("reps", 0, "repetitions per scale for every scenario (default: each scenario's own, at least 5, handoff 3); lower it for a quick check")
	scales := flag.String("scales", "", "pod counts, comma-separated (default: 1,10,50; footprint 10,50)")
	contenders := flag.String("contenders", "bootlet,kubelet,cri_floor", "pods scenario: contenders to run (comma-separated)")
	verbosity := flag.String("bootlet-v", "2", "pods scenario: bootlet daemon -v level (not 2: the daemon log is kept in _output/bench/bootlet.log)")
	pivots := flag.Int("pivots", 20, "handoff scenario: pivots in all under the probe clients (each repetition's, then fresh first boots); fewer for a quick check")
	upgrades := flag.Int("upgrades", 20, "handoff scenario: rolling updates of the apiserver DaemonSet under the probe clients, on the last repetition's node; 0 for none")
	flag.StringVar(&dataDir, "data", "", "also write each JSON file into this directory (make bench: docs/records/data/<date>, which the records and the plots read); empty: _output/bench only, so that a quick check leaves the records alone")
	flag.Parse()

	t := &tb{}
	defer t.runCleanups()
	selected, err := selectScenarios(scenarios, *only)
	if err != nil {
		t.Fatal(err)
	}
	if *reps < 0 {
		t.Fatalf("-reps %d: want >= 1 (or 0 for the defaults)", *reps)
	}
	if *pivots < 0 || *upgrades < 0 {
		t.Fatalf("-pivots %d -upgrades %d: want >= 0", *pivots, *upgrades)
	}
	o := options{reps: *reps, bootletV: *verbosity, contenders: map[string]bool{}, pivots: *pivots, upgrades: *upgrades}
	if o.scales, err = parseScales(*scales); err != nil {
		t.Fatal(err)
	}
	for _, n := range strings.Split(*contenders, ",") {
		o.contenders[strings.TrimSpace(n)] = true
	}

	began := time.Now()
	for _, s := range selected {
		start := time.Now()
		fmt.Printf("\n=== %s (%s)\n", s.name, readLoadAvg(t))
		s.run(t, o)
		t.runCleanups()
		fmt.Printf("=== %s took %s (%s)\n", s.name, time.Since(start).Round(time.Second), readLoadAvg(t))
	}
	fmt.Printf("\nbench took %s\n", time.Since(began).Round(time.Second))
}

func names() string {
	var out []string
	for _, s := range scenarios {
		out = append(out, s.name)
	}
	return strings.Join(out, ",")
}

// dataDir is -data: where the JSON files are kept beside _output/bench, the
// campaign's data directory in the repository (docs/records/data/<date>).
var dataDir string

// writeJSON writes v to _output/bench/<file>, the working copy the logs sit
// beside, and to dataDir/<file> when -data is set. It returns the last path
// written.
func writeJSON(t *tb, file string, v any) string {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	dirs := []string{filepath.Join(e2e.Repo, "_output", "bench")}
	if dataDir != "" {
		dirs = append(dirs, dataDir)
	}
	var out string
	for _, dir := range dirs {
		out = filepath.Join(dir, file)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

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

// benchPod is the pod every scenario runs: hostNetwork busybox sleeping,
// image already present, no probes.
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
