package systemd

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/bootlet/bootlet/config"
	"github.com/bootlet/bootlet/internal/shellcmd"
	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/masters/nodekeys"
)

var units = []string{"bootlet-containerd.service", "bootlet.service", "bootlet-kubelet.service"}

// workerUnit is a worker's kubelet (docs/cluster.md): enabled with
// bootlet-containerd.service instead of bootlet.service and
// bootlet-kubelet.service.
const workerUnit = "bootlet-kubelet-worker.service"

// agentUnit is a worker's upgrade agent (`bootlet upgrade agent`), enabled
// with workerUnit.
const agentUnit = "bootlet-upgrade-agent.service"

// workerDaemonUnit is a worker's bootlet daemon, enabled with workerUnit.
const workerDaemonUnit = "bootlet-worker.service"

// installed are every unit make install writes.
var installed = append(append([]string(nil), units...), workerUnit, agentUnit, workerDaemonUnit)

// repoRoot is two levels up from this package (dist/systemd).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// unit is a parsed unit file: section -> key -> values in order (a key may
// repeat; continuation lines are joined).
type unit map[string]map[string][]string

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unit{}
	section := ""
	var pending string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if pending != "" {
			line = pending + " " + strings.TrimSpace(line)
			pending = ""
		} else {
			line = strings.TrimSpace(line)
		}
		if strings.HasSuffix(line, `\`) {
			pending = strings.TrimSuffix(line, `\`)
			continue
		}
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s: cannot parse %q", path, line)
		}
		u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	if pending != "" {
		t.Fatalf("%s: file ends in a continuation", path)
	}
	return u
}

// list is every value of section.key, split on whitespace (After=, Wants=...).
func (u unit) list(section, key string) []string {
	var out []string
	for _, v := range u[section][key] {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

func (u unit) one(t *testing.T, section, key string) string {
	t.Helper()
	v := u[section][key]
	if len(v) != 1 {
		t.Fatalf("[%s] %s: want exactly one value, have %q", section, key, v)
	}
	return v[0]
}

func loadUnits(t *testing.T, dir string) map[string]unit {
	t.Helper()
	out := map[string]unit{}
	for _, n := range units {
		out[n] = parseUnit(t, filepath.Join(dir, n))
	}
	return out
}

// scriptFlags returns the flag names of the command line in script that
// starts on the line matching start (shellcmd.ScriptFlags).
func scriptFlags(t *testing.T, script, start string) []string {
	t.Helper()
	flags, err := shellcmd.ScriptFlags(script, start)
	if err != nil {
		t.Fatal(err)
	}
	return flags
}

// rebootOrder is the order in which hack/up.sh's cmd_reboot (make reboot)
// starts the node's services, as unit names.
func rebootOrder(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "hack/up.sh"))
	if err != nil {
		t.Fatal(err)
	}
	body := regexp.MustCompile(`(?ms)^cmd_reboot\(\) \{\n(.*?)^\}`).FindSubmatch(data)
	if body == nil {
		t.Fatal("hack/up.sh: no cmd_reboot")
	}
	unitOf := map[string]string{"containerd": "bootlet-containerd.service", "bootlet": "bootlet.service", "kubelet": "bootlet-kubelet.service"}
	var order []string
	for _, m := range regexp.MustCompile(`(?m)^\s*start_(\w+)\s*$`).FindAllSubmatch(body[1], -1) {
		u, ok := unitOf[string(m[1])]
		if !ok {
			t.Fatalf("hack/up.sh cmd_reboot starts %q, which no unit stands for", m[1])
		}
		order = append(order, u)
	}
	return order
}

// startOrder orders the units by their After= among themselves (a
// topological sort; it fails on a cycle or an ambiguity).
func startOrder(t *testing.T, us map[string]unit) []string {
	t.Helper()
	var order []string
	done := map[string]bool{}
	for len(order) < len(us) {
		var ready []string
		for _, n := range units {
			if done[n] {
				continue
			}
			ok := true
			for _, a := range us[n].list("Unit", "After") {
				if _, ours := us[a]; ours && !done[a] {
					ok = false
				}
			}
			if ok {
				ready = append(ready, n)
			}
		}
		if len(ready) != 1 {
			t.Fatalf("After= does not give one start order: next could be %q (after %q)", ready, order)
		}
		order = append(order, ready[0])
		done[ready[0]] = true
	}
	return order
}

// TestBootOrder checks the units' dependencies against the boot order of
// make reboot (hack/up.sh cmd_reboot: containerd, bootlet, the kubelet, each
// started once the one before is ready) and the daemons' command lines
// against the make up scripts.
func TestBootOrder(t *testing.T) {
	us := loadUnits(t, ".")
	want := rebootOrder(t)
	if !slices.Equal(want, units) {
		t.Fatalf("make reboot starts %q; the units are written for %q: update both", want, units)
	}
	if got := startOrder(t, us); !slices.Equal(got, want) {
		t.Errorf("the units start in the order %q; make reboot starts %q", got, want)
	}

	ctrd, bootlet, kubelet := us[units[0]], us[units[1]], us[units[2]]
	has := func(name string, u unit, key, dep string) {
		t.Helper()
		if !slices.Contains(u.list("Unit", key), dep) {
			t.Errorf("%s: no %s=%s", name, key, dep)
		}
	}
	// bootlet needs the CRI: it starts after containerd is ready and stops
	// with it.
	has("bootlet.service", bootlet, "Requires", "bootlet-containerd.service")
	has("bootlet.service", bootlet, "After", "bootlet-containerd.service")
	// The kubelet needs the CRI too, and comes after bootlet without
	// depending on it: after the pivot it runs the control plane, and must
	// not stop when bootlet does.
	has("bootlet-kubelet.service", kubelet, "Requires", "bootlet-containerd.service")
	has("bootlet-kubelet.service", kubelet, "After", "bootlet-containerd.service")
	has("bootlet-kubelet.service", kubelet, "Wants", "bootlet.service")
	has("bootlet-kubelet.service", kubelet, "After", "bootlet.service")
	for _, key := range []string{"Requires", "BindsTo", "PartOf", "Requisite"} {
		if slices.Contains(kubelet.list("Unit", key), "bootlet.service") {
			t.Errorf("bootlet-kubelet.service: %s=bootlet.service would stop the kubelet with bootlet", key)
		}
	}
	for _, n := range units {
		if len(us[n].list("Unit", "Before")) > 0 {
			t.Errorf("%s: Before= %q: the order is written with After= only", n, us[n].list("Unit", "Before"))
		}
		if got := us[n].list("Install", "WantedBy"); !slices.Equal(got, []string{"multi-user.target"}) {
			t.Errorf("%s: WantedBy=%q, want multi-user.target", n, got)
		}
		if got := us[n].one(t, "Service", "Restart"); got != "always" {
			t.Errorf("%s: Restart=%s, want always", n, got)
		}
	}

	// "Ready" as make reboot waits for it before the next start:
	// containerd.sh until `ctr version` answers, bootlet-up.sh until
	// bootlet's /readyz is ok (the daemon sends READY=1 right when it is).
	for _, n := range units[:2] {
		if got := us[n].one(t, "Service", "Type"); got != "notify" {
			t.Errorf("%s: Type=%s, want notify", n, got)
		}
	}
	if got := bootlet.one(t, "Service", "NotifyAccess"); got != "main" {
		t.Errorf("bootlet.service: NotifyAccess=%s, want main", got)
	}
	// Stopping containerd must not stop the containers.
	if got := ctrd.one(t, "Service", "KillMode"); got != "process" {
		t.Errorf("bootlet-containerd.service: KillMode=%s, want process", got)
	}
	// bootlet mounts (memory emptyDirs, the kubelet's root dir rshared) for
	// the host to see: no option that gives it a mount namespace.
	for _, key := range []string{"ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "PrivateMounts",
		"ReadOnlyPaths", "ReadWritePaths", "InaccessiblePaths", "TemporaryFileSystem", "BindPaths", "BindReadOnlyPaths",
		"ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups", "ProtectProc",
		"ProcSubset", "MountFlags", "RootDirectory", "RootImage", "PrivateNetwork", "ProtectHostname"} {
		for _, n := range units {
			if len(us[n]["Service"][key]) > 0 {
				t.Errorf("%s: %s= gives the daemon namespaces of its own; it must share the host's mounts", n, key)
			}
		}
	}

	// The command lines: make up's flags (hack/bootlet-up.sh,
	// hack/kubelet-up.sh), on the node's paths. The node name is the
	// default of both (the lower-cased host name, as make up's).
	root := repoRoot(t)
	execStart := func(u unit) []string {
		t.Helper()
		return strings.Fields(u.one(t, "Service", "ExecStart"))
	}
	// bootlet's settings are the shipped config file's; cmd/internal/daemon's
	// TestShippedConfigIsMakeUps holds its fields to hack/bootlet-up.sh's
	// flags.
	bootletArgs := execStart(bootlet)
	if want := []string{"/usr/local/bin/bootlet", "daemon", "--config", shippedConfigPath, "$BOOTLET_ARGS"}; !slices.Equal(bootletArgs, want) {
		t.Errorf("bootlet.service: ExecStart=%q, want %q", bootletArgs, want)
	}
	if !slices.Contains(bootlet.list("Unit", "AssertPathExists"), shippedConfigPath) {
		t.Errorf("bootlet.service: no AssertPathExists=%s", shippedConfigPath)
	}
	cfg := shippedConfig(t)
	kubeletArgs := execStart(kubelet)
	kFlags := slices.DeleteFunc(scriptFlags(t, filepath.Join(root, "hack/kubelet-up.sh"), `setsid "${KUBELET_BIN}"`),
		func(f string) bool { return f == "hostname-override" })
	gotK := shellcmd.FlagNames(kubeletArgs)
	slices.Sort(gotK)
	slices.Sort(kFlags)
	if !slices.Equal(gotK, kFlags) {
		t.Errorf("bootlet-kubelet.service's flags %q differ from hack/kubelet-up.sh's %q", gotK, kFlags)
	}
	if kubeletArgs[len(kubeletArgs)-1] != "$KUBELET_ARGS" {
		t.Errorf("bootlet-kubelet.service: ExecStart does not end in $KUBELET_ARGS: %q", kubeletArgs)
	}
	for _, n := range units[1:] {
		if got := us[n].one(t, "Service", "EnvironmentFile"); got != "-/etc/default/bootlet" {
			t.Errorf("%s: EnvironmentFile=%s, want -/etc/default/bootlet", n, got)
		}
	}

	// One CRI socket for all three, the one containerd.toml serves.
	toml, err := os.ReadFile("containerd.toml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\[grpc\]\n\s*address = "([^"]+)"`).FindSubmatch(toml)
	if m == nil {
		t.Fatal("containerd.toml: no [grpc] address")
	}
	sock := string(m[1])
	if got := cfg.RuntimeEndpoint; got != "unix://"+sock {
		t.Errorf("%s: runtimeEndpoint %s, containerd serves %s", shippedConfigPath, got, sock)
	}
	def, err := os.ReadFile("bootlet.default")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(def, []byte("--kubelet-runtime-endpoint unix://"+sock)) {
		t.Errorf("bootlet.default: the render command does not give the kubelet containerd's socket %s", sock)
	}
	if got := strings.Fields(ctrd.one(t, "Service", "ExecStart")); !slices.Equal(got[1:], []string{"--config", "/etc/bootlet/containerd.toml"}) {
		t.Errorf("bootlet-containerd.service: ExecStart %q, want --config /etc/bootlet/containerd.toml", got)
	}
	// bootlet's and the kubelet's view of each other.
	for _, kv := range [][2]string{
		{cfg.Handoff.KubeletRootDir, flagValue(kubeletArgs, "root-dir")},
		{filepath.Dir(cfg.Pivot.Kubeconfig), filepath.Dir(flagValue(kubeletArgs, "kubeconfig"))},
	} {
		if kv[0] != kv[1] {
			t.Errorf("%s and bootlet-kubelet.service disagree: %s vs %s", shippedConfigPath, kv[0], kv[1])
		}
	}
}

