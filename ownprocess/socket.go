package ownprocess

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// podCgroupMarkers are the path elements of a pod's cgroup in the kubelet's
// layout: pod<UID> with the cgroupfs driver, pod<UID with _> in the systemd
// slice name (kubepods-burstable-pod<UID_>.slice).
func podCgroupMarkers(uid types.UID) []string {
	return []string{"pod" + string(uid), "pod" + strings.ReplaceAll(string(uid), "-", "_")}
}

// cgroupOfPod reports whether a /proc/PID/cgroup content places the process
// in the pod with uid.
func cgroupOfPod(content string, uid types.UID) bool {
	if uid == "" {
		return false
	}
	for _, line := range strings.Split(content, "\n") {
		// hierarchy-ID:controllers:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, elem := range strings.Split(parts[2], "/") {
			for _, m := range podCgroupMarkers(uid) {
				if elem == m || strings.Contains(elem, "-"+m+".slice") || strings.HasPrefix(elem, m+".slice") {
					return true
				}
			}
		}
	}
	return false
}

// CgroupOfContainer reports whether a /proc/PID/cgroup content places the
// process in the container id of the pod uid: the container's cgroup (its
// ID with cgroupfs, cri-containerd-ID.scope with systemd) under the pod's.
// Container IDs are 64 hex digits, unique, so containing one is enough.
// Only root may move a process into another cgroup, so the answer is one
// a process of another user cannot forge.
func CgroupOfContainer(content string, uid types.UID, id string) bool {
	if id == "" || !cgroupOfPod(content, uid) {
		return false
	}
	for _, line := range strings.Split(content, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && strings.Contains(parts[2], id) {
			return true
		}
	}
	return false
}

// ServerSocket is the server side of a connection, as sock_diag reports
// it: its inode, and the uid it belongs to (the uid of the process that
// created the listening socket; an accepted socket inherits it).
type ServerSocket struct {
	Inode string
	UID   int
}

// InPod selects the processes (/proc/PID) in the cgroup of the pod with uid.
func InPod(uid types.UID) func(proc string) bool {
	return func(proc string) bool {
		cg, err := os.ReadFile(filepath.Join(proc, "cgroup"))
		return err == nil && cgroupOfPod(string(cg), uid)
	}
}

// InContainer selects the processes (/proc/PID) of the container id (a CRI
// container ID, without the runtime's scheme) of the pod with uid: a
// status that names a container that no longer runs selects none.
func InContainer(uid types.UID, id string) func(proc string) bool {
	return func(proc string) bool {
		cg, err := os.ReadFile(filepath.Join(proc, "cgroup"))
		return err == nil && CgroupOfContainer(string(cg), uid, id)
	}
}

// acceptedBy reports whether the server side of the connection from
// client to server is a socket held by a process (/proc/PID) that match
// selects.
func acceptedBy(server, client netip.AddrPort, match func(proc string) bool) (bool, error) {
	sock, ok, err := FindAcceptedSocket(server, client)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, fmt.Errorf("no accepted socket for %s ← %s", server, client)
	}
	for _, proc := range Processes(match) {
		if HoldsSocket(proc, sock.Inode) {
			return true, nil
		}
	}
	return false, nil
}

// FindAcceptedSocket looks up the server side of the established
// connection from client to server in this network namespace: the socket
// a listener accepted it on (false: none, or one still in the accept
// queue, which no process holds yet).
func FindAcceptedSocket(server, client netip.AddrPort) (ServerSocket, bool, error) {
	s, ok, err := LookupTCP(server, client)
	if err != nil || !ok || s.State != TCPEstablished || s.Inode == "0" {
		return ServerSocket{}, false, err
	}
	return ServerSocket{Inode: s.Inode, UID: s.UID}, true, nil
}

// ReadProcNetTCP returns the readable ones of this network namespace's
// /proc/net/tcp6 and /proc/net/tcp; an error when neither is. It formats
// every socket of the namespace: a poll asks sock_diag (DumpTCP,
// LookupTCP), and this is for a one-off look (the tests' timelines).
func ReadProcNetTCP() ([]string, error) {
	var out []string
	for _, f := range []string{"/proc/net/tcp6", "/proc/net/tcp"} {
		if data, err := os.ReadFile(f); err == nil {
			out = append(out, string(data))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("neither /proc/net/tcp6 nor /proc/net/tcp is readable")
	}
	return out, nil
}

// HoldsSocket reports whether the process /proc/PID has the socket with
// inode among its open files.
func HoldsSocket(proc, inode string) bool {
	_, ok := SocketFDs(proc)[inode]
	return ok
}

// SocketFDs maps the inode of every socket the process /proc/PID holds to
// one of its file descriptors for it.
func SocketFDs(proc string) map[string]int {
	held := map[string]int{}
	fds, err := os.ReadDir(filepath.Join(proc, "fd"))
	if err != nil {
		return held
	}
	for _, e := range fds {
		l, err := os.Readlink(filepath.Join(proc, "fd", e.Name()))
		inode, ok := strings.CutPrefix(l, "socket:[")
		if err != nil || !ok {
			continue
		}
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			held[strings.TrimSuffix(inode, "]")] = fd
		}
	}
	return held
}

// Processes lists the /proc/PID paths match selects.
func Processes(match func(proc string) bool) []string {
	all, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, p := range all {
		if match(p) {
			out = append(out, p)
		}
	}
	return out
}

// EffectiveUID reads the effective uid from /proc/PID/status (-1: unknown).
func EffectiveUID(proc string) int {
	f, err := os.Open(filepath.Join(proc, "status"))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			// real, effective, saved, filesystem
			if f := strings.Fields(rest); len(f) >= 2 {
				if uid, err := strconv.Atoi(f[1]); err == nil {
					return uid
				}
			}
		}
	}
	return -1
}
