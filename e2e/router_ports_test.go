//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bootlet/bootlet/reuseport"
)

// portHolderEnv makes the e2e test binary a port holder (holdPorts): it
// runs as another user and holds what it can of the probe ports.
const portHolderEnv = "BOOTLET_E2E_PORT_HOLDER"

func init() {
	if os.Getenv(portHolderEnv) != "" {
		holdPorts()
	}
}

// The source ports the router probed from before they were privileged.
const oldProbePortLow, oldProbePortHigh = 61000, 61007

// holdPorts listens on every address on the old probe ports, then on
// every port it can near the probe ports (the probe addresses and every
// address), reports both on stdout and keeps them until stdin closes.
func holdPorts() {
	var held []net.Listener
	var old, near []string
	for p := oldProbePortLow; p <= oldProbePortHigh; p++ {
		// Every address, dual-stack: no one else may bind the port on
		// any address while it listens.
		if ln, err := net.Listen("tcp", ":"+strconv.Itoa(p)); err == nil {
			held, old = append(held, ln), append(old, strconv.Itoa(p))
		}
	}
	for p := max(1, reuseport.ProbePortLow-24); p <= reuseport.ProbePortHigh+24; p++ {
		for _, host := range []string{reuseport.ProbeAddr4.String(), reuseport.ProbeAddr6.String(), ""} {
			if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
				held, near = append(held, ln), append(near, ln.Addr().String())
			}
		}
	}
	fmt.Printf("old %s\nnear %s\nready\n", strings.Join(old, ","), strings.Join(near, ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, ln := range held {
		ln.Close()
	}
	os.Exit(0)
}

// startPortHolder runs holdPorts as uid and gid 65534 (nobody) until the
// test ends, and returns the old probe ports and the ports near the new
// ones it holds.
func startPortHolder(t *testing.T) (old, near []string) {
	t.Helper()
	// The test binary sits in a directory only root may enter: a copy
	// nobody may run.
	dir, err := os.MkdirTemp("", "bootlet-port-holder")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "holder")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), portHolderEnv+"=1", "GODEBUG=multipathtcp=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if line == "ready" {
			return old, near
		}
		kind, list, _ := strings.Cut(line, " ")
		var ports []string
		if list != "" {
			ports = strings.Split(list, ",")
		}
		switch kind {
		case "old":
			old = ports
		case "near":
			near = ports
		}
	}
	t.Fatalf("the port holder ended before it held its ports: %v", sc.Err())
	return nil, nil
}

