package nodes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// PowerOn starts a member whose disk exists: its cgroups, network
// namespace, overlay root, and nspawn, detached. The host side (bridge,
// tunables) must be up.
func PowerOn(m Member) (*Machine, error) {
	n := m.Node()
	if pids := n.NspawnPIDs(); len(pids) > 0 {
		return nil, fmt.Errorf("%s runs already (nspawn %v)", m.Name, pids)
	}
	if _, err := os.Stat(filepath.Join(m.Dir(), "upper")); err != nil {
		return nil, fmt.Errorf("%s has no disk (%v): make cluster first", m.Name, err)
	}
	// What a power cut left: cgroups and network namespace are the
	// kernel's, a new boot starts without them.
	if err := errors.Join(n.RemoveCgroups(true), n.RemoveNetwork()); err != nil {
		return nil, err
	}
	if err := mountRoot(m); err != nil {
		return nil, err
	}
	if err := n.MakeCgroups(); err != nil {
		return nil, err
	}
	if err := n.MakeNetwork(); err != nil {
		return nil, err
	}
	return n.Boot("power on " + m.Name)
}

// PowerOff cuts a member's power: its veth removed (it answers nothing
// any more), every task of its cgroups (nspawn, the container's systemd,
// containerd, the kubelet, bootlet, shims, containers, keepalived)
// SIGKILLed, its cgroups and network namespace removed, its root
// unmounted. Its disk (Dir/upper, Dir/containerd) stays; its /run was a
// tmpfs of the container and is gone.
func PowerOff(m Member) error {
	n := m.Node()
	// The link first: a machine without power answers nothing. Killed
	// first, its processes would leave its network namespace up for the
	// seconds the rest takes, refusing connections to its addresses (the
	// VIP it held among them) where a dead machine stays silent.
	var errs []error
	if _, err := os.Stat("/sys/class/net/" + n.HostLink); err == nil {
		if _, err := Run("ip", "link", "del", n.HostLink); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, n.KillAll(time.Minute))
	// nspawn may still be exiting: its mount namespace holds the root
	// until it is gone.
	deadline := time.Now().Add(30 * time.Second)
	for len(n.NspawnPIDs()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	errs = append(errs, unmountRoot(m), n.Cleanup())
	return errors.Join(errs...)
}
