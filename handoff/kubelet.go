package handoff

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/bootlet/bootlet/ownprocess"
)

// Who answers the kubelet's healthz. A 200 there makes bootlet keep its
// hands off every pod whose static copy is in place, so it must come from
// the kubelet, not from whatever listens on the port: 10248 is not a
// privileged port, and any local user may bind it while no kubelet runs.
// So every poll opens a fresh connection, and while it is still open
// bootlet finds its server side (sock_diag): the accepted socket must
// belong to the kubelet's uid (root by default; a socket keeps the uid of
// whoever created the listener, and only that uid may share its port with
// SO_REUSEPORT), and a process running as that uid must hold it. As the
// pivot's own-process check, it asks of bootlet's own network namespace, the
// kubelet's when both run in the host network namespace.

// healthzAnswer is what one poll of the kubelet's healthz saw.
type healthzAnswer struct {
	// Status is the HTTP status (0: no answer).
	Status int
	// Socket is the server side of the connection (sock_diag)
	// (found false: not there, as for a remote or a closed one).
	Socket      ownprocess.ServerSocket
	SocketFound bool
	// HolderUID is the effective uid of a process holding the socket (-1:
	// no process holds it).
	HolderUID int
}

// trustHealthz decides whether an answer proves that the kubelet runs: a
// 200, on a socket of wantUID, held by a process of wantUID. The reason
// says why not. Pure, so it is table-tested.
func trustHealthz(a healthzAnswer, wantUID int) (bool, string) {
	switch {
	case a.Status != http.StatusOK:
		return false, fmt.Sprintf("answered %d", a.Status)
	case !a.SocketFound:
		return false, "answered 200, but on no established socket of this network namespace"
	case a.Socket.UID != wantUID:
		return false, fmt.Sprintf("answered 200 on a socket of uid %d, not the kubelet's uid %d", a.Socket.UID, wantUID)
	case a.HolderUID < 0:
		return false, "answered 200, but no process holds its socket"
	case a.HolderUID != wantUID:
		return false, fmt.Sprintf("answered 200 from a process of uid %d, not the kubelet's uid %d", a.HolderUID, wantUID)
	}
	return true, ""
}

// kubeletAnswers polls the healthz once and reports whether the kubelet
// (a process of the kubelet's uid) answered 200, and why not.
func (h *Handoff) kubeletAnswers(ctx context.Context) (bool, string) {
	a, err := h.pollHealthz(ctx)
	if err != nil {
		return false, err.Error()
	}
	return trustHealthz(a, h.cfg.KubeletUID)
}

// pollHealthz GETs the healthz over a fresh connection and, before closing
// it, gathers who accepted it.
func (h *Handoff) pollHealthz(ctx context.Context) (healthzAnswer, error) {
	a := healthzAnswer{HolderUID: -1}
	var conn net.Conn
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, network, addr)
			conn = c
			return c, err
		},
		MaxIdleConns: 1,
		// The connection must stay open until its server side has been
		// found: a server that closes it at once leaves no established
		// socket to check, which fails the check.
		DisableKeepAlives: false,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Second}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.cfg.HealthzURL, nil)
	if err != nil {
		return a, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	a.Status = resp.StatusCode
	if a.Status != http.StatusOK || conn == nil {
		return a, nil
	}
	server, ok1 := conn.RemoteAddr().(*net.TCPAddr)
	clientAddr, ok2 := conn.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return a, nil
	}
	a.Socket, a.SocketFound, err = ownprocess.FindAcceptedSocket(server.AddrPort(), clientAddr.AddrPort())
	if err != nil {
		// Not "no such socket": the kernel could not be asked.
		return a, fmt.Errorf("finding the server side of the healthz connection: %w", err)
	}
	if a.SocketFound {
		a.HolderUID = h.socketHolderUID(a.Socket.Inode)
	}
	return a, nil
}

// socketHolderUID is the effective uid of a process that holds the socket
// with inode (-1: none). The process that held the last one (the kubelet)
// is looked at first, so a poll does not read every process's fds.
func (h *Handoff) socketHolderUID(inode string) int {
	if last := h.lastHolder.Load(); last > 0 {
		proc := "/proc/" + strconv.Itoa(int(last))
		if ownprocess.HoldsSocket(proc, inode) {
			return ownprocess.EffectiveUID(proc)
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, proc := range procs {
		if ownprocess.HoldsSocket(proc, inode) {
			if pid, err := strconv.Atoi(filepath.Base(proc)); err == nil {
				h.lastHolder.Store(int64(pid))
			}
			return ownprocess.EffectiveUID(proc)
		}
	}
	return -1
}