// TestRouterProbePortsHeld is the pivot of TestPivotSelfHosted while a
// process of another user (nobody) holds the ports the router's probes
// came from before (61000-61007, above the ephemeral range, free for
// anyone to bind) and tries every port near the probe ports now. The
// probes come from ports only root may bind, so the router still asks each
// apiserver itself: the pivot finishes, the router routes to the
// self-hosted apiserver once it serves, and the strict 50 ms probe clients
// lose no request; then a rolling update of the apiserver DaemonSet, with
// the ports still held, loses none either. With the old ports every probe failed, no listener
// seemed to serve, new connections were left to the kernel's hash, and the
// clients lost requests to the self-hosted listener that did not serve yet.
//
// It binds fixed host ports and must not call t.Parallel.
func TestRouterProbePortsHeld(t *testing.T) {
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)
	old, near := startPortHolder(t)
	if len(old) != oldProbePortHigh-oldProbePortLow+1 {
		t.Fatalf("nobody holds only the old probe ports %v of %d-%d: the test would prove nothing", old, oldProbePortLow, oldProbePortHigh)
	}
	if len(near) > 0 {
		t.Fatalf("nobody could bind %v near the probe ports %d-%d: this host lowered net.ipv4.ip_unprivileged_port_start, and bootlet refuses to route on it",
			near, reuseport.ProbePortLow, reuseport.ProbePortHigh)
	}
	t.Logf("uid 65534 holds the ports %d-%d on every address and could bind none near %d-%d", oldProbePortLow, oldProbePortHigh, reuseport.ProbePortLow, reuseport.ProbePortHigh)

	c, k, assets := StartControlPlaneNode(t)
	admin := filepath.Join(assets, "admin.conf")
	b := StartBootlet(t, c,
		"--kubelet-healthz-url", fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort),
		"--kubelet-static-pod-path", k.ManifestDir,
		"--kubelet-root-dir", k.RootDir,
		"--pivot-kubeconfig", admin,
		"--self-hosted-assets", filepath.Join(assets, "self-hosted"))
	if b.NodeName != k.NodeName {
		t.Fatalf("bootlet's node %s is not the kubelet's %s", b.NodeName, k.NodeName)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpControlPlane(t, b)
			t.Logf("--- kubelet log tail:\n%s", tail(k.Log(), 4000))
		}
	})

	if out, err := b.CLI(t, "apply", "-f", filepath.Join(assets, "bootstrap-manifests")); err != nil {
		t.Fatalf("bootlet apply: %v\n%s", err, out)
	}
	adminClient := AdminClient(t, assets)
	ctx := context.Background()
	Eventually(t, 5*time.Minute, func() (bool, string) {
		body, err := adminClient.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", fmt.Sprintf("kube-apiserver /readyz: %v %s", err, body)
	})
	uids := WaitControlPlaneReady(t, b)

	probe := StartProber(t, "keep-alive", admin, true)
	fresh := StartProber(t, "new connection per request", admin, false)
	adoption := AdoptControlPlane(t, b, c, k, uids)
	pivotStart := time.Now()
	WaitBootstrapWithdrawn(t, b, adminClient, pivoted)
	pivotTook := time.Since(pivotStart)
	time.Sleep(3 * time.Second) // a few more requests against the self-hosted apiserver alone
	res, freshRes := probe.Stop(), fresh.Stop()

	daemonLog, err := os.ReadFile(b.logPath)
	if err != nil {
		t.Fatal(err)
	}
	// The router's own probe got a 200 from a listener: its probes pass.
	if !strings.Contains(string(daemonLog), "listener serves (the newest that does)") {
		t.Errorf("the router never found a listener that serves: its probes fail\n%s", tail(string(daemonLog), 4000))
	}
	for _, bad := range []string{"The apiserver port is not routed", "probe ports are no longer privileged"} {
		if strings.Contains(string(daemonLog), bad) {
			t.Errorf("bootlet's log says %q", bad)
		}
	}
	if res.Requests < 100 {
		t.Errorf("the keep-alive client sent %d requests: too few to mean anything", res.Requests)
	}
	if res.Failed != 0 {
		t.Errorf("the keep-alive probe client saw %d failed requests of %d:\n%s", res.Failed, res.Requests, strings.Join(res.Failures, "\n"))
	}
	if freshRes.NotAnswered() != 0 {
		t.Errorf("the new-connection probe client saw %d requests no apiserver answered, of %d:\n%s", freshRes.NotAnswered(), freshRes.Requests, strings.Join(freshRes.Failures, "\n"))
	}
	t.Logf("pivot with the old probe ports held: %s from the adoption (%s after the kubelet's start); keep-alive %d requests, %d failed; new connection %d requests, %d failed",
		pivotTook.Round(time.Millisecond), time.Since(adoption.KubeletStart).Round(time.Millisecond), res.Requests, res.Failed, freshRes.Requests, freshRes.Failed)

	// A rolling update of the apiserver DaemonSet with the ports still
	// held: the new pod starts beside the old one, the router moves new
	// connections to it once it serves, and the strict clients lose no
	// request (UpgradeAPIServer asserts it).
	pods, err := selfHostedPods(ctx, adminClient, k.NodeName, "kube-apiserver")
	if err != nil || len(pods) != 1 {
		t.Fatalf("want one self-hosted apiserver pod after the pivot: %v\n%s", err, podsSummary(pods))
	}
	image := containerImage(&pods[0].Spec, "kube-apiserver")
	TagImage(t, c, image, image+"-ports")
	lc := &LifecycleRun{C: c, B: b, K: k, Assets: assets, Admin: admin, AdminClient: adminClient, Image: image}
	up := UpgradeAPIServer(t, lc, image+"-ports")
	t.Logf("apiserver rollout with the old probe ports held: %s; keep-alive %d requests, %d failed; new connection %d requests, %d not answered",
		up.Took.Round(time.Millisecond), up.KeepAlive.Requests, up.KeepAlive.Failed, up.NewConn.Requests, up.NewConn.NotAnswered())
}
