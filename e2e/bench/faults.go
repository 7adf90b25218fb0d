//go:build e2e

package main

// The faults scenario (-only faults, faults.json): the lifecycle must survive
// a crash at any moment, since a node's processes die when they do. Each trial
// is e2e.RunFaultTrial: a fresh node, the lifecycle up to a random step, one
// process SIGKILLed at a random moment of it and restarted by the
// "supervisor", then the checks. Method and the bound:
// docs/bench.md, "Faults at any moment (`_output/bench/faults.json`)".

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/bootlet/bootlet/e2e"
)

var (
	faultTrials  = flag.Int("fault-trials", 30, "faults scenario: number of trials")
	faultSeed    = flag.Int64("fault-seed", 0, "faults scenario: the random seed (0: from the clock; the seed used is printed and recorded)")
	faultSteps   = flag.String("fault-steps", "", "faults scenario: restrict the steps (comma-separated; default all)")
	faultVictims = flag.String("fault-victims", "", "faults scenario: restrict the victims (comma-separated: bootlet,kubelet,containerd,container; default all)")
	faultAt      = flag.Duration("fault-at", -1, "faults scenario: the fault's moment from the step's start, for a replay (default: random within the step's window)")
)

// trialFatal is the panic of a trial's fatal failure (trialTB).
type trialFatal struct{ msg string }

// trialTB is one trial's tb: a fatal failure ends the trial, not the bench
// (the framework's helpers call Fatalf on the trial's own goroutine), and
// the trial's cleanups stop its node.
type trialTB struct{ *tb }

func (t *trialTB) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(os.Stderr, "bench: trial FAILED: %s\n", msg)
	t.mu.Lock()
	t.failed = true
	t.mu.Unlock()
	panic(trialFatal{msg})
}
func (t *trialTB) Fatal(args ...any)                 { t.Fatalf("%s", fmt.Sprint(args...)) }
func (t *trialTB) Errorf(format string, args ...any) { t.Fatalf(format, args...) }
func (t *trialTB) Error(args ...any)                 { t.Fatalf("%s", fmt.Sprint(args...)) }
func (t *trialTB) FailNow()                          { t.Fatalf("FailNow") }

// faultTrialRecord is a trial in faults.json: the result, or the failure of
// its setup (before the fault: not a finding about faults, but reported).
type faultTrialRecord struct {
	e2e.FaultResult
	OK           bool    `json:"ok"`
	SetupFailure string  `json:"setup_failure,omitempty"`
	LoadAvgStart loadAvg `json:"loadavg_start"`
	LoadAvgEnd   loadAvg `json:"loadavg_end"`
}

