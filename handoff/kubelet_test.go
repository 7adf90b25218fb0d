package handoff

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/bootlet/bootlet/ownprocess"
)

func TestTrustHealthz(t *testing.T) {
	root := ownprocess.ServerSocket{Inode: "4242", UID: 0}
	cases := []struct {
		name   string
		answer healthzAnswer
		want   bool
		why    string
	}{
		{"the kubelet", healthzAnswer{Status: 200, Socket: root, SocketFound: true, HolderUID: 0}, true, ""},
		{"not ready", healthzAnswer{Status: 500, Socket: root, SocketFound: true, HolderUID: 0}, false, "answered 500"},
		{"a user's listener on the port", healthzAnswer{Status: 200, Socket: ownprocess.ServerSocket{Inode: "1", UID: 1000}, SocketFound: true, HolderUID: 1000}, false, "socket of uid 1000"},
		{"a root socket handed to a user's process", healthzAnswer{Status: 200, Socket: root, SocketFound: true, HolderUID: 1000}, false, "process of uid 1000"},
		{"closed at once (no established socket)", healthzAnswer{Status: 200, HolderUID: -1}, false, "no established socket"},
		{"remote, or another network namespace", healthzAnswer{Status: 200, HolderUID: -1}, false, "no established socket"},
		{"nobody holds the socket", healthzAnswer{Status: 200, Socket: root, SocketFound: true, HolderUID: -1}, false, "no process holds"},
	}
	for _, c := range cases {
		got, why := trustHealthz(c.answer, 0)
		if got != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: %v %q, want %v %q", c.name, got, why, c.want, c.why)
		}
	}
	if ok, _ := trustHealthz(healthzAnswer{Status: 200, Socket: ownprocess.ServerSocket{Inode: "1", UID: 1000}, SocketFound: true, HolderUID: 1000}, 1000); !ok {
		t.Error("a kubelet configured to run as uid 1000 is not trusted")
	}
}

// userListener accepts connections as uid: the accepted socket takes the
// fsuid of the thread that accepts it (/proc/net/tcp's uid column), as for
// a listener a user's process serves.
type userListener struct {
	net.Listener
	uid int
}

func (l userListener) Accept() (net.Conn, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	unix.Setfsuid(l.uid)
	defer unix.Setfsuid(0)
	return l.Listener.Accept()
}

// TestHealthzAnsweredByAUsersListener: a 200 from a listener a non-root
// user opened on the kubelet's healthz address does not make bootlet
// believe a kubelet runs; the same answer from root's does.
func TestHealthzAnsweredByAUsersListener(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to open a socket as another uid")
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	for _, c := range []struct {
		name string
		uid  int
		want bool
	}{{"root's listener (the kubelet)", 0, true}, {"nobody's listener", 65534, false}} {
		srv := httptest.NewUnstartedServer(ok)
		srv.Listener = userListener{Listener: srv.Listener, uid: c.uid}
		srv.Start()
		h := &Handoff{cfg: Config{HealthzURL: srv.URL + "/healthz", KubeletUID: 0}}
		got, why := h.kubeletAnswers(context.Background())
		if got != c.want {
			t.Errorf("%s: trusted %v (%s), want %v", c.name, got, why, c.want)
		}
		if !c.want && !strings.Contains(why, "uid 65534") {
			t.Errorf("%s: reason %q does not name the listener's uid", c.name, why)
		}
		if c.want && h.lastHolder.Load() != int64(os.Getpid()) {
			t.Errorf("%s: the holder found is pid %d, not this process", c.name, h.lastHolder.Load())
		}
		srv.Close()
	}
}
