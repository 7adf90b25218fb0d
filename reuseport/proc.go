package reuseport

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/bootlet/bootlet/ownprocess"
)

// portSockets is what this network namespace's sock_diag says of one local
// port: the inodes of its listening sockets and of the connections a
// process has accepted on it, and for the listeners bound to every address
// the loopback address that reaches them.
type portSockets struct {
	Listening map[string]bool
	Accepted  map[string]bool
	Loopback  map[string]string // by inode: "127.0.0.1" or "::1"
}

// portSocketsOf sorts the sockets of one local port. A connection still in
// a listener's accept queue has inode 0 until a process accepts it: nobody
// holds it yet, so it is not counted.
func portSocketsOf(socks []ownprocess.TCPSocket) portSockets {
	s := portSockets{Listening: map[string]bool{}, Accepted: map[string]bool{}, Loopback: map[string]string{}}
	for _, k := range socks {
		if k.Inode == "0" {
			continue
		}
		switch k.State {
		case ownprocess.TCPListen:
			s.Listening[k.Inode] = true
			// An IPv6 listener on every address is dual-stack unless
			// IPV6_V6ONLY; ::1 reaches it either way.
			switch a := k.Local.Addr(); {
			case !a.IsUnspecified():
			case a.Is4():
				s.Loopback[k.Inode] = "127.0.0.1"
			default:
				s.Loopback[k.Inode] = "::1"
			}
		case ownprocess.TCPEstablished:
			s.Accepted[k.Inode] = true
		}
	}
	return s
}

// readPortSockets reads port's listeners, and with accepted its accepted
// connections too: a route needs only the listeners, and sock_diag then
// walks the listening sockets alone, not every connection of the machine.
func readPortSockets(port int, accepted bool) (portSockets, error) {
	states := []uint8{ownprocess.TCPListen}
	if accepted {
		states = append(states, ownprocess.TCPEstablished)
	}
	socks, err := ownprocess.DumpTCP(port, states...)
	if err != nil {
		return portSockets{}, err
	}
	return portSocketsOf(socks), nil
}

// Listener is one listening socket of the port and the process that holds
// it.
type Listener struct {
	Inode string
	PID   int
	FD    int
	// Started is the holder's start time (clock ticks since boot,
	// /proc/PID/stat): the newest serving listener is the target.
	Started uint64
	// Loopback is the loopback address that reaches the listener ("" when
	// it is bound to one address only).
	Loopback string
}

// holders is, for the processes match selects, what they hold of port.
type holders struct {
	Listeners []string // inodes
	Accepted  int
}

func lookHolders(s portSockets, procs []string) holders {
	var h holders
	for _, proc := range procs {
		for inode := range ownprocess.SocketFDs(proc) {
			switch {
			case s.Listening[inode]:
				h.Listeners = append(h.Listeners, inode)
			case s.Accepted[inode]:
				h.Accepted++
			}
		}
	}
	return h
}

// findListeners finds the holder of each listening inode: first in known
// (checked still true: the same fd still names the socket), then by one
// scan of every process's fds for the rest.
func findListeners(listening map[string]bool, known map[string]Listener) map[string]Listener {
	out := map[string]Listener{}
	missing := false
	for inode := range listening {
		if l, ok := known[inode]; ok && fdNames(l.PID, l.FD, inode) {
			out[inode] = l
		} else {
			missing = true
		}
	}
	if !missing {
		return out
	}
	for _, proc := range ownprocess.Processes(func(string) bool { return true }) {
		pid, err := strconv.Atoi(filepath.Base(proc))
		if err != nil {
			continue
		}
		for inode, fd := range ownprocess.SocketFDs(proc) {
			if _, done := out[inode]; done || !listening[inode] {
				continue
			}
			out[inode] = Listener{Inode: inode, PID: pid, FD: fd, Started: startTime(proc)}
		}
	}
	return out
}

func fdNames(pid, fd int, inode string) bool {
	l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	return err == nil && l == "socket:["+inode+"]"
}

// startTime is field 22 of /proc/PID/stat, after the command in brackets
// (which may hold spaces).
func startTime(proc string) uint64 {
	data, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 {
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}