// shippedConfigPath is where make install puts bootlet-config.yaml.
const shippedConfigPath = "/etc/bootlet/config.yaml"

// shippedConfig is bootlet-config.yaml as the daemon reads it (strict,
// defaulted) and validated.
func shippedConfig(t *testing.T) *config.BootletConfiguration {
	t.Helper()
	data, err := os.ReadFile("bootlet-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Decode(data, filepath.Dir(shippedConfigPath))
	if err != nil {
		t.Fatalf("bootlet-config.yaml: %v", err)
	}
	if errs := config.Validate(c); len(errs) > 0 {
		t.Fatalf("bootlet-config.yaml: %v", errs.ToAggregate())
	}
	return c
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// stubOut is an _output tree with an executable stub for every file make
// install copies.
func stubOut(t *testing.T) string {
	t.Helper()
	out := t.TempDir()
	for _, f := range []string{"bin/bootlet", "bin/bootlet-tools", "bin/containerd", "bin/containerd-shim-runc-v2",
		"bin/runc", "bin/ctr", "bin/kubelet", "cni/bin/bridge", "cni/bin/host-local", "cni/bin/loopback", "cni/bin/portmap"} {
		p := filepath.Join(out, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// makeInstall runs make install into destdir; as root it runs as nobody, so
// that a step that needs root (an owner, a path outside DESTDIR, systemctl)
// fails. As nobody it runs in installTree's copy: the checkout itself may sit
// where nobody cannot read it (a clone under /root, mode 0700 on Debian).
func makeInstall(t *testing.T, out, destdir string, vars ...string) string {
	t.Helper()
	tree := repoRoot(t)
	if os.Geteuid() == 0 {
		tree = installTree(t)
	}
	args := append([]string{"-s", "-C", tree, "install", "OUT=" + out, "DESTDIR=" + destdir}, vars...)
	cmd := exec.Command("make", args...)
	if os.Geteuid() == 0 {
		if err := os.MkdirAll(destdir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Only below the temp dir: /tmp itself keeps its mode (1777, sticky).
		for d := destdir; strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o777); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(out, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "make"}, args...)...)
	}
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make install %q: %v\n%s", vars, err, got)
	}
	return string(got)
}

// installTree copies what `make install` reads (the Makefile, hack/install.sh
// and hack/lib.sh, dist/systemd) into a world-readable temporary directory.
func installTree(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "repo")
	src := repoRoot(t)
	for _, f := range []string{"Makefile", "hack/install.sh", "hack/lib.sh"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-p", filepath.Join(src, f), filepath.Join(dst, f)).CombinedOutput(); err != nil {
			t.Fatalf("copying %s: %v\n%s", f, err, out)
		}
	}
	if out, err := exec.Command("cp", "-rp", filepath.Join(src, "dist"), dst).CombinedOutput(); err != nil {
		t.Fatalf("copying dist: %v\n%s", err, out)
	}
	if out, err := exec.Command("chmod", "-R", "a+rX", dst).CombinedOutput(); err != nil {
		t.Fatalf("chmod %s: %v\n%s", dst, err, out)
	}
	for d := dst; strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze is not installed (Debian's systemd package; make deps installs it): %v", err)
	}
	return p
}

