package nodes

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// CPUSnapshot is the CPU time (user+system, in clock ticks) of every
// process on the machine, by PID: the nodes' processes are the host's too,
// so two snapshots say where the machine's CPU went between them (which
// apiserver, etcd, bootlet, the kubelets). A process that exits in between
// takes its time with it.
type CPUSnapshot map[int]ProcCPU

// ProcCPU is one process's command name and CPU ticks so far.
type ProcCPU struct {
	Comm  string
	Ticks uint64
}

// SnapshotCPU reads /proc/*/stat.
func SnapshotCPU() CPUSnapshot {
	out := CPUSnapshot{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if err != nil {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue // exited
		}
		if comm, ticks, ok := parseProcStat(string(data)); ok {
			out[pid] = ProcCPU{comm, ticks}
		}
	}
	return out
}

// parseProcStat is the command name and utime+stime of one /proc/PID/stat
// line (proc(5): the name is between the first "(" and the last ")", and
// may hold spaces; utime and stime are the 14th and 15th fields).
func parseProcStat(line string) (string, uint64, bool) {
	open, closing := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || closing < open {
		return "", 0, false
	}
	comm := line[open+1 : closing]
	rest := strings.Fields(line[closing+1:])
	// rest[0] is field 3 (state): utime, field 14, is rest[11].
	if len(rest) < 13 {
		return "", 0, false
	}
	u, err1 := strconv.ParseUint(rest[11], 10, 64)
	s, err2 := strconv.ParseUint(rest[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return comm, u + s, true
}

// isKworker: a kernel worker thread, whose name carries the work item it
// runs now ("kworker/u8:4-writeback", then "kworker/u8:4-events_unbound"):
// the same thread under another name, not a reused PID.
func isKworker(comm string) bool { return strings.HasPrefix(comm, "kworker/") }

// TopSince is the n commands that used the most CPU between before and
// now, "name 12.3s" each, with the total, at the kernel's 100 ticks a
// second (USER_HZ on Linux). A PID in both with the same name (or a kernel
// worker renamed for its work item) counts its difference; one that is new
// (or reused) counts whole.
func (now CPUSnapshot) TopSince(before CPUSnapshot, n int) string {
	byComm := map[string]uint64{}
	for pid, p := range now {
		used := p.Ticks
		if b, ok := before[pid]; ok && b.Ticks <= p.Ticks && (b.Comm == p.Comm || isKworker(b.Comm) && isKworker(p.Comm)) {
			used -= b.Ticks
		}
		byComm[p.Comm] += used
	}
	type use struct {
		comm  string
		ticks uint64
	}
	var uses []use
	var total uint64
	for comm, t := range byComm {
		if t > 0 {
			uses = append(uses, use{comm, t})
			total += t
		}
	}
	sort.Slice(uses, func(i, j int) bool {
		if uses[i].ticks != uses[j].ticks {
			return uses[i].ticks > uses[j].ticks
		}
		return uses[i].comm < uses[j].comm
	})
	var parts []string
	for i, u := range uses {
		if i == n {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.1fs", u.comm, float64(u.ticks)/100))
	}
	return fmt.Sprintf("%.1fs of CPU in all: %s", float64(total)/100, strings.Join(parts, ", "))
}
