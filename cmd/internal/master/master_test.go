package master

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/bootlet/bootlet/masters"
)

// The table's columns are separated by at least two spaces, so a reader
// (the e2e tests, a script) can split a state with a comma and a space
// ("voter, leader") as one column.
func TestPrintStatus(t *testing.T) {
	rows := []masters.Row{
		{Node: "master-1", Role: "master", Ready: "Ready", Member: "69bf8bb3ef54e4f5", Etcd: "voter, leader", APIServer: "Ready"},
		{Node: "master-3", Role: "-", Ready: "-", Member: "f180d0c840e1883b", Etcd: "voter, not answering, no Node", APIServer: "-"},
	}
	var out bytes.Buffer
	err := printStatus(&out, rows, errors.New("member list refused"))
	if err == nil || !strings.Contains(err.Error(), "etcd: member list refused") {
		t.Errorf("err %v, want etcd's error after the table", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want a header and 2 rows:\n%s", len(lines), out.String())
	}
	for i, want := range [][]string{
		{"NODE", "ROLE", "STATUS", "ETCD MEMBER", "ETCD", "APISERVER"},
		{"master-1", "master", "Ready", "69bf8bb3ef54e4f5", "voter, leader", "Ready"},
		{"master-3", "-", "-", "f180d0c840e1883b", "voter, not answering, no Node", "-"},
	} {
		var got []string
		for _, f := range strings.Split(lines[i], "  ") {
			if f = strings.TrimSpace(f); f != "" {
				got = append(got, f)
			}
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("line %d: %q, want columns %q", i, lines[i], want)
		}
	}
}

func TestCommands(t *testing.T) {
	cmd := NewCommand()
	for _, verb := range []string{"status", "remove"} {
		c, _, err := cmd.Find([]string{verb})
		if err != nil || c.Name() != verb {
			t.Fatalf("no %s verb: %v", verb, err)
		}
		for _, flag := range []string{"kubeconfig", "asset-dir"} {
			if c.Flags().Lookup(flag) == nil {
				t.Errorf("master %s has no --%s", verb, flag)
			}
		}
	}
	rm, _, _ := cmd.Find([]string{"remove"})
	if rm.Flags().Lookup("force") == nil {
		t.Error("master remove has no --force")
	}
	if err := rm.Args(rm, nil); err == nil {
		t.Error("master remove takes no NAME")
	}
}
