//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/bootlet/bootlet/e2e/nodes"
)

var statusColumns = regexp.MustCompile(`\s{2,}`)

// checkMasterStatus runs `bootlet master status` on m and checks it: each
// of masters listed as a master whose member is a voter, answering unless
// it is down ("" none), its apiserver Ready unless down, exactly one
// leader, and no member without a Node.
func checkMasterStatus(t testing.TB, m nodes.Member, masters []string, down string, args ...string) {
	t.Helper()
	out, err := nodes.Inside(m.Node().PID1(), append([]string{"/usr/bin/bootlet", "master", "status"}, args...)...)
	if err != nil {
		t.Errorf("bootlet master status on %s: %v\n%s", m.Name, err, out)
		return
	}
	t.Logf("bootlet master status on %s:\n%s", m.Name, out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "NODE") {
		t.Errorf("bootlet master status: no table")
		return
	}
	seen, leaders := map[string]bool{}, 0
	for _, line := range lines[1:] {
		f := statusColumns.Split(strings.TrimSpace(line), -1)
		if len(f) != 6 {
			t.Errorf("bootlet master status: row %q has %d columns, want 6", line, len(f))
			continue
		}
		node, role, etcd, apiserver := f[0], f[1], f[4], f[5]
		if strings.Contains(etcd, "leader") {
			leaders++
		}
		if strings.Contains(etcd, "no Node") {
			t.Errorf("bootlet master status: a member without a Node: %q", line)
		}
		if !slices.Contains(masters, node) {
			continue
		}
		seen[node] = true
		wantAnswering := node != down
		switch {
		case role != "master":
			t.Errorf("bootlet master status: %s's role is %q, want master", node, role)
		case !strings.HasPrefix(etcd, "voter"):
			t.Errorf("bootlet master status: %s's member is %q, want a voter", node, etcd)
		case wantAnswering == strings.Contains(etcd, "not answering"):
			t.Errorf("bootlet master status: %s's member is %q (powered off: %v)", node, etcd, !wantAnswering)
		case wantAnswering && apiserver != "Ready":
			t.Errorf("bootlet master status: %s's apiserver is %q, want Ready", node, apiserver)
		}
	}
	for _, name := range masters {
		if !seen[name] {
			t.Errorf("bootlet master status: no row for master %s", name)
		}
	}
	if leaders != 1 {
		t.Errorf("bootlet master status: %d leaders, want 1", leaders)
	}
}

// checkMasterRemoveRefusesLive runs `bootlet master remove` of a live
// master on m, which must refuse it and remove nothing.
func checkMasterRemoveRefusesLive(t testing.TB, m nodes.Member, live string) {
	t.Helper()
	out, err := nodes.Inside(m.Node().PID1(), "/usr/bin/bootlet", "master", "remove", live)
	if err == nil || !strings.Contains(string(out), "it is a live master: remove its label to demote it") {
		t.Errorf("bootlet master remove %s (a live master) on %s: err %v, want a refusal naming the label\n%s", live, m.Name, err, out)
		return
	}
	t.Logf("bootlet master remove %s refused: %s", live, strings.TrimSpace(string(out)))
}

// copyAdminConf puts the cluster's admin kubeconfig into node m's
// /var/tmp, as an administrator would bring theirs to a node that has
// none (a promoted worker), and returns its path there.
func copyAdminConf(t testing.TB, m nodes.Member) string {
	t.Helper()
	b, err := os.ReadFile(nodes.AdminConf)
	if err != nil {
		t.Fatal(err)
	}
	const inNode = "/var/tmp/admin.conf"
	if err := os.WriteFile(filepath.Join(m.Node().Root, inNode), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return inNode
}
