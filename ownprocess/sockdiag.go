package ownprocess

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// The kernel's sock_diag (NETLINK_SOCK_DIAG, linux/inet_diag.h) answers
// for the sockets of one port without formatting every socket of the
// network namespace as text, which is what a read of /proc/net/tcp* costs:
// bootlet's port router looked at the apiserver port four times a second,
// and those reads were half of its CPU on a master at rest. A dump of the
// listening state alone walks only the listening hash, and a lookup of one
// connection is one hash lookup. No kept library exposes a dump filtered by
// state and port (vishvananda/netlink dumps every state with TCP info).

// TCP states as linux/tcp_states.h numbers them.
const (
	TCPEstablished = 1
	TCPListen      = 10
)

// TCPSocket is a TCP socket as sock_diag reports it.
type TCPSocket struct {
	Local, Remote netip.AddrPort
	State         uint8
	// UID is the socket's owner: the uid of the process that created the
	// listening socket (an accepted socket inherits it).
	UID int
	// Inode is the socket's inode ("0" for a connection still in a
	// listener's accept queue: no process holds it yet).
	Inode string
}

const (
	sizeofInetDiagReqV2 = 56 // struct inet_diag_req_v2
	sizeofInetDiagMsg   = 72 // struct inet_diag_msg
	inetDiagNoCookie    = ^uint32(0)
)

// DumpTCP returns this network namespace's TCP sockets, of both families,
// whose local port is port and whose state is one of states. An IPv4
// connection accepted by a dual-stack listener is an IPv6 socket with
// mapped addresses, as in /proc/net/tcp6.
func DumpTCP(port int, states ...uint8) ([]TCPSocket, error) {
	if port <= 0 || port > 65535 {
		// Port 0 in the request matches every port.
		return nil, fmt.Errorf("sock_diag: port %d", port)
	}
	var mask uint32
	for _, s := range states {
		mask |= 1 << s
	}
	var out []TCPSocket
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		req := inetDiagRequest(family, mask, netip.AddrPortFrom(netip.Addr{}, uint16(port)), netip.AddrPort{})
		got, err := sockDiag(req, unix.NLM_F_DUMP)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// LookupTCP returns the socket whose local and remote addresses are
// local and remote (false: none). An IPv4 connection accepted by a
// dual-stack listener is found by its IPv4 addresses. The kernel answers
// a tuple it does not know with the listener that would take it, and
// a closed connection with its TIME_WAIT socket: only the socket of this
// very connection counts.
func LookupTCP(local, remote netip.AddrPort) (TCPSocket, bool, error) {
	local, remote = unmapped(local), unmapped(remote)
	family := uint8(unix.AF_INET6)
	if local.Addr().Is4() {
		family = unix.AF_INET
	}
	req := inetDiagRequest(family, ^uint32(0), local, remote)
	got, err := sockDiag(req, 0)
	if errors.Is(err, unix.ENOENT) {
		return TCPSocket{}, false, nil
	}
	if err != nil || len(got) == 0 {
		return TCPSocket{}, false, err
	}
	s := got[0]
	if unmapped(s.Local) != local || unmapped(s.Remote) != remote {
		return TCPSocket{}, false, nil
	}
	return s, true, nil
}

func unmapped(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
}

// inetDiagRequest is a netlink message carrying a struct inet_diag_req_v2
// for TCP of family: the sockets in states (a bit per state) whose source
// (local) is src and destination (remote) is dst. A dump matches only the
// non-zero ports of the two; a lookup matches all four exactly.
func inetDiagRequest(family uint8, states uint32, src, dst netip.AddrPort) []byte {
	b := make([]byte, unix.SizeofNlMsghdr+sizeofInetDiagReqV2)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	// flags (6) are set by sockDiag; seq (8) and pid (12) stay 0
	r := b[unix.SizeofNlMsghdr:]
	r[0], r[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(r[4:], states)
	binary.BigEndian.PutUint16(r[8:], src.Port())
	binary.BigEndian.PutUint16(r[10:], dst.Port())
	putDiagAddr(r[12:28], src.Addr())
	putDiagAddr(r[28:44], dst.Addr())
	// interface (44) 0: any
	ne.PutUint32(r[48:], inetDiagNoCookie)
	ne.PutUint32(r[52:], inetDiagNoCookie)
	return b
}

func putDiagAddr(b []byte, a netip.Addr) {
	switch {
	case a.Is4():
		v := a.As4()
		copy(b, v[:])
	case a.Is6():
		v := a.As16()
		copy(b, v[:])
	}
}

// sockDiag sends req with flags and reads every answer until the dump's
// end (or the one answer of a lookup).
func sockDiag(req []byte, flags uint16) ([]TCPSocket, error) {
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|flags)
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag request: %w", err)
	}
	var out []TCPSocket
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("sock_diag answer: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("sock_diag answer: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				// It carries the dump's own result: negative, an errno.
				if len(m.Data) >= 4 {
					if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno < 0 {
						return nil, fmt.Errorf("sock_diag dump: %w", unix.Errno(-errno))
					}
				}
				return out, nil
			case unix.NLMSG_ERROR:
				if len(m.Data) < 4 {
					return nil, errors.New("sock_diag: a short error message")
				}
				if errno := int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
					return nil, fmt.Errorf("sock_diag: %w", unix.Errno(-errno))
				}
				return out, nil
			case unix.SOCK_DIAG_BY_FAMILY:
				// inet_diag does not set it today (a dump over several
				// answers may miss or repeat a socket that changes
				// meanwhile, as a read of /proc/net/tcp* may); honoured
				// should it ever.
				if m.Header.Flags&unix.NLM_F_DUMP_INTR != 0 {
					return nil, errors.New("sock_diag: the dump was interrupted by a change of the sockets; ask again")
				}
				s, err := parseInetDiagMsg(m.Data)
				if err != nil {
					return nil, err
				}
				out = append(out, s)
			}
		}
		if flags&unix.NLM_F_DUMP == 0 {
			return out, nil
		}
	}
}

// parseInetDiagMsg decodes a struct inet_diag_msg.
func parseInetDiagMsg(b []byte) (TCPSocket, error) {
	if len(b) < sizeofInetDiagMsg {
		return TCPSocket{}, fmt.Errorf("sock_diag: an answer of %d bytes, want %d", len(b), sizeofInetDiagMsg)
	}
	addr := func(raw []byte) netip.Addr {
		if b[0] == unix.AF_INET {
			return netip.AddrFrom4([4]byte(raw[:4]))
		}
		return netip.AddrFrom16([16]byte(raw[:16]))
	}
	ne := binary.NativeEndian
	return TCPSocket{
		State:  b[1],
		Local:  netip.AddrPortFrom(addr(b[8:24]), binary.BigEndian.Uint16(b[4:])),
		Remote: netip.AddrPortFrom(addr(b[24:40]), binary.BigEndian.Uint16(b[6:])),
		UID:    int(ne.Uint32(b[64:])),
		Inode:  strconv.FormatUint(uint64(ne.Uint32(b[68:])), 10),
	}, nil
}
