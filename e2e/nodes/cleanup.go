package nodes

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Leftovers fails when the node runs, and removes what a killed earlier run
// left of it (its cgroups, its network).
func (n *Node) Leftovers() error {
	if pids := n.NspawnPIDs(); len(pids) > 0 {
		return fmt.Errorf("a container %s runs already (pids %v): another run, or a leftover to stop", n.Name, pids)
	}
	return errors.Join(n.RemoveCgroups(true), n.RemoveNetwork())
}

// Cleanup removes the node's cgroups (killing what is left in them), its
// network and nspawn's propagation directory, and reports any mount left
// under its root or of its namespace.
func (n *Node) Cleanup() error {
	errs := []error{n.RemoveCgroups(true), n.RemoveNetwork()}
	_ = os.RemoveAll("/run/systemd/nspawn/propagate/" + n.Name)
	if left := MountsUnder(n.Root, "/run/netns/"+n.Netns); len(left) > 0 {
		errs = append(errs, fmt.Errorf("mounts left: %s", strings.Join(left, "; ")))
	}
	return errors.Join(errs...)
}

// MountsUnder are the host's mount points at or below any of the paths.
func MountsUnder(paths ...string) []string {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return []string{err.Error()}
	}
	var left []string
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		if len(f) <= 4 {
			continue
		}
		for _, p := range paths {
			if f[4] == p || strings.HasPrefix(f[4], strings.TrimSuffix(p, "/")+"/") {
				left = append(left, f[4])
			}
		}
	}
	return left
}
