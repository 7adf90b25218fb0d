// Package hack holds no Go code: its tests run the shell functions of
// lib.sh that guard destructive steps (rm -rf of a state directory,
// iptables rules read back from the host) against hostile input.
package hack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// bash runs script after sourcing lib.sh, with PATH prefixed by dir.
func bash(t *testing.T, dir, script string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"-c", `source ./lib.sh; ` + script, "test"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestDedicatedDir(t *testing.T) {
	tmp := t.TempDir()
	if err := os.Symlink("/", filepath.Join(tmp, "bootlet-root-link")); err != nil {
		t.Fatal(err)
	}
	refused := []string{
		"/", "/var", "/var/lib", "/var/lib/..", "/var/lib/bootlet-up/..", "/var/lib/bootlet-up/../../etc",
		"/run/../var/lib/bootlet-up", "var/lib/bootlet-up", "", "/home/user", "//", "/bootlet",
		filepath.Join(tmp, "bootlet-root-link"),
	}
	for _, p := range refused {
		if out, err := bash(t, tmp, `dedicated_dir "$1"`, p); err == nil {
			t.Errorf("dedicated_dir %q accepted: %s", p, out)
		}
	}
	accepted := map[string]string{
		"/var/lib/bootlet-up":   "/var/lib/bootlet-up",
		"/run/bootlet-up/":      "/run/bootlet-up",
		"/tmp/x//bootlet-e2e-1": "/tmp/x/bootlet-e2e-1",
	}
	for p, want := range accepted {
		out, err := bash(t, tmp, `dedicated_dir "$1"`, p)
		if err != nil || strings.TrimSpace(out) != want {
			t.Errorf("dedicated_dir %q = %q, %v; want %q", p, out, err, want)
		}
	}
}

// TestUpRefusesStateDirs: up.sh stops at its arguments, before anything
// runs, when LIBDIR or RUNDIR is not a dedicated directory. The verb is
// one up.sh does not know, so even a wrongly accepted path would only
// print the usage.
func TestUpRefusesStateDirs(t *testing.T) {
	for _, dirs := range [][2]string{{"/var/lib/..", "/run/bootlet-up"}, {"/var/lib/bootlet-up", "/run"}, {"/var/lib/bootlet-up", "/var/lib/bootlet-up/run"}} {
		cmd := exec.Command("bash", "./up.sh", "no-such-verb", dirs[0], dirs[1])
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || strings.Contains(string(out), "usage") || !strings.Contains(string(out), "must") {
			t.Errorf("up.sh %v: want exit 2 naming the rule, got %v: %s", dirs, err, out)
		}
	}
}

// TestCleanupIptablesNeverEvaluates: cleanup_iptables deletes the CNI
// rules of its network as argv, and leaves alone (never executes) a rule
// crafted by a pod with NET_ADMIN to look like one.
func TestCleanupIptablesNeverEvaluates(t *testing.T) {
	tmp := t.TempDir()
	pwned := filepath.Join(tmp, "pwned")
	calls := filepath.Join(tmp, "calls")
	save := `-A POSTROUTING -s 10.88.0.5/32 -m comment --comment "name: \"bootlet-br0\" id: \"abc\"" -j CNI-0123abcd
-A CNI-0123abcd -d 10.88.0.0/16 -m comment --comment "name: \"bootlet-br0\" id: \"abc\"" -j ACCEPT
-A CNI-0123abcd -m comment --comment "name: \"bootlet-br0\" $(touch ` + pwned + `)" -j ACCEPT
-A CNI-0123abcd -m comment --comment "name: \"bootlet-br0\"" -j ACCEPT; touch ` + pwned + `
-A CNI-0123abcd -m comment --comment "name: \"bootlet-br0\"" -F
-A KUBE-SERVICES -m comment --comment "name: \"bootlet-br0\"" -j ACCEPT
-A CNI-0123abcd -m comment --comment "name: \"other\" \"bootlet-br0\"" -j ACCEPT
-A POSTROUTING -m comment --comment "name: \"bootlet-br0\" unterminated -j ACCEPT
`
	if err := os.WriteFile(filepath.Join(tmp, "save.txt"), []byte(save), 0o600); err != nil {
		t.Fatal(err)
	}
	fake := map[string]string{
		"iptables-save": "#!/bin/bash\n[[ \"$2\" == nat ]] && cat " + filepath.Join(tmp, "save.txt") + "\nexit 0\n",
		"iptables":      "#!/bin/bash\nprintf '%s|' \"$@\" >> " + calls + "\necho >> " + calls + "\n",
	}
	for name, body := range fake {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := bash(t, tmp, `cleanup_iptables bootlet-br0`); err != nil {
		t.Fatalf("cleanup_iptables: %v\n%s", err, out)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("a hostile iptables-save line was executed")
	}
	got, _ := os.ReadFile(calls)
	want := strings.Join([]string{
		`-w|-t|nat|-D|POSTROUTING|-s|10.88.0.5/32|-m|comment|--comment|name: "bootlet-br0" id: "abc"|-j|CNI-0123abcd|`,
		`-w|-t|nat|-D|CNI-0123abcd|-d|10.88.0.0/16|-m|comment|--comment|name: "bootlet-br0" id: "abc"|-j|ACCEPT|`,
		// The crafted comment is one argument to a deletion, not a command.
		`-w|-t|nat|-D|CNI-0123abcd|-m|comment|--comment|name: "bootlet-br0" $(touch ` + pwned + `)|-j|ACCEPT|`,
		`-w|-t|nat|-D|CNI-0123abcd|-m|comment|--comment|name: "bootlet-br0"|-j|ACCEPT;|touch|` + pwned + `|`,
		`-w|-t|nat|-F|CNI-0123abcd|`,
		`-w|-t|nat|-X|CNI-0123abcd|`,
	}, "\n") + "\n"
	if string(got) != want {
		t.Errorf("iptables calls:\n%s\nwant:\n%s", got, want)
	}
}
