//go:build e2e

package main

// CPU accounting of a pods repetition: how much CPU the node agent (bootlet's
// daemon, the kubelet), containerd's daemon and the whole machine spent
// between the first start issued and the last container RUNNING. It says
// whether bootlet's time goes to its own work or to waiting on the runtime
// (what it showed at 50 pods:
// docs/records/2026-11-27-pods-and-bootstrap.md, "Details").

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc's CPU times (100 on Linux).
const clockTicks = 100

// cpuUse is the CPU seconds spent in one repetition's window.
type cpuUse struct {
	WallSeconds       float64 `json:"wall_seconds"`
	AgentSeconds      float64 `json:"agent_cpu_seconds"`      // bootlet's daemon or the kubelet; the floor: none
	ContainerdSeconds float64 `json:"containerd_cpu_seconds"` // the containerd daemon (not its shims, runc)
	MachineSeconds    float64 `json:"machine_cpu_seconds"`    // every process, all CPUs (from /proc/stat)
}

// cpuMark is a reading at one moment.
type cpuMark struct {
	at                      time.Time
	agent, ctrd, machine    float64
	agentPID, containerdPID int
}

// markCPU reads the CPU times of the agent process (matched by agent), of
// the containerd serving socket, and of the machine.
func markCPU(agent func(argv []string) bool, socket string) cpuMark {
	m := cpuMark{at: time.Now(), machine: machineBusy()}
	m.agentPID = findProc(agent)
	m.containerdPID = findProc(func(argv []string) bool {
		return filepath.Base(argv[0]) == "containerd" && strings.Contains(strings.Join(argv, " "), socket)
	})
	m.agent, m.ctrd = procCPU(m.agentPID), procCPU(m.containerdPID)
	return m
}

// since is the use from m0 to m; a process that changed between the two
// readings (the kubelet restarts each repetition) counts as unknown (0).
func (m cpuMark) since(m0 cpuMark) cpuUse {
	u := cpuUse{WallSeconds: m.at.Sub(m0.at).Seconds(), MachineSeconds: m.machine - m0.machine}
	if m.agentPID != 0 && m.agentPID == m0.agentPID {
		u.AgentSeconds = m.agent - m0.agent
	}
	if m.containerdPID != 0 && m.containerdPID == m0.containerdPID {
		u.ContainerdSeconds = m.ctrd - m0.ctrd
	}
	return u
}

func isBootletDaemon(socket string) func([]string) bool {
	return func(argv []string) bool {
		return filepath.Base(argv[0]) == "bootlet" && len(argv) > 1 && argv[1] == "daemon" && strings.Contains(strings.Join(argv, " "), socket)
	}
}

// isKubelet matches the kubelet: only one may run on this machine.
func isKubelet(argv []string) bool { return filepath.Base(argv[0]) == "kubelet" }

func noAgent([]string) bool { return false }

// findProc is the first process whose command line matches, or 0.
func findProc(match func(argv []string) bool) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(data) == 0 {
			continue
		}
		if match(strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")) {
			return pid
		}
	}
	return 0
}

// procCPU is a process's user+system CPU seconds (its own, not its
// children's), or 0.
func procCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// The fields after the command name "(...)": state is field 3, utime 14, stime 15.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// machineBusy is the machine's non-idle CPU seconds since boot, all CPUs.
func machineBusy() float64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	var busy float64
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i == 3 || i == 4 || i >= 8 { // idle, iowait; guest times are already in user
			continue
		}
		busy += n
	}
	return busy / clockTicks
}