func benchFaults(t *tb, o options) {
	seed := *faultSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	rng := rand.New(rand.NewSource(seed))
	steps, err := pickList(*faultSteps, e2e.FaultSteps)
	if err != nil {
		t.Fatal(err)
	}
	trials := *faultTrials
	loadStart := readLoadAvg(t)
	fmt.Fprintf(os.Stderr, "faults: %d trials, seed %d, steps %v, bound %s; %s\n", trials, seed, steps, e2e.FaultConvergeBound, loadStart)
	var out []faultTrialRecord
	write := func() string {
		ok, converged, setup := 0, 0, 0
		for _, r := range out {
			if r.OK {
				ok++
			}
			if r.Converged {
				converged++
			}
			if r.SetupFailure != "" {
				setup++
			}
		}
		return writeJSON(t, "faults.json", map[string]any{
			"trials": len(out), "trials_planned": trials, "ok": ok, "converged": converged, "setup_failures": setup,
			"seed": seed, "converge_bound_seconds": e2e.FaultConvergeBound.Seconds(),
			"loadavg_start": loadStart, "loadavg_end": readLoadAvg(t), "cpus": runtime.NumCPU(),
			"results": out,
			"method": "each trial: a fresh node (containerd, bootlet, kubelet v1.36.3); the lifecycle up to a random step; " +
				"at a random moment of its window one process SIGKILLed (bootlet, the kubelet, containerd, or a running control-plane container) " +
				"and started again after its unit's RestartSec (dist/systemd), as is any service that exits after the fault (a container: by its runner); ok = self-hosted again within the bound, " +
				"every ConfigMap the apiserver acknowledged (written every 100 ms before and during the step) still there, " +
				"and every container running at the fault still running unless it is the victim or its pod was stopped by the lifecycle",
		})
	}
	for i := 1; i <= trials; i++ {
		step := steps[rng.Intn(len(steps))]
		victims, err := pickList(*faultVictims, e2e.FaultVictims(step))
		if err != nil {
			t.Fatal(err)
		}
		if len(victims) == 0 { // the kubelet alone asked for, in a first boot
			victims = e2e.FaultVictims(step)
		}
		victim := victims[rng.Intn(len(victims))]
		killAfter := time.Duration(rng.Int63n(int64(step.Window())))
		if *faultAt >= 0 {
			killAfter = *faultAt
		}
		rec := faultTrialRecord{LoadAvgStart: readLoadAvg(t)}
		fmt.Fprintf(os.Stderr, "faults trial %d/%d: step %s, victim %s, at +%s (%s)\n", i, trials, step, victim, killAfter.Round(time.Millisecond), rec.LoadAvgStart)
		rec.FaultResult = runTrial(i, rng, step, victim, killAfter, &rec.SetupFailure)
		rec.OK = rec.SetupFailure == "" && rec.FaultResult.OK()
		rec.LoadAvgEnd = readLoadAvg(t)
		out = append(out, rec)
		fmt.Fprintf(os.Stderr, "faults trial %d: ok=%v converged=%v in %.1fs (%s) killed %q at +%.1fs; ConfigMaps %d acknowledged, %d lost; %d containers running at the fault, restarted %v; supervisor restarts %v%s\n",
			i, rec.OK, rec.Converged, rec.ConvergeSeconds, rec.NotConverged, rec.Target, rec.KilledAfter, rec.ConfigMapsAcked, len(rec.ConfigMapsLost),
			rec.RunningAtFault, rec.Restarted, rec.SupervisorRestarts, setupSuffix(rec.SetupFailure))
		write() // after every trial: a cut-off run keeps what it measured
	}
	path := write()
	bad := 0
	fmt.Printf("\nfaults (%d trials, seed %d, bound %s to self-hosted from the fault)\n", len(out), seed, e2e.FaultConvergeBound)
	fmt.Printf("  %-5s %-22s %-10s %8s %9s %10s %6s %s\n", "trial", "step", "victim", "at", "converge", "acked/lost", "ok", "restarted / why")
	for _, r := range out {
		if !r.OK {
			bad++
		}
		why := strings.Join(r.Restarted, ",")
		if !r.Converged {
			why = firstLine(r.NotConverged)
		}
		if r.SetupFailure != "" {
			why = "setup: " + firstLine(r.SetupFailure)
		}
		fmt.Printf("  %-5d %-22s %-10s %7.1fs %8.1fs %5d/%-4d %6v %s\n", r.Trial, r.Step, r.Victim, r.KilledAfter, r.ConvergeSeconds, r.ConfigMapsAcked, len(r.ConfigMapsLost), r.OK, why)
	}
	fmt.Printf("  %d of %d trials ok\nwrote %s\n", len(out)-bad, len(out), path)
	if bad > 0 {
		t.Fatalf("faults: %d of %d trials did not converge, lost an object or restarted a container (%s)", bad, len(out), path)
	}
}

// runTrial runs one trial on its own tb; a fatal failure of its setup is
// recorded in setupFailure.
func runTrial(i int, rng *rand.Rand, step e2e.FaultStep, victim string, killAfter time.Duration, setupFailure *string) (res e2e.FaultResult) {
	tt := &trialTB{tb: &tb{}}
	res = e2e.FaultResult{Trial: i, Step: step, Victim: victim}
	defer tt.runCleanups()
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(trialFatal)
			if !ok {
				panic(p)
			}
			*setupFailure = f.msg
			if len(*setupFailure) > 3000 {
				*setupFailure = (*setupFailure)[:3000] + " ..."
			}
		}
	}()
	return e2e.RunFaultTrial(tt, rng, i, step, victim, killAfter)
}

// pickList keeps the items of all named in the comma-separated list (all
// when it is empty); an unknown name is an error.
func pickList[T ~string](list string, all []T) ([]T, error) {
	if strings.TrimSpace(list) == "" {
		return all, nil
	}
	var out []T
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		var known []string
		found := false
		for _, a := range all {
			known = append(known, string(a))
			if string(a) == n {
				found = true
				if !slices.Contains(out, a) {
					out = append(out, a)
				}
			}
		}
		if !found && !slices.Contains(e2e.FaultVictims(e2e.StepPivot), n) {
			return nil, fmt.Errorf("unknown %q; known: %s", n, strings.Join(known, ","))
		}
	}
	return out, nil
}

func setupSuffix(s string) string {
	if s == "" {
		return ""
	}
	return "; SETUP FAILED: " + firstLine(s)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
