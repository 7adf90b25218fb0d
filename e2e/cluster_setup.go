//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bootlet/bootlet/config"
	"github.com/bootlet/bootlet/e2e/nodes"
	"github.com/bootlet/bootlet/pivot"
	"github.com/bootlet/bootlet/podapi"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// upTestCluster is how every test on make cluster's harness begins: the
// binaries it names and the test image present, no cluster up already,
// nodes.Up for masters and workers (its phases logged), and the teardown
// registered (make cluster-down's nodes.Down, failed or not; dump first
// when the test failed). It returns the cluster, its phases and the test
// image's archive.
func upTestCluster(t testing.TB, masters, workers int, bins []string, dump func(*nodes.Cluster)) (*nodes.Cluster, nodes.Phases, string) {
	t.Helper()
	return upTestClusterSpec(t, nodes.Spec{Masters: masters, Workers: workers}, bins, dump)
}

// upTestClusterSpec is upTestCluster for a cluster of spec.
func upTestClusterSpec(t testing.TB, spec nodes.Spec, bins []string, dump func(*nodes.Cluster)) (*nodes.Cluster, nodes.Phases, string) {
	t.Helper()
	masters, workers := spec.Masters, spec.Workers
	RequireRoot(t)
	for _, b := range bins {
		Bin(t, b)
	}
	testserver := filepath.Join(Repo, "_output", "images", "testserver.tar")
	if _, err := os.Stat(testserver); err != nil {
		t.Fatalf("the test image: %v (make images)", err)
	}
	if _, err := nodes.LoadState(); err == nil {
		t.Fatalf("a cluster is up already (%s/cluster.json): one at a time; make cluster-down removes it", nodes.StateDir)
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var c *nodes.Cluster
	t.Cleanup(func() {
		if t.Failed() && c != nil {
			dump(c)
		}
		t0 := time.Now()
		if err := nodes.Down(t.Logf); err != nil {
			t.Errorf("make cluster-down's teardown: %v", err)
		}
		t.Logf("teardown (every node powered off, state, bridge, rule removed) took %s", time.Since(t0).Round(time.Millisecond))
		// Last, the reasons again: CI shows only the tail of a failed
		// test, and the dump above is thousands of lines.
		if r, ok := t.(interface{ Failures() []string }); ok && t.Failed() {
			t.Logf("%s FAILED:\n%s", t.Name(), strings.Join(r.Failures(), "\n"))
		}
	})
	c, phases, err := nodes.Up(context.Background(), Repo, spec, t.Logf)
	t.Logf("make cluster MASTERS=%d WORKERS=%d, phase by phase:\n%s", masters, workers, phases)
	if err != nil {
		t.Fatalf("make cluster: %v", err)
	}
	return c, phases, testserver
}

// nodeBootlet is a client of bootlet's pod API on a node booted by
// systemd-nspawn (PID 1 pid1), through the container's root seen from the
// host.
func nodeBootlet(t testing.TB, pid1 int, node string) *Bootlet {
	t.Helper()
	sock := fmt.Sprintf("/proc/%d/root/run/bootlet/bootlet.sock", pid1)
	cs, err := podapi.NewClient("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	// Dir: the shipped configuration's rootDir (config.DefaultRootDir),
	// where the pivot record is.
	return &Bootlet{Socket: sock, NodeName: node, Client: cs, Dir: fmt.Sprintf("/proc/%d/root%s", pid1, config.DefaultRootDir)}
}

// waitPivotDone waits until the node's bootlet has recorded its pivot
// complete (its bootstrap pods are released and gone from its registry)
// and the apiserver no longer lists their mirror pods. A self-hosted pod
// Ready (waitSelfHosted) comes earlier, by the hand-over's drain; the
// record comes before the kubelet's housekeeping deletes the mirror pod of
// a terminated static pod (every 2 s, through the API address, the
// apiserver's last of all). A snapshot of the node's pods taken in between
// still holds a bootstrap pod, which then goes from under it.
func waitPivotDone(t testing.TB, b *Bootlet, admin kubernetes.Interface, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, func() (bool, string) {
		r, err := pivot.ReadDone(pivot.RecordPath(b.Dir))
		if err != nil {
			return false, err.Error()
		}
		if r == nil || len(r.Components) != len(pivoted) {
			return false, fmt.Sprintf("%s: no completed pivot recorded in %s: %+v", b.NodeName, pivot.RecordPath(b.Dir), r)
		}
		var mirrors []string
		for _, comp := range pivoted {
			name := comp + "-" + b.NodeName
			if _, err := admin.CoreV1().Pods("kube-system").Get(context.Background(), name, metav1.GetOptions{}); err == nil {
				mirrors = append(mirrors, name)
			} else if !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("%s: reading the mirror pod %s: %v", b.NodeName, name, err)
			}
		}
		if len(mirrors) > 0 {
			return false, fmt.Sprintf("%s: pivot recorded complete, the apiserver still lists the bootstrap pods' mirror pods %v", b.NodeName, mirrors)
		}
		return true, ""
	})
}

