package cli

import (
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestExplainDial(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "dial", Net: "unix", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ENOENT}}, "no daemon is listening there"},
		{&net.OpError{Op: "dial", Net: "unix", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}, "no daemon is listening there"},
		{&net.OpError{Op: "dial", Net: "unix", Err: &os.SyscallError{Syscall: "connect", Err: syscall.EACCES}}, "--socket-group"},
		{fs.ErrPermission, "permission denied"},
		{fmt.Errorf("weird"), "weird"},
	} {
		got := explainDial("unix:///run/bootlet/bootlet.sock", tc.err)
		if !strings.Contains(got, tc.want) || !strings.Contains(got, "BOOTLET_SERVER") || !strings.Contains(got, "unix:///run/bootlet/bootlet.sock") {
			t.Errorf("explainDial(%v) = %q, want it to contain %q", tc.err, got, tc.want)
		}
	}
}
