package ownprocess

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestDumpTCP asks sock_diag for a port's sockets on real ones: a
// dual-stack listener and an IPv4-only one on the same port
// (SO_REUSEADDR is not needed: different addresses), a connection to each,
// and a listener on another port that must not show.
func TestDumpTCP(t *testing.T) {
	dual := listen(t, "tcp", "[::]:0")
	port := dual.Addr().(*net.TCPAddr).Port
	other := listen(t, "tcp4", "127.0.0.1:0")
	client, server := connect(t, dual, "127.0.0.1:"+strconv.Itoa(port))

	ls, err := DumpTCP(port, TCPListen)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != 1 || ls[0].State != TCPListen || ls[0].Inode != inodeOf(t, dual) || !ls[0].Local.Addr().IsUnspecified() || !ls[0].Local.Addr().Is6() {
		t.Errorf("listeners of %d = %+v, want the dual-stack one (inode %s) only", port, ls, inodeOf(t, dual))
	}
	all, err := DumpTCP(port, TCPListen, TCPEstablished)
	if err != nil {
		t.Fatal(err)
	}
	var established []TCPSocket
	for _, s := range all {
		if s.State == TCPEstablished {
			established = append(established, s)
		}
		if s.Local.Port() == uint16(other.Addr().(*net.TCPAddr).Port) {
			t.Errorf("a socket of another port: %+v", s)
		}
	}
	// The client's own side has the port as its remote, not its local one.
	if len(established) != 1 || established[0].Inode != inodeOf(t, server) || established[0].Remote.Port() != uint16(client.LocalAddr().(*net.TCPAddr).Port) {
		t.Errorf("established on %d = %+v, want the accepted side (inode %s) only", port, established, inodeOf(t, server))
	}
}

// TestFindAcceptedSocket looks up the server side of a connection by its
// addresses: over IPv4 to a dual-stack listener (the accepted socket is an
// IPv6 one with mapped addresses), and over IPv6; the client's own side
// and a connection that does not exist are not found.
func TestFindAcceptedSocket(t *testing.T) {
	dual := listen(t, "tcp", "[::]:0")
	port := strconv.Itoa(dual.Addr().(*net.TCPAddr).Port)
	for _, addr := range []string{"127.0.0.1:" + port, "[::1]:" + port} {
		client, server := connect(t, dual, addr)
		c, s := client.LocalAddr().(*net.TCPAddr).AddrPort(), client.RemoteAddr().(*net.TCPAddr).AddrPort()
		got, ok, err := FindAcceptedSocket(s, c)
		if err != nil || !ok || got.Inode != inodeOf(t, server) || got.UID != os.Geteuid() {
			t.Errorf("%s: server side %+v %v %v, want inode %s uid %d", addr, got, ok, err, inodeOf(t, server), os.Geteuid())
		}
		// The client's side is established too, but it is no listener's.
		if mine, ok, err := FindAcceptedSocket(c, s); err != nil || !ok || mine.Inode != inodeOf(t, client) {
			t.Errorf("%s: the reverse lookup found %+v %v %v, want the client's own socket %s", addr, mine, ok, err, inodeOf(t, client))
		}
		gone := netip.AddrPortFrom(c.Addr(), c.Port()+1)
		if got, ok, err := FindAcceptedSocket(s, gone); ok || err != nil {
			t.Errorf("%s: a connection that does not exist: %+v %v %v", addr, got, ok, err)
		}
		// The kernel answers an unknown tuple with the listener that
		// would take it: that is not the socket asked for.
		if got, ok, err := LookupTCP(s, gone); ok || err != nil {
			t.Errorf("%s: LookupTCP of a connection that does not exist: %+v %v %v", addr, got, ok, err)
		}
	}
}

func listen(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// connect dials addr and returns the client and the connection ln
// accepted.
func connect(t *testing.T, ln net.Listener, addr string) (client, server net.Conn) {
	t.Helper()
	client, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// inodeOf is the inode of the socket behind c (a TCP listener or
// connection), from this process's fd table.
func inodeOf(t *testing.T, c any) string {
	t.Helper()
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("%T has no file descriptor", c)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	if err := raw.Control(func(f uintptr) { fd = f }); err != nil {
		t.Fatal(err)
	}
	l, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fd)))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")
}
