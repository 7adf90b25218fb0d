package pivot

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/klog/v2"
)

// TCPMigrateReqPath is net.ipv4.tcp_migrate_req of the network namespace
// bootlet runs in. With 1 (Linux 5.14+), when a SO_REUSEPORT listener
// closes, the connections still in its accept queue move to another
// listener of the same group instead of being reset. During the pivot the
// bootstrap apiserver's listener closes while the self-hosted one listens
// on the same port; both are hostNetwork, so it is the host namespace's
// setting, and bootlet's when it runs on the host.
const TCPMigrateReqPath = "/proc/sys/net/ipv4/tcp_migrate_req"

// EnsureTCPMigrateReq checks net.ipv4.tcp_migrate_req and, when set is
// true, sets it to 1. It logs what it found and did, and returns the value
// in effect ("" when the kernel has no such setting). A failure to set it
// (a read-only /proc/sys, no CAP_NET_ADMIN in the namespace) is returned
// but is not fatal to the caller: the pivot still works, it may only reset
// the connections queued at the moment the old listener closes.
func EnsureTCPMigrateReq(path string, set bool) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		klog.InfoS("The kernel has no net.ipv4.tcp_migrate_req (Linux 5.14+); connections queued at a closing apiserver listener are reset", "path", path)
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	val := strings.TrimSpace(string(data))
	if val == "1" || !set {
		klog.InfoS("net.ipv4.tcp_migrate_req", "value", val, "set", set)
		return val, nil
	}
	if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
		return val, fmt.Errorf("setting net.ipv4.tcp_migrate_req=1 (was %s): %w", val, err)
	}
	klog.InfoS("Set net.ipv4.tcp_migrate_req=1: connections queued at a closing SO_REUSEPORT listener (the bootstrap apiserver's) move to the other one", "was", val)
	return "1", nil
}