// verify runs systemd-analyze verify on the units inside root. systemd is not
// PID 1 here (nor needed): --root makes it load units, and check ExecStart
// binaries, under root; the host's own units (sysinit.target,
// multi-user.target, ...) are copied in for the dependencies.
func verify(t *testing.T, root string) (string, error) {
	t.Helper()
	sys := filepath.Join(root, "usr/lib/systemd/system")
	if _, err := os.Stat(filepath.Join(sys, "multi-user.target")); err != nil {
		if err := os.MkdirAll(sys, 0o755); err != nil {
			t.Fatal(err)
		}
		// -n: never over the units under test (PREFIX=/usr puts them there).
		if out, err := exec.Command("cp", "-an", "/usr/lib/systemd/system/.", sys).CombinedOutput(); err != nil {
			t.Fatalf("copying the host's units: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(systemdAnalyze(t), append([]string{"verify", "--man=no", "--root=" + root}, installed...)...)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestInstallVerify: make install into a temporary DESTDIR as an
// unprivileged user, then systemd-analyze verify on the installed units (the
// binaries they run must be there), systemctl --root enable, and the same
// for PREFIX=/usr.
func TestInstallVerify(t *testing.T) {
	systemdAnalyze(t)
	out := stubOut(t)
	dest := filepath.Join(t.TempDir(), "root")
	log := makeInstall(t, out, dest)
	if !strings.Contains(log, "not reloading systemd: DESTDIR is set") {
		t.Errorf("make install with DESTDIR did not say it leaves systemd alone:\n%s", log)
	}
	want := map[string]os.FileMode{
		"usr/local/bin/bootlet": 0o755, "usr/local/bin/bootlet-tools": 0o755,
		"usr/local/libexec/bootlet/containerd": 0o755, "usr/local/libexec/bootlet/containerd-shim-runc-v2": 0o755,
		"usr/local/libexec/bootlet/runc": 0o755, "usr/local/libexec/bootlet/ctr": 0o755, "usr/local/libexec/bootlet/kubelet": 0o755,
		"usr/local/libexec/bootlet/cni/bridge": 0o755, "usr/local/libexec/bootlet/cni/host-local": 0o755,
		"usr/local/libexec/bootlet/cni/loopback": 0o755, "usr/local/libexec/bootlet/cni/portmap": 0o755,
		"usr/local/lib/systemd/system/bootlet-containerd.service": 0o644,
		"usr/local/lib/systemd/system/bootlet.service":            0o644,
		"usr/local/lib/systemd/system/bootlet-kubelet.service":    0o644,
		"usr/local/lib/systemd/system/" + workerUnit:              0o644,
		"usr/local/lib/systemd/system/" + agentUnit:               0o644,
		"usr/local/lib/systemd/system/" + workerDaemonUnit:        0o644,
		"etc/bootlet/worker.yaml":                                 0o644,
		"etc/bootlet/containerd.toml":                             0o644, "etc/default/bootlet": 0o644,
		"etc/bootlet/config.yaml": 0o644,
	}
	got := map[string]os.FileMode{}
	err := filepath.WalkDir(dest, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dest, p)
		got[rel] = fi.Mode().Perm()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("make install wrote\n%v\nwant\n%v", got, want)
	}
	if fi, err := os.Stat(filepath.Join(dest, "usr/local/share/bootlet/images")); err != nil || !fi.IsDir() {
		t.Errorf("no images directory (bootlet's --preload-images): %v", err)
	}
	// The installed units are the files of dist/systemd, for /usr/local.
	for _, n := range installed {
		a, _ := os.ReadFile(n)
		b, _ := os.ReadFile(filepath.Join(dest, "usr/local/lib/systemd/system", n))
		if !bytes.Equal(a, b) {
			t.Errorf("installed %s differs from dist/systemd/%s", n, n)
		}
	}

	// An administrator's config is kept.
	cfg := filepath.Join(dest, "etc/default/bootlet")
	if err := os.WriteFile(cfg, []byte("BOOTLET_ARGS=--node-name mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	log = makeInstall(t, out, dest)
	if b, _ := os.ReadFile(cfg); string(b) != "BOOTLET_ARGS=--node-name mine\n" {
		t.Errorf("a second make install overwrote /etc/default/bootlet: %q\n%s", b, log)
	}
	if !strings.Contains(log, "kept "+cfg) {
		t.Errorf("make install did not say it kept %s:\n%s", cfg, log)
	}

	if out, err := verify(t, dest); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// [Install] works offline: enabling links them into multi-user.target.
	if out, err := exec.Command("systemctl", append([]string{"--root=" + dest, "enable"}, installed...)...).CombinedOutput(); err != nil {
		t.Errorf("systemctl --root enable: %v\n%s", err, out)
	}
	for _, n := range installed {
		if _, err := os.Lstat(filepath.Join(dest, "etc/systemd/system/multi-user.target.wants", n)); err != nil {
			t.Errorf("enable did not link %s into multi-user.target.wants: %v", n, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dest, "etc/systemd/system", workerUnit+".wants", agentUnit)); err != nil {
		t.Errorf("enable did not link %s into %s.wants: %v", agentUnit, workerUnit, err)
	}

	// The check is not vacuous: a unit whose binary is missing fails it.
	if err := os.Remove(filepath.Join(dest, "usr/local/libexec/bootlet/kubelet")); err != nil {
		t.Fatal(err)
	}
	if out, err := verify(t, dest); err == nil || !strings.Contains(out, "/usr/local/libexec/bootlet/kubelet") {
		t.Errorf("systemd-analyze verify passed without the kubelet binary: %v\n%s", err, out)
	}

	// PREFIX=/usr: the units move to /usr/lib/systemd/system and name /usr's paths.
	dest = filepath.Join(t.TempDir(), "root")
	makeInstall(t, out, dest, "PREFIX=/usr")
	for _, n := range installed {
		b, err := os.ReadFile(filepath.Join(dest, "usr/lib/systemd/system", n))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("/usr/local/bin/")) || bytes.Contains(b, []byte("/usr/local/libexec")) || bytes.Contains(b, []byte("/usr/local/share")) {
			t.Errorf("%s for PREFIX=/usr still names /usr/local's files", n)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "etc/bootlet/containerd.toml")); !bytes.Contains(b, []byte(`BinaryName = "/usr/libexec/bootlet/runc"`)) {
		t.Errorf("containerd.toml for PREFIX=/usr does not name /usr/libexec/bootlet/runc")
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "etc/bootlet/config.yaml")); !bytes.Contains(b, []byte("preloadImages: /usr/share/bootlet/images\n")) {
		t.Errorf("config.yaml for PREFIX=/usr does not preload /usr/share/bootlet/images")
	}
	if out, err := verify(t, dest); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify (PREFIX=/usr): %v\n%s", err, out)
	}
}

// TestWorkerKubelet holds a worker's kubelet unit to the master's: the same
// kubelet on the same CRI, configuration, root and certificate directories
// and environment file, plus the bootstrap kubeconfig of `bootlet join`; no
// dependency on bootlet's daemon, which a worker does not run; skipped, not
// failed, until the node has joined; the images imported before it starts.
func TestWorkerKubelet(t *testing.T) {
	master := parseUnit(t, "bootlet-kubelet.service")
	worker := parseUnit(t, workerUnit)
	args := strings.Fields(worker.one(t, "Service", "ExecStart"))
	margs := strings.Fields(master.one(t, "Service", "ExecStart"))
	if args[0] != margs[0] {
		t.Errorf("%s runs %s, bootlet-kubelet.service %s", workerUnit, args[0], margs[0])
	}
	got, want := shellcmd.FlagNames(args), append(shellcmd.FlagNames(margs), "bootstrap-kubeconfig")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s's flags %q, want bootlet-kubelet.service's plus --bootstrap-kubeconfig: %q", workerUnit, got, want)
	}
	for _, f := range []string{"config", "kubeconfig", "root-dir", "cert-dir"} {
		if flagValue(args, f) != flagValue(margs, f) {
			t.Errorf("%s: --%s %s, bootlet-kubelet.service's %s", workerUnit, f, flagValue(args, f), flagValue(margs, f))
		}
	}
	// bootlet join --out /etc/kubernetes writes it there.
	if got := flagValue(args, "bootstrap-kubeconfig"); got != "/etc/kubernetes/bootstrap-kubelet.conf" {
		t.Errorf("%s: --bootstrap-kubeconfig %s", workerUnit, got)
	}
	if args[len(args)-1] != "$KUBELET_ARGS" {
		t.Errorf("%s: ExecStart does not end in $KUBELET_ARGS: %q", workerUnit, args)
	}
	if got := worker.one(t, "Service", "EnvironmentFile"); got != "-/etc/default/bootlet" {
		t.Errorf("%s: EnvironmentFile=%s", workerUnit, got)
	}
	for _, key := range []string{"Requires", "Wants", "BindsTo", "PartOf", "Requisite", "After"} {
		if slices.Contains(worker.list("Unit", key), "bootlet.service") {
			t.Errorf("%s: %s=bootlet.service: a worker runs no bootlet daemon", workerUnit, key)
		}
	}
	for _, dep := range []string{"bootlet-containerd.service"} {
		if !slices.Contains(worker.list("Unit", "Requires"), dep) || !slices.Contains(worker.list("Unit", "After"), dep) {
			t.Errorf("%s: no Requires= and After=%s", workerUnit, dep)
		}
	}
	for _, c := range []string{"kubelet.service", "bootlet-kubelet.service", "bootlet.service"} {
		if !slices.Contains(worker.list("Unit", "Conflicts"), c) {
			t.Errorf("%s: no Conflicts=%s", workerUnit, c)
		}
	}
	if got := worker.list("Unit", "ConditionPathExists"); !slices.Equal(got, []string{"|/etc/kubernetes/bootstrap-kubelet.conf", "|/etc/kubernetes/kubelet.conf"}) {
		t.Errorf("%s: ConditionPathExists=%q", workerUnit, got)
	}
	pre := worker.list("Service", "ExecStartPre")
	if want := strings.Fields("/usr/local/bin/bootlet images import --address /run/bootlet/containerd.sock /usr/local/share/bootlet/images " + master.one(t, "Service", "ExecStartPre")); !slices.Equal(pre, want) {
		t.Errorf("%s: ExecStartPre=%q, want the images' import, then bootlet-kubelet.service's start gate %q", workerUnit, pre, want)
	}
	if got, want := worker.list("Service", "ExecStopPost"), master.list("Service", "ExecStopPost"); !slices.Equal(got, want) {
		t.Errorf("%s: ExecStopPost=%q, want bootlet-kubelet.service's %q", workerUnit, got, want)
	}
	for _, k := range []string{"Restart", "RestartSec"} {
		if worker.one(t, "Service", k) != master.one(t, "Service", k) {
			t.Errorf("%s: %s=%s, bootlet-kubelet.service's %s", workerUnit, k, worker.one(t, "Service", k), master.one(t, "Service", k))
		}
	}
	if got := worker.list("Install", "WantedBy"); !slices.Equal(got, []string{"multi-user.target"}) {
		t.Errorf("%s: WantedBy=%q", workerUnit, got)
	}
}

// TestUpgradeAgentUnit holds a worker's upgrade agent to its kubelet's unit:
// the installed bootlet's `upgrade agent` with no flag but the kubelet's
// file (which install.sh moves with PREFIX) and the environment file's, so
// its other defaults are the worker's paths (cmd/internal/upgrade's
// TestAgentDefaultsAreAWorkers compares them with these files: the binary
// and kubeconfig of the worker's kubelet, a restart of its unit, the CRI
// socket); started with the kubelet, under the same condition, and never
// stopped or restarted with it, since the agent restarts it; never beside
// bootlet's daemon, which runs its own agent.
func TestUpgradeAgentUnit(t *testing.T) {
	agent := parseUnit(t, agentUnit)
	worker := parseUnit(t, workerUnit)
	bootlet := parseUnit(t, "bootlet.service")
	args := strings.Fields(agent.one(t, "Service", "ExecStart"))
	bin := strings.Fields(bootlet.one(t, "Service", "ExecStart"))[0]
	kubelet := strings.Fields(worker.one(t, "Service", "ExecStart"))[0]
	if want := []string{bin, "upgrade", "agent", "--kubelet-binary", kubelet, "$UPGRADE_AGENT_ARGS"}; !slices.Equal(args, want) {
		t.Errorf("%s: ExecStart=%q, want %q", agentUnit, args, want)
	}
	// The agent's --kubelet-binary default is config.DefaultKubeletBinary.
	if kubelet != config.DefaultKubeletBinary {
		t.Errorf("%s runs %s; the upgrade agent replaces %s", workerUnit, kubelet, config.DefaultKubeletBinary)
	}
	def, err := os.ReadFile("bootlet.default")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^UPGRADE_AGENT_ARGS=$`).Match(def) {
		t.Error("bootlet.default: no empty UPGRADE_AGENT_ARGS=")
	}
	if got := agent.one(t, "Service", "EnvironmentFile"); got != "-/etc/default/bootlet" {
		t.Errorf("%s: EnvironmentFile=%s", agentUnit, got)
	}
	for _, dep := range []string{"bootlet-containerd.service", workerUnit} {
		for _, key := range []string{"Wants", "After"} {
			if !slices.Contains(agent.list("Unit", key), dep) {
				t.Errorf("%s: no %s=%s", agentUnit, key, dep)
			}
		}
	}
	for _, key := range []string{"Requires", "BindsTo", "PartOf", "Requisite"} {
		for _, dep := range []string{workerUnit, "bootlet-containerd.service"} {
			if slices.Contains(agent.list("Unit", key), dep) {
				t.Errorf("%s: %s=%s would stop or restart the agent with %s", agentUnit, key, dep, dep)
			}
		}
	}
	if !slices.Contains(agent.list("Unit", "Conflicts"), "bootlet.service") {
		t.Errorf("%s: no Conflicts=bootlet.service", agentUnit)
	}
	if got, want := agent.list("Unit", "ConditionPathExists"), worker.list("Unit", "ConditionPathExists"); !slices.Equal(got, want) {
		t.Errorf("%s: ConditionPathExists=%q, the kubelet's %q", agentUnit, got, want)
	}
	for _, k := range []string{"Restart", "RestartSec"} {
		if agent.one(t, "Service", k) != worker.one(t, "Service", k) {
			t.Errorf("%s: %s=%s, %s's %s", agentUnit, k, agent.one(t, "Service", k), workerUnit, worker.one(t, "Service", k))
		}
	}
	if got := agent.list("Install", "WantedBy"); !slices.Equal(got, []string{"multi-user.target", workerUnit}) {
		t.Errorf("%s: WantedBy=%q, want multi-user.target and %s", agentUnit, got, workerUnit)
	}
}

// TestKubeletStartGate: the kubelet's unit passes the handoff's start gate
// before the kubelet starts and withdraws it when it stops, in the
// directory of the socket the shipped configuration gives bootlet (where
// the daemon keeps the gate's files), and neither step can keep the
// kubelet from starting ("-").
func TestKubeletStartGate(t *testing.T) {
	us := loadUnits(t, ".")
	kubelet := us["bootlet-kubelet.service"]
	cfgData, err := os.ReadFile("bootlet-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var socket string
	for _, line := range strings.Split(string(cfgData), "\n") {
		if v, ok := strings.CutPrefix(line, "socket:"); ok {
			socket = strings.TrimSpace(v)
		}
	}
	if socket == "" {
		t.Fatal("bootlet-config.yaml names no socket")
	}
	dir := filepath.Dir(socket)
	want := map[string]string{
		"ExecStartPre": "-/usr/local/bin/bootlet kubelet-gate --dir " + dir,
		"ExecStopPost": "-/usr/local/bin/bootlet kubelet-gate --dir " + dir + " --stopped",
	}
	for key, w := range want {
		if got := strings.Join(strings.Fields(kubelet.one(t, "Service", key)), " "); got != w {
			t.Errorf("bootlet-kubelet.service: %s=%q, want %q", key, got, w)
		}
	}
}

// TestWorkerDaemon: a worker's daemon is bootlet.service's binary and verb
// with the worker's configuration, which is valid and has no pivot, no
// bootstrap manifests and no kubelet step of its own (the upgrade agent's),
// hands pods to the kubelet at the staticPodPath `bootlet join` gives the
// worker's kubelet, and reads the checkpointer identity where a labelled
// node's agent writes it; started with the worker's kubelet, under the
// same condition, never beside bootlet.service.
func TestWorkerDaemon(t *testing.T) {
	daemon := parseUnit(t, workerDaemonUnit)
	master := parseUnit(t, "bootlet.service")
	worker := parseUnit(t, workerUnit)
	args := strings.Fields(daemon.one(t, "Service", "ExecStart"))
	margs := strings.Fields(master.one(t, "Service", "ExecStart"))
	if want := []string{margs[0], "daemon", "--config", "/etc/bootlet/worker.yaml", "$BOOTLET_WORKER_ARGS"}; !slices.Equal(args, want) {
		t.Errorf("%s: ExecStart=%q, want %q", workerDaemonUnit, args, want)
	}
	for _, k := range []string{"Type", "NotifyAccess", "KillMode", "OOMScoreAdjust", "NoNewPrivileges"} {
		if daemon.one(t, "Service", k) != master.one(t, "Service", k) {
			t.Errorf("%s: %s=%s, bootlet.service's %s", workerDaemonUnit, k, daemon.one(t, "Service", k), master.one(t, "Service", k))
		}
	}
	if !slices.Contains(daemon.list("Unit", "Conflicts"), "bootlet.service") {
		t.Errorf("%s: no Conflicts=bootlet.service", workerDaemonUnit)
	}
	if got, want := daemon.list("Unit", "ConditionPathExists"), worker.list("Unit", "ConditionPathExists"); !slices.Equal(got, want) {
		t.Errorf("%s: ConditionPathExists=%q, the kubelet's %q", workerDaemonUnit, got, want)
	}
	if got := daemon.list("Install", "WantedBy"); !slices.Equal(got, []string{"multi-user.target", workerUnit}) {
		t.Errorf("%s: WantedBy=%q", workerDaemonUnit, got)
	}
	def, err := os.ReadFile("bootlet.default")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^BOOTLET_WORKER_ARGS=$`).Match(def) {
		t.Error("bootlet.default: no empty BOOTLET_WORKER_ARGS=")
	}
	data, err := os.ReadFile("bootlet-worker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Decode(data, "/etc/bootlet")
	if err != nil {
		t.Fatalf("bootlet-worker.yaml: %v", err)
	}
	if errs := config.Validate(c); len(errs) > 0 {
		t.Fatalf("bootlet-worker.yaml: %v", errs.ToAggregate())
	}
	m := shippedConfig(t)
	switch {
	case c.Pivot.Kubeconfig != "" || c.Pivot.SelfHostedAssets != "" || c.ManifestsDir != "" || c.PreloadImages != "":
		t.Errorf("the worker's configuration runs a bootstrap or a pivot: %+v", c)
	case c.Handoff.KubeletBinary == nil || *c.Handoff.KubeletBinary != "":
		t.Errorf("the worker's daemon takes the kubelet step (%v): bootlet-upgrade-agent.service does", c.Handoff.KubeletBinary)
	case c.Handoff.KubeletStaticPodPath == nil || *c.Handoff.KubeletStaticPodPath != manifests.DefaultKubeletStaticPodPath:
		t.Errorf("the worker's daemon hands pods over at %v; bootlet join gives the kubelet %s", c.Handoff.KubeletStaticPodPath, manifests.DefaultKubeletStaticPodPath)
	case c.Checkpointer.Kubeconfig != nodekeys.DefaultIdentityKubeconfig:
		t.Errorf("the worker's daemon reads the checkpointer identity at %s; the agent writes it at %s", c.Checkpointer.Kubeconfig, nodekeys.DefaultIdentityKubeconfig)
	case c.RuntimeEndpoint != m.RuntimeEndpoint || c.RootDir != m.RootDir || c.Socket != m.Socket || c.Handoff.KubeletRootDir != m.Handoff.KubeletRootDir:
		t.Errorf("the worker's paths differ from a master's: %+v", c)
	}
}
