package nodes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Running are the cluster's members, from the state directory.
func Running() ([]Member, error) {
	ents, err := os.ReadDir(StateDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var ms []Member
	for _, e := range ents {
		if m, err := ParseMember(e.Name()); err == nil && e.IsDir() {
			ms = append(ms, m)
		}
	}
	return ms, nil
}

// Down removes everything Up made: every node powered off, its state
// removed, the bridge and the FORWARD rule, the kernel tunables restored,
// StateDir removed. It then checks that nothing is left: no nspawn of the
// cluster, no cgroup, netns, veth, bridge, mount or rule.
func Down(logf Logf) error {
	ms, err := Running()
	if err != nil {
		return err
	}
	// Nodes of any count a killed Up may have left, by name: the state
	// directory may list fewer.
	var errs []error
	for _, m := range ms {
		if err := PowerOff(m); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
		}
	}
	st, serr := LoadState()
	if serr == nil && st.Tunables != nil {
		errs = append(errs, RestoreKernelTunables(st.Tunables))
	}
	errs = append(errs, removeBridge())
	if left := MountsUnder(StateDir); len(left) > 0 {
		errs = append(errs, fmt.Errorf("mounts left under %s: %v", StateDir, left))
	} else if err := os.RemoveAll(StateDir); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, leftovers())
	if err := errors.Join(errs...); err != nil {
		return err
	}
	logf("cluster down: no node, cgroup, netns, veth, bridge, rule, mount or state left")
	return nil
}

// leftovers lists anything of the harness still on the host.
func leftovers() error {
	var left []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), "--machine="+MachinePrefix) && strings.Contains(string(b), "systemd-nspawn") {
			left = append(left, "process "+e.Name())
		}
	}
	if cg, _ := filepath.Glob("/sys/fs/cgroup/*/" + MachinePrefix + "*"); len(cg) > 0 {
		left = append(left, fmt.Sprintf("cgroups %v", cg))
	}
	if ns, _ := filepath.Glob("/run/netns/" + MachinePrefix + "*"); len(ns) > 0 {
		left = append(left, fmt.Sprintf("netns %v", ns))
	}
	if l, _ := filepath.Glob("/sys/class/net/" + linkPrefix + "*"); len(l) > 0 {
		left = append(left, fmt.Sprintf("links %v", l))
	}
	if _, err := os.Stat("/sys/class/net/" + ClusterBridge); err == nil {
		left = append(left, "bridge "+ClusterBridge)
	}
	if _, err := os.Stat(StateDir); err == nil {
		left = append(left, StateDir)
	}
	if _, err := Run("iptables", append([]string{"-w", "-C"}, forwardRule...)...); err == nil {
		left = append(left, "iptables FORWARD rule")
	}
	if len(left) > 0 {
		return fmt.Errorf("left on the host: %s", strings.Join(left, "; "))
	}
	return nil
}
