package nodes

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// NspawnPIDs are the PIDs of running systemd-nspawn processes of this
// machine name (read from /proc: a look-up, nothing is signalled).
func (n *Node) NspawnPIDs() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) > 0 && filepath.Base(args[0]) == "systemd-nspawn" && containsArg(args, "--machine="+n.Name) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// NspawnArgs are systemd-nspawn's arguments for the node.
func (n *Node) NspawnArgs() []string {
	args := []string{"--boot", "--directory=" + n.Root, "--machine=" + n.Name,
		// No machined or D-Bus on the host: the container stays in this
		// process's cgroup (n.Cgroup), nspawn registers nothing.
		"--register=no", "--keep-unit",
		"--network-namespace-path=/run/netns/" + n.Netns,
		// A node's services need them all (runc, CNI, mounts, eBPF): the
		// namespaces, not the bounding set, keep the host safe here.
		"--capability=all",
		// Beyond nspawn's default allow-list: runc joins a session keyring
		// per container; bootlet's apiserver port router loads eBPF and
		// borrows each apiserver's listener with pidfd_getfd, which
		// nspawn's list lacks even with every capability (refused with
		// EPERM, the router never routed: the self-hosted apiserver's
		// loopback reached the bootstrap one, x509, and it restarted).
		"--system-call-filter=@keyring bpf pidfd_getfd",
		"--link-journal=no", "--console=read-only"}
	for _, b := range n.Binds {
		args = append(args, "--bind="+b)
	}
	return args
}

// Machine is one boot of a node: its nspawn process and the container's
// PID 1.
type Machine struct {
	Cmd *exec.Cmd
	// PID1 is the container's systemd, as the host sees it.
	PID1 int
	// Exited is closed when nspawn exits, ExitErr is then its status.
	Exited  chan struct{}
	ExitErr error
}

// Stop stops the container as a power button does: SIGTERM to nspawn (its
// systemd powers off), SIGKILL to nspawn's session after timeout.
func (m *Machine) Stop(timeout time.Duration) error {
	select {
	case <-m.Exited:
		return nil
	default:
	}
	_ = m.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.Exited:
		return nil
	case <-time.After(timeout):
	}
	_ = syscall.Kill(-m.Cmd.Process.Pid, syscall.SIGKILL)
	<-m.Exited
	return fmt.Errorf("systemd-nspawn did not stop within %s of SIGTERM: SIGKILL", timeout)
}

// WaitExit waits for nspawn to exit and returns its exit code.
func (m *Machine) WaitExit(timeout time.Duration) (int, error) {
	select {
	case <-m.Exited:
	case <-time.After(timeout):
		return -1, fmt.Errorf("systemd-nspawn still runs after %s", timeout)
	}
	var ee *exec.ExitError
	if errors.As(m.ExitErr, &ee) {
		return ee.ExitCode(), nil
	}
	if m.ExitErr != nil {
		return -1, m.ExitErr
	}
	return 0, nil
}

// Boot starts `systemd-nspawn --boot` on the node's root, in its cgroups
// and network namespace, with the console appended to n.Console, and
// waits (up to a minute) for the container's PID 1. nspawn runs in a
// session of its own, so it outlives this process (`make cluster` returns
// with its nodes running) and no terminal's signal reaches it.
func (n *Node) Boot(banner string) (*Machine, error) {
	console, err := os.OpenFile(n.Console, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer console.Close()
	fmt.Fprintf(console, "\n===== %s %s =====\n", banner, time.Now().UTC().Format(time.RFC3339))
	var procs []string
	for _, d := range n.CgroupDirs() {
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	if len(procs) == 0 {
		return nil, fmt.Errorf("%s: no cgroups %s (MakeCgroups first)", n.Name, n.Cgroup)
	}
	// The shell joins the cgroups, then becomes nspawn: a v1 cgroup cannot
	// be chosen at fork as a v2 one can (CLONE_INTO_CGROUP).
	args := append([]string{"-c", `p=$$; while [ "$1" != -- ]; do echo "$p" > "$1"; shift; done; shift; exec "$@"`, "sh"}, procs...)
	args = append(append(args, "--", "systemd-nspawn"), n.NspawnArgs()...)
	cmd := exec.Command("sh", args...)
	cmd.Env = append(os.Environ(), "SYSTEMD_NSPAWN_API_VFS_WRITABLE=network")
	cmd.Stdout, cmd.Stderr = console, console
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("systemd-nspawn: %w", err)
	}
	m := &Machine{Cmd: cmd, Exited: make(chan struct{})}
	// Reaped here while this process lives; a detached node's nspawn, after
	// this process exits, by init.
	go func() { m.ExitErr = cmd.Wait(); close(m.Exited) }()
	deadline := time.Now().Add(time.Minute)
	for {
		select {
		case <-m.Exited:
			return nil, fmt.Errorf("systemd-nspawn exited during %s: %v\n%s", banner, m.ExitErr, n.ConsoleTail(3000))
		default:
		}
		if pid := childSystemd(cmd.Process.Pid); pid > 0 {
			m.PID1 = pid
			return m, nil
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("no systemd below systemd-nspawn after a minute:\n%s", n.ConsoleTail(3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// childSystemd is the child of pid that runs systemd, or 0.
func childSystemd(pid int) int {
	children, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	for _, f := range strings.Fields(string(children)) {
		c, _ := strconv.Atoi(f)
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", c)); strings.HasSuffix(exe, "/systemd") {
			return c
		}
	}
	return 0
}

// PID1 finds the running container's systemd from its nspawn process (for
// a node booted by another process); 0 when the node is not running.
func (n *Node) PID1() int {
	for _, p := range n.NspawnPIDs() {
		if c := childSystemd(p); c > 0 {
			return c
		}
	}
	return 0
}

// ConsoleTail is the last max bytes of the console.
func (n *Node) ConsoleTail(max int) string {
	b, _ := os.ReadFile(n.Console)
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// Inside runs a command in every namespace of the container whose PID 1 is
// pid1 (as its services run, but in the host's cgroup).
func Inside(pid1 int, args ...string) (string, error) {
	if pid1 <= 0 {
		return "", fmt.Errorf("the node is not running")
	}
	out, err := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(pid1), "-a", "--"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("in the node: %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Reboot runs `systemctl reboot` in the container and waits for nspawn to
// exit with 133, its code for a container that rebooted. The caller boots
// it again (after resetting its cgroups and network, as a fresh kernel
// would have them).
func (m *Machine) Reboot(timeout time.Duration) error {
	if out, err := Inside(m.PID1, "systemctl", "reboot"); err != nil {
		// The connection may drop as systemd goes down: only the exit code
		// below decides.
		_ = out
	}
	code, err := m.WaitExit(timeout)
	if err != nil {
		return fmt.Errorf("the container did not reboot: %w", err)
	}
	if code != 133 {
		return fmt.Errorf("systemd-nspawn exited with %d (%v) after systemctl reboot, want 133", code, m.ExitErr)
	}
	m.PID1 = 0
	return nil
}
