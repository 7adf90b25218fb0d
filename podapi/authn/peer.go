package authn

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

type peerKey struct{}

// PeerCred records the socket peer's credentials (SO_PEERCRED) on its
// connection's context: http.Server.ConnContext of a unix socket.
func PeerCred(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	_ = raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if err != nil || cred == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, cred)
}

// SocketPeer is the unix socket peer PeerCred recorded on ctx: its user
// name (system:unix:uid=N, or system:anonymous without credentials) and
// whether it may in: root, or a member of socketGID (gid < 0: none).
func SocketPeer(ctx context.Context, socketGID int) (name string, allowed bool) {
	cred := peerFrom(ctx)
	if cred == nil {
		return "system:anonymous", false
	}
	return fmt.Sprintf("system:unix:uid=%d", cred.Uid), socketPeerAllowed(cred.Uid, cred.Gid, supplementaryGroups(cred.Pid), socketGID)
}

// socketPeerAllowed is the unix socket's rule: root, or a member (primary
// or supplementary) of the socket group (gid < 0: none).
func socketPeerAllowed(uid, primaryGID uint32, groups []uint32, socketGID int) bool {
	if uid == 0 {
		return true
	}
	if socketGID < 0 {
		return false
	}
	if primaryGID == uint32(socketGID) {
		return true
	}
	for _, g := range groups {
		if g == uint32(socketGID) {
			return true
		}
	}
	return false
}

// supplementaryGroups reads a process's groups from /proc.
func supplementaryGroups(pid int32) []uint32 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil
	}
	var out []uint32
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
			for _, f := range strings.Fields(rest) {
				if n, err := strconv.ParseUint(f, 10, 32); err == nil {
					out = append(out, uint32(n))
				}
			}
		}
	}
	return out
}