// checkPortRouted fails unless the master's bootlet routes its apiserver
// port: its router started, decided on a serving listener at least once (a
// "reuseport: route" line with a target), and its last routing failure, if
// any, was followed by a recovery. Runs 1-8 of
// docs/cluster.md had no routing at all on the nodes (pidfd_getfd refused
// by systemd-nspawn's filter), and only the self-hosted apiserver's
// restarts showed it.
//
// The first decision on a serving listener may come after the master is
// self-hosted: the router asks each listener's /readyz with a 1 s timeout,
// the kubelet's readiness probe and the serving gate wait longer, so at
// load 25 the pod can be Ready before any router probe got an answer (run
// 19). The journal is read again for up to a minute.
// readRouterJournal reads bootlet's journal for the port router: the
// decisions on a serving listener, the last routing failure not followed by
// a recovery, and the lines saying the port could not be routed at all.
func readRouterJournal(journal string) (routed int, failing string, lost []string) {
	for _, line := range strings.Split(journal, "\n") {
		switch {
		case strings.Contains(line, "The apiserver port is not routed"):
			lost = append(lost, line)
		case strings.Contains(line, `"reuseport: route"`) && !strings.Contains(line, `target=""`):
			routed++
		case strings.Contains(line, `"reuseport: routing failed`):
			failing = line
		case strings.Contains(line, `"reuseport: routing works again"`):
			failing = ""
		}
	}
	return routed, failing, lost
}

func checkPortRouted(t testing.TB, pid1 int, node string) {
	t.Helper()
	checkPortRoutedBy(t, pid1, node, "bootlet.service")
}

// checkPortRoutedBy is checkPortRouted for the daemon of unit (a worker's
// is bootlet-worker.service).
func checkPortRoutedBy(t testing.TB, pid1 int, node, unit string) {
	t.Helper()
	var routed int
	var failing string
	var lost []string
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := nodes.Inside(pid1, "journalctl", "-b", "--no-pager", "-o", "cat", "-u", unit)
		if err != nil {
			t.Fatalf("%s: %s's journal: %v", node, unit, err)
		}
		routed, failing, lost = readRouterJournal(out)
		if routed > 0 || len(lost) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	for _, line := range lost {
		t.Errorf("%s: bootlet could not route the apiserver port: %s", node, line)
	}
	if routed == 0 {
		t.Errorf("%s: bootlet's port router never decided on a serving apiserver (no \"reuseport: route\" line with a target) within a minute", node)
	}
	// A decision is logged before it is carried out: a failure with no
	// recovery after it means the last ones never were.
	if failing != "" {
		t.Errorf("%s: bootlet's port router fails to route, and has not recovered: %s", node, failing)
	}
	t.Logf("%s: the port router made %d routing decisions with a serving target", node, routed)
}
