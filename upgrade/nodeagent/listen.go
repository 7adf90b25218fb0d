package nodeagent

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// procNetTCP are the kernel's tables of this network namespace's TCP
// sockets, IPv4 and IPv6.
var procNetTCP = []string{"/proc/net/tcp", "/proc/net/tcp6"}

// listensOn reports whether a socket of this network namespace listens on
// the port of any of urls, whatever its address and process: a helper
// whose pod was deleted holds its ports until its process is gone, and
// with them its data directory's locks.
func listensOn(urls ...string) (bool, error) {
	ports := map[int]bool{}
	for _, u := range urls {
		p, err := portOf(u)
		if err != nil {
			return false, err
		}
		ports[p] = true
	}
	for _, path := range procNetTCP {
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no IPv6 in this kernel
		}
		if err != nil {
			return false, err
		}
		listening, err := listeningPorts(f)
		f.Close()
		if err != nil {
			return false, err
		}
		for p := range listening {
			if ports[p] {
				return true, nil
			}
		}
	}
	return false, nil
}

// tcpListen is the state column of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// listeningPorts are the local ports of the listening sockets in a
// /proc/net/tcp table (proc(5): "sl local_address rem_address st ...",
// the address as hex IP:port).
func listeningPorts(r io.Reader) (map[int]bool, error) {
	out := map[int]bool{}
	sc := bufio.NewScanner(r)
	for first := true; sc.Scan(); first = false {
		fields := strings.Fields(sc.Text())
		if first || len(fields) < 4 || fields[3] != tcpListen {
			continue // the header, or not a listener
		}
		_, hexPort, ok := strings.Cut(fields[1], ":")
		if !ok {
			continue
		}
		p, err := strconv.ParseUint(hexPort, 16, 16)
		if err != nil {
			return nil, err
		}
		out[int(p)] = true
	}
	return out, sc.Err()
}
