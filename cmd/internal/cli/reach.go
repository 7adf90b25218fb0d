package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"syscall"

	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/podapi"
)

// daemonUnreachableError is a failed dial of the daemon's API: the CLI says
// what is wrong and what to try, not the raw "dial unix ...: connect: no such
// file or directory" client-go would print.
type daemonUnreachableError struct {
	server string
	err    error
}

func (e *daemonUnreachableError) Error() string { return explainDial(e.server, e.err) }
func (e *daemonUnreachableError) Unwrap() error { return e.err }

// explainDial turns a dial error into advice. It is pure.
func explainDial(server string, err error) string {
	var why, try string
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		why = "no daemon is listening there"
		try = "Is `bootlet daemon` running on this node? "
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EACCES):
		why = "permission denied"
		try = "The socket is root's unless the daemon runs with --socket-group: run as root or as a member of that group. "
	default:
		why = err.Error()
		try = "Is `bootlet daemon` running on this node? "
	}
	return fmt.Sprintf("cannot reach the bootlet daemon at %s: %s\n"+
		"  %sTo use another daemon, pass --server unix:///PATH/TO/bootlet.sock or set BOOTLET_SERVER.", server, why, try)
}

// newClient is podapi.NewClient with dial errors explained.
func newClient(server string) (*kubernetes.Clientset, error) {
	cfg, err := podapi.RESTConfig(server)
	if err != nil {
		return nil, err
	}
	dial := cfg.Dial
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, &daemonUnreachableError{server: server, err: err}
		}
		return c, nil
	}
	return kubernetes.NewForConfig(cfg)
}

// DescribeError is what the CLI prints for a failed command.
func DescribeError(err error) string {
	var unreachable *daemonUnreachableError
	if errors.As(err, &unreachable) {
		return unreachable.Error()
	}
	return ErrorMessage(err)
}
