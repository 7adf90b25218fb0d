package nodes

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestMembers(t *testing.T) {
	for _, tc := range []struct {
		masters, workers int
		want             []string
		err              bool
	}{
		{1, 1, []string{"master-1", "worker-1"}, false},
		{3, 1, []string{"master-1", "master-2", "master-3", "worker-1"}, false},
		{1, 0, []string{"master-1"}, false},
		{0, 1, nil, true},
		{1, 100, nil, true},
		{90, 0, nil, true},
	} {
		ms, err := Members(tc.masters, tc.workers)
		if (err != nil) != tc.err {
			t.Errorf("Members(%d, %d): %v", tc.masters, tc.workers, err)
			continue
		}
		var names []string
		for _, m := range ms {
			names = append(names, m.Name)
			if back, err := ParseMember(m.Name); err != nil || back != m {
				t.Errorf("ParseMember(%q) = %+v, %v; want %+v", m.Name, back, err, m)
			}
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("Members(%d, %d) = %q, want %q", tc.masters, tc.workers, names, tc.want)
		}
	}
}

func TestParseMemberRefuses(t *testing.T) {
	for _, s := range []string{"", "all", "master", "master-0", "master-1x", "worker--1", "Master-1", "node-1", "master-01"} {
		if m, err := ParseMember(s); err == nil {
			t.Errorf("ParseMember(%q) = %+v, want an error", s, m)
		}
	}
}

// Every node's names fit the kernel's limits and are the harness's own, and
// its address is in the subnet, not the host's, and unique.
func TestMemberNodes(t *testing.T) {
	ms, err := Members(89, 99)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Addr]string{ClusterHostAddr: "host", VIP: "the VIP"}
	for _, m := range ms {
		n := m.Node()
		if len(n.HostLink) > 15 {
			t.Errorf("%s: host link %q is longer than IFNAMSIZ-1", m.Name, n.HostLink)
		}
		for _, s := range []string{n.Name, n.Cgroup, n.Netns} {
			if !strings.HasPrefix(s, MachinePrefix) {
				t.Errorf("%s: %q does not start with %q", m.Name, s, MachinePrefix)
			}
		}
		a := m.Addr()
		if !ClusterSubnet.Contains(a) || a == ClusterSubnet.Addr() || a.As4()[3] == 255 {
			t.Errorf("%s: address %s is not a host address of %s", m.Name, a, ClusterSubnet)
		}
		if other, ok := seen[a]; ok {
			t.Errorf("%s and %s share %s", m.Name, other, a)
		}
		seen[a] = m.Name
		if n.Net.Addr.Bits() != ClusterSubnet.Bits() || n.Net.Gateway != ClusterHostAddr || n.Net.Bridge != ClusterBridge {
			t.Errorf("%s: network %+v", m.Name, n.Net)
		}
		if !strings.HasPrefix(n.Root, StateDir+"/"+m.Name+"/") || !strings.HasPrefix(n.Console, StateDir+"/"+m.Name+"/") {
			t.Errorf("%s: root %s, console %s: not in its state directory", m.Name, n.Root, n.Console)
		}
	}
	if a := (Member{Name: "master-1", Role: Master, Index: 1}).Addr(); a != netip.MustParseAddr("172.30.90.11") {
		t.Errorf("master-1 is %s", a)
	}
	if a := (Member{Name: "worker-1", Role: Worker, Index: 1}).Addr(); a != netip.MustParseAddr("172.30.90.101") {
		t.Errorf("worker-1 is %s", a)
	}
}

func TestNspawnArgs(t *testing.T) {
	n := Member{Name: "worker-2", Role: Worker, Index: 2}.Node()
	args := n.NspawnArgs()
	for _, want := range []string{"--boot", "--machine=bootlet-cluster-worker-2", "--register=no", "--keep-unit",
		"--network-namespace-path=/run/netns/bootlet-cluster-worker-2", "--directory=/var/lib/bootlet-cluster/worker-2/root",
		"--bind=/var/lib/bootlet-cluster/worker-2/containerd:/var/lib/bootlet-containerd"} {
		if !slices.Contains(args, want) {
			t.Errorf("nspawn args %q lack %q", args, want)
		}
	}
	if !containsArg(args, "--machine="+n.Name) {
		t.Errorf("NspawnPIDs would not find the node's own nspawn by %q", "--machine="+n.Name)
	}
}

func TestDataRaces(t *testing.T) {
	report := strings.Join([]string{
		"==================",
		"WARNING: DATA RACE",
		"Write at 0x00c000123456 by goroutine 7:",
		"  main.f()",
		"Previous read at 0x00c000123456 by goroutine 8:",
		"  main.g()",
		"==================",
	}, "\n")
	for _, tc := range []struct {
		name    string
		journal string
		want    []string
	}{
		{"none", "I1129 bootlet started\nall good\n", nil},
		{"empty", "", nil},
		{"one, between other lines", "before\n" + report + "\nafter\n", []string{strings.Join(strings.Split(report, "\n")[1:], "\n")}},
		{"two in a row", report + "\n" + report + "\n", []string{
			strings.Join(strings.Split(report, "\n")[1:], "\n"),
			strings.Join(strings.Split(report, "\n")[1:], "\n"),
		}},
		{"cut short at the journal's end", "x\nWARNING: DATA RACE\nRead at 0x1 by goroutine 3:", []string{"WARNING: DATA RACE\nRead at 0x1 by goroutine 3:"}},
		{"a second marker before the closing line", "WARNING: DATA RACE\na\nWARNING: DATA RACE\nb\n==================", []string{"WARNING: DATA RACE\na", "WARNING: DATA RACE\nb\n=================="}},
	} {
		got := DataRaces(tc.journal)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %d reports %q, want %d", tc.name, len(got), got, len(tc.want))
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: report %d is\n%s\nwant\n%s", tc.name, i, got[i], tc.want[i])
			}
		}
	}
	long := RaceMarker + strings.Repeat("\n  frame", 200)
	if got := DataRaces(long); len(got) != 1 || strings.Count(got[0], "\n") != 79 {
		t.Errorf("a report without its closing line is cut at 80 lines: got %d reports", len(got))
	}
}
