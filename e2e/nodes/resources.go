package nodes

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HasCapSysResource reports whether this process's effective set has
// CAP_SYS_RESOURCE (24), as hack/containerd.sh's has_cap_sys_resource.
func HasCapSysResource() (bool, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return false, err
			}
			return caps&(1<<24) != 0, nil
		}
	}
	return false, errors.New("no CapEff in /proc/self/status")
}

// KubeletTunables are the host-wide tunables the kubelet's container
// manager requires: it cannot write them itself (/proc/sys is read-only in
// the container) and refuses to start when they differ.
var KubeletTunables = map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "1"}

// SetKernelTunables writes KubeletTunables and returns their old values.
func SetKernelTunables() (map[string]string, error) {
	old := map[string]string{}
	for name, v := range KubeletTunables {
		p := filepath.Join("/proc/sys", name)
		b, err := os.ReadFile(p)
		if err != nil {
			return old, err
		}
		old[name] = strings.TrimSpace(string(b))
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			return old, err
		}
	}
	return old, nil
}

// RestoreKernelTunables puts back what SetKernelTunables returned.
func RestoreKernelTunables(old map[string]string) error {
	var errs []error
	for name, v := range old {
		if err := os.WriteFile(filepath.Join("/proc/sys", name), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// CgroupDirs are the node's cgroup in every mounted hierarchy.
func (n *Node) CgroupDirs() []string {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/" + n.Cgroup)
	return dirs
}

// MakeCgroups makes the node's cgroup in every hierarchy (cpuset's with its
// parent's CPUs and memory nodes, which a v1 cpuset needs before it takes a
// task): nspawn runs there, and in its cgroup namespace that is the node's
// root, so the kubelet's /kubepods is Cgroup/kubepods on the host.
func (n *Node) MakeCgroups() error {
	hs, err := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	if err != nil || len(hs) == 0 {
		return fmt.Errorf("no cgroup hierarchies under /sys/fs/cgroup: %v", err)
	}
	for _, h := range hs {
		d := filepath.Join(filepath.Dir(h), n.Cgroup)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(filepath.Dir(h), f)); err == nil {
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// RemoveCgroups kills every task left in the node's cgroups and removes
// them, deepest first; without self, the node's own cgroups stay (empty of
// subgroups: after a reboot, as a fresh kernel has none).
func (n *Node) RemoveCgroups(self bool) error {
	return removeCgroups(n.CgroupDirs(), self)
}

func removeCgroups(dirs []string, self bool) error {
	var errs []error
	for _, top := range dirs {
		var sub []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() && (self || p != top) {
				sub = append(sub, p)
			}
			return nil
		})
		for i := len(sub) - 1; i >= 0; i-- {
			deadline := time.Now().Add(30 * time.Second)
			for {
				err := syscall.Rmdir(sub[i])
				if err == nil || errors.Is(err, syscall.ENOENT) {
					break
				}
				if time.Now().After(deadline) {
					procs, _ := os.ReadFile(filepath.Join(sub[i], "cgroup.procs"))
					errs = append(errs, fmt.Errorf("rmdir %s: %v (tasks: %q)", sub[i], err, procs))
					break
				}
				killTasks(sub[i])
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return errors.Join(errs...)
}

// killTasks sends SIGKILL to every task of one cgroup.
func killTasks(dir string) {
	procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	for _, f := range strings.Fields(string(procs)) {
		if pid, _ := strconv.Atoi(f); pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// KillAll is a power cut: SIGKILL to every task in the node's cgroups,
// nspawn included (it runs in the node's own cgroup), until none is left.
func (n *Node) KillAll(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := 0
		for _, top := range n.CgroupDirs() {
			_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					return nil
				}
				if procs, _ := os.ReadFile(filepath.Join(p, "cgroup.procs")); len(strings.TrimSpace(string(procs))) > 0 {
					left++
					killTasks(p)
				}
				return nil
			})
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: tasks left in %d cgroups after %s of SIGKILL", n.Name, left, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
