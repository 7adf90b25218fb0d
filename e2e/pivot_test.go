//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	btypes "github.com/bootlet/bootlet/types"
)

// TestPivotSelfHosted is the first boot on one master, up to the
// self-hosted control plane: bootlet runs the bootstrap control plane; a
// real kubelet registers with it (render's kubelet.conf) and adopts the four
// pods with 0 restarts; bootlet creates render's self-hosted objects, and
// withdraws each bootstrap pod once its self-hosted pod has taken over.
// Throughout, the 50 ms probe client sees no failed request and
// default/kubernetes never lists no address. etcd stays the adopted
// kubelet-static pod.
//
// tcp_migrate_req is on (bootlet sets it). BOOTLET_E2E_TCP_MIGRATE_REQ=0
// runs the same test with it off (bootlet only logs it), for the
// measurement with and without (docs/pivot.md).
//
// Like TestControlPlane, it binds fixed host ports and must not call
// t.Parallel.
func TestPivotSelfHosted(t *testing.T) {
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)
	migrate := os.Getenv("BOOTLET_E2E_TCP_MIGRATE_REQ") != "0"

	// The host's tcp_migrate_req is put back afterwards; it starts at 0 so
	// that the test sees bootlet set it.
	orig, err := os.ReadFile("/proc/sys/net/ipv4/tcp_migrate_req")
	if err != nil {
		t.Fatalf("this kernel has no net.ipv4.tcp_migrate_req (Linux 5.14+): %v", err)
	}
	t.Cleanup(func() { _ = os.WriteFile("/proc/sys/net/ipv4/tcp_migrate_req", orig, 0o644) })
	if err := os.WriteFile("/proc/sys/net/ipv4/tcp_migrate_req", []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}

	c, k, assets := StartControlPlaneNode(t)
	admin := filepath.Join(assets, "admin.conf")
	b := StartBootlet(t, c,
		"--kubelet-healthz-url", fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort),
		"--kubelet-static-pod-path", k.ManifestDir,
		"--kubelet-root-dir", k.RootDir,
		"--pivot-kubeconfig", admin,
		"--self-hosted-assets", filepath.Join(assets, "self-hosted"),
		fmt.Sprintf("--tcp-migrate-req=%v", migrate))
	if b.NodeName != k.NodeName {
		t.Fatalf("bootlet's node %s is not the kubelet's %s", b.NodeName, k.NodeName)
	}
	if keep := os.Getenv("BOOTLET_E2E_KEEP_LOGS"); keep != "" {
		t.Cleanup(func() {
			_ = exec.Command("sh", "-c", "mkdir -p "+keep+" && cp "+c.Dir+"/*.log "+keep+"/ ; cp -r "+b.LogDir+" "+keep+"/pod-logs").Run()
		})
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpControlPlane(t, b)
			t.Logf("--- kubelet log tail:\n%s", tail(k.Log(), 4000))
		}
	})
	if got, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_migrate_req"); strings.TrimSpace(string(got)) != map[bool]string{true: "1", false: "0"}[migrate] {
		t.Fatalf("net.ipv4.tcp_migrate_req is %q after bootlet started with --tcp-migrate-req=%v", got, migrate)
	}

	// 1. Bootstrap.
	started := time.Now()
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
	t.Logf("bootstrap control plane Running and Ready %s after the apply", time.Since(started).Round(time.Millisecond))
	if daemonLog, _ := os.ReadFile(b.logPath); !strings.Contains(string(daemonLog), "tcp_migrate_req") {
		t.Errorf("bootlet logged nothing about net.ipv4.tcp_migrate_req:\n%s", tail(string(daemonLog), 3000))
	}

	// The probe clients and the endpoints watch run from here to the end:
	// through the adoption and the whole pivot.
	probe := StartProber(t, "keep-alive", admin, true)
	fresh := StartProber(t, "new connection per request", admin, false)
	eps := WatchKubernetesEndpoints(t, admin)
	podTimes := WatchPodTimeline(t, admin)
	if first, _, _, _, _ := eps.Report(); !first.IsZero() {
		t.Fatalf("default/kubernetes lists an address before any self-hosted apiserver: the bootstrap apiserver must run with --endpoint-reconciler-type=none")
	}
	withdrawn := watchWithdrawals(t, b)
	// A burst of new connections while the bootstrap apiserver's listener
	// closes: what tcp_migrate_req is about (connections queued at the
	// closing listener). Started once the bootstrap apiserver is withdrawn,
	// stopped when it is gone; 0 failed, as docs/pivot.md reports it.
	var burst *Prober
	var storm *ConnectStorm
	burstDone := make(chan struct{})
	apiAddr := net.JoinHostPort(AdvertiseAddress(t), "6443")
	// When the withdrawn bootstrap apiserver stopped serving: no process
	// of it listens on the port any more (its shutdown delay ended). The
	// pod leaves bootlet's API only once its process has exited, after its
	// in-flight requests and watches ended.
	var stoppedServing time.Time
	go func() {
		defer close(burstDone)
		for deadline := time.Now().Add(8 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			p, err := b.Client.CoreV1().Pods("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
			if burst == nil && (err == nil && p.DeletionTimestamp != nil || err != nil && strings.Contains(err.Error(), "not found")) {
				burst = StartProberEvery(t, "burst", admin, false, 10*time.Millisecond, 2)
				storm = StartConnectStorm(t, apiAddr, 2)
			}
			if burst != nil && !PodListens(types.UID(uids["kube-apiserver"]), 6443) {
				stoppedServing = time.Now()
				return
			}
		}
	}()

	// 2. The kubelet registers and adopts the four pods: 0 restarts.
	adoption := AdoptControlPlane(t, b, c, k, uids)
	kubeletStart, adopted, before := adoption.KubeletStart, adoption.Adopted, adoption.Before
	t.Logf("the kubelet adopted the 4 bootstrap pods %s after its start, 0 restarts", adopted.Sub(kubeletStart).Round(time.Millisecond))
	Eventually(t, time.Minute, func() (bool, string) {
		n, err := adminClient.CoreV1().Nodes().Get(ctx, k.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, ok := n.Labels["node-role.kubernetes.io/control-plane"]
		return ok, fmt.Sprintf("node labels %v", n.Labels)
	})

	// 3. The pivot: each bootstrap pod is withdrawn once its self-hosted pod
	// has taken over, and leaves bootlet's API once nothing of it runs.
	WaitBootstrapWithdrawn(t, b, adminClient, pivoted)
	pivotDone := time.Now()
	time.Sleep(3 * time.Second) // a few more probes against the self-hosted apiserver alone
	res, freshRes := probe.Stop(), fresh.Stop()
	<-burstDone
	var burstRes ProbeResult
	if burst != nil {
		burstRes = burst.Stop()
	}
	var stormCounts map[string]int
	var stormSamples map[string]string
	if storm != nil {
		stormCounts, stormSamples = storm.Stop()
	}
	eps.Stop()
	podTimes.Stop()
	times := withdrawn()

	// Self-hosted apiserver, controller-manager and scheduler Running and
	// Ready on the node; the bootstrap ones withdrawn; etcd untouched.
	pods, err := adminClient.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + k.NodeName})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range pivoted {
		ok := false
		for _, p := range pods.Items {
			if p.Labels["k8s-app"] == n && Running(&p) && Ready(&p) {
				ok = true
			}
			if p.Name == n+"-"+k.NodeName {
				t.Errorf("the mirror pod of the bootstrap %s is still there: %s", n, statusSummary(&p))
			}
		}
		if !ok {
			t.Errorf("no self-hosted %s Running and Ready on %s", n, k.NodeName)
		}
		if _, err := os.Stat(staticCopy(k, "kube-system", n)); !os.IsNotExist(err) {
			t.Errorf("the static copy of the bootstrap %s is still there: %v", n, err)
		}
		for _, ctr := range criContainersOf(t, c, uids[n]) {
			if ctr.State.String() == "CONTAINER_RUNNING" {
				t.Errorf("a container of the bootstrap %s still runs: %s", n, ctr.Id)
			}
		}
	}
	etcd := b.Pod(t, "kube-system", "etcd")
	if etcd.Annotations[btypes.AnnotationOwner] != "kubelet-static" || !Running(etcd) {
		t.Errorf("etcd after the pivot: owner %q, %s", etcd.Annotations[btypes.AnnotationOwner], statusSummary(etcd))
	}
	etcdNow := handoffSnapshot(t, c, map[string]string{"etcd": uids["etcd"]})
	var etcdBefore []string
	for _, l := range strings.Split(before, "\n") {
		if strings.HasPrefix(l, "etcd ") {
			etcdBefore = append(etcdBefore, l)
		}
	}
	if etcdNow != strings.Join(etcdBefore, "\n") {
		t.Errorf("etcd's runtime objects changed:\nbefore:\n%s\nafter:\n%s", strings.Join(etcdBefore, "\n"), etcdNow)
	}

	// default/kubernetes: listed by the self-hosted apiserver before the
	// bootstrap one was withdrawn, and never empty after.
	firstEP, firstEPS, events, empties, werrs := eps.Report()
	apiWithdrawn := times["kube-apiserver"].terminating
	if firstEP.IsZero() || firstEPS.IsZero() {
		t.Errorf("default/kubernetes never listed an address (Endpoints %v, EndpointSlice %v)", firstEP, firstEPS)
	} else if apiWithdrawn.IsZero() || firstEP.After(apiWithdrawn) || firstEPS.After(apiWithdrawn) {
		t.Errorf("the bootstrap apiserver was withdrawn at %s, before default/kubernetes listed the node (Endpoints %s, EndpointSlice %s)",
			apiWithdrawn.Format("15:04:05.000"), firstEP.Format("15:04:05.000"), firstEPS.Format("15:04:05.000"))
	}
	if len(empties) > 0 {
		t.Errorf("default/kubernetes listed no address during the pivot:\n%s", strings.Join(empties, "\n"))
	}
	if len(werrs) > 0 {
		t.Errorf("the endpoints watch was interrupted, so it may have missed a change: %v", werrs)
	}

	// The control plane's keys are on this master's disk, not in reach of
	// its kubelet.
	assertCredentialsOffTheAPI(t, AdminClient(t, assets), kubeletConfOf(assets))

	// An upgrade is planned from what the API shows of the cluster.
	assertUpgradePlan(t, admin, k.NodeName)

	// The probe client: zero failed requests.
	if res.Requests < 100 || res.HTTP2 == 0 {
		t.Errorf("the probe client sent %d requests (%d over HTTP/2): too few to mean anything", res.Requests, res.HTTP2)
	}
	// Both clients: the kept-alive one (its connection must leave the
	// bootstrap apiserver before that one's shutdown answers 503) and the
	// one that connects anew for each request (no connection may reach a
	// listener that does not serve yet): docs/design/reuseport.md, "What fails without it".
	// Only a complete, correct answer later than 1 s is reported as slow
	// and not counted (ClassifyProbe).
	if res.Failed != 0 {
		t.Errorf("the keep-alive probe client saw %d failed requests of %d:\n%s", res.Failed, res.Requests, strings.Join(res.Failures, "\n"))
	}
	if freshRes.Requests < 100 || freshRes.Failed != 0 {
		t.Errorf("the new-connection probe client saw %d failed requests of %d:\n%s", freshRes.Failed, freshRes.Requests, strings.Join(freshRes.Failures, "\n"))
	}

	var timeline []string
	for _, n := range pivoted {
		tm := times[n]
		timeline = append(timeline, fmt.Sprintf("%s withdrawn +%s, gone +%s", n, tm.terminating.Sub(adopted).Round(time.Millisecond), tm.gone.Sub(adopted).Round(time.Millisecond)))
	}
	sort.Strings(timeline)
	t.Logf("pivot timeline from the adoption: %s; default/kubernetes first listed the node +%s (Endpoints) +%s (EndpointSlice), %d watch events",
		strings.Join(timeline, "; "), firstEP.Sub(adopted).Round(time.Millisecond), firstEPS.Sub(adopted).Round(time.Millisecond), events)
	t.Logf("kube-system pods from the adoption (at %s):\n%s", adopted.Format("15:04:05.000"), strings.Join(podTimes.Report(adopted), "\n"))
	t.Logf("probe keep-alive: %d requests, %d failed, %d over HTTP/2, %d connections opened", res.Requests, res.Failed, res.HTTP2, res.NewConns)
	t.Logf("probe new connection per request: %d requests, %d failed%s", freshRes.Requests, freshRes.Failed, failuresSuffix(freshRes))
	t.Logf("burst of new connections from the bootstrap apiserver's withdrawal on (2 loops, every 10 ms): %d requests, %d failed%s",
		burstRes.Requests, burstRes.Failed, failuresSuffix(burstRes))
	if burst == nil || burstRes.Requests == 0 {
		t.Errorf("the burst of new connections never ran: the bootstrap apiserver's withdrawal was not seen")
	} else if burstRes.Failed != 0 {
		t.Errorf("the burst of new connections across the bootstrap apiserver's listener close saw %d failed requests of %d", burstRes.Failed, burstRes.Requests)
	}
	stormTotal := 0
	for _, n := range stormCounts {
		stormTotal += n
	}
	t.Logf("connect storm from the bootstrap apiserver's withdrawal on (2 loops, plain TCP + an HTTP request to the TLS port): %d connections, by outcome %v, samples %v",
		stormTotal, stormCounts, stormSamples)
	// The pivot no longer serves from a bootstrap pod once the controller-manager's
	// and the scheduler's have left and the apiserver's no longer listens.
	servingEnd := stoppedServing
	for _, n := range pivoted {
		if n != "kube-apiserver" && times[n].gone.After(servingEnd) {
			servingEnd = times[n].gone
		}
	}
	t.Logf("PIVOT tcp_migrate_req=%v pivot_serving_seconds=%.1f pivot_seconds=%.1f failed_requests_during_pivot=%d failed_requests_new_connections=%d burst_requests=%d burst_failed=%d storm_connections=%d storm_reset=%d",
		migrate, servingEnd.Sub(adopted).Seconds(), pivotDone.Sub(adopted).Seconds(), res.Failed, freshRes.Failed, burstRes.Requests, burstRes.Failed,
		stormTotal, stormCounts["connect: reset"]+stormCounts["write: reset"]+stormCounts["read: reset"])
}

type withdrawalTimes struct{ terminating, gone time.Time }

// watchWithdrawals polls bootlet's API every 100 ms and records when each
// pivoted bootstrap pod was marked for deletion and when it left. The
// returned func stops the polling and returns the times.
func watchWithdrawals(t *testing.T, b *Bootlet) func() map[string]withdrawalTimes {
	var mu sync.Mutex
	times := map[string]withdrawalTimes{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, n := range pivoted {
				p, err := b.Client.CoreV1().Pods("kube-system").Get(context.Background(), n, metav1.GetOptions{})
				now := time.Now()
				mu.Lock()
				tm := times[n]
				switch {
				case err != nil && strings.Contains(err.Error(), "not found"):
					if tm.gone.IsZero() {
						tm.gone = now
					}
					if tm.terminating.IsZero() {
						tm.terminating = now
					}
				case err == nil && p.DeletionTimestamp != nil && tm.terminating.IsZero():
					tm.terminating = now
				}
				times[n] = tm
				mu.Unlock()
			}
		}
	}()
	var once sync.Once
	get := func() map[string]withdrawalTimes {
		once.Do(func() { close(stop); <-done })
		mu.Lock()
		defer mu.Unlock()
		out := map[string]withdrawalTimes{}
		for k, v := range times {
			out[k] = v
		}
		return out
	}
	t.Cleanup(func() { get() })
	return get
}

// TestClassifyProbe is the probe clients' rule: only a complete, correct
// answer may be late (slow, reported), everything else that is not a
// prompt answer fails.
func TestClassifyProbe(t *testing.T) {
	version := []byte(`{"major":"1","minor":"36","gitVersion":"v1.36.3"}`)
	pods := []byte(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}`)
	ms := time.Millisecond
	ok := func(path string, body []byte, header, took time.Duration) ProbeAttempt {
		return ProbeAttempt{Path: path, Status: 200, ContentLength: int64(len(body)), Body: body, HeaderTook: header, Took: took}
	}
	with := func(a ProbeAttempt, f func(*ProbeAttempt)) ProbeAttempt { f(&a); return a }
	for _, tc := range []struct {
		name string
		a    ProbeAttempt
		want ProbeVerdict
	}{
		{"version in time", ok("/version", version, 20*ms, 30*ms), ProbeVerdict{}},
		{"pod list in time", ok("/api/v1/pods?limit=500", pods, 20*ms, 30*ms), ProbeVerdict{}},
		{"unknown length, whole", with(ok("/version", version, 20*ms, 30*ms), func(a *ProbeAttempt) { a.ContentLength = -1 }), ProbeVerdict{}},
		{"complete and correct, body late", ok("/api/v1/pods?limit=500", pods, 900*ms, 2500*ms), ProbeVerdict{Slow: true, Kind: "slow"}},
		{"refused", ProbeAttempt{Path: "/version", Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, HeaderTook: ms},
			ProbeVerdict{Failed: true, Kind: "no answer: refused"}},
		{"reset before the headers", ProbeAttempt{Path: "/version", Err: os.NewSyscallError("read", syscall.ECONNRESET)},
			ProbeVerdict{Failed: true, Kind: "no answer: reset"}},
		{"queued, no headers within 1 s", ProbeAttempt{Path: "/version", Err: fmt.Errorf("%w (%v)", errProbeNoAnswer, context.Canceled), HeaderTook: time.Second},
			ProbeVerdict{Failed: true, Kind: "no answer: timeout"}},
		{"headers later than 1 s", ok("/version", version, 1100*ms, 1200*ms), ProbeVerdict{Failed: true, Kind: "no answer: timeout"}},
		{"503 shutting down", with(ok("/version", []byte(`{"kind":"Status","code":503}`), 10*ms, 10*ms), func(a *ProbeAttempt) { a.Status = 503 }),
			ProbeVerdict{Failed: true, Kind: "status 503"}},
		{"429 retry after", with(ok("/version", nil, 10*ms, 10*ms), func(a *ProbeAttempt) { a.Status = 429 }), ProbeVerdict{Failed: true, Kind: "status 429"}},
		{"204", with(ok("/version", nil, 10*ms, 10*ms), func(a *ProbeAttempt) { a.Status = 204 }), ProbeVerdict{Failed: true, Kind: "status 204, want 200"}},
		{"200 then reset", with(ok("/api/v1/pods?limit=500", pods[:20], 10*ms, 50*ms), func(a *ProbeAttempt) {
			a.ContentLength, a.BodyErr = int64(len(pods)), os.NewSyscallError("read", syscall.ECONNRESET)
		}), ProbeVerdict{Failed: true, Kind: "body: reset"}},
		{"200 then unexpected EOF, late", with(ok("/api/v1/pods?limit=500", pods[:20], 10*ms, 1500*ms), func(a *ProbeAttempt) {
			a.ContentLength, a.BodyErr = int64(len(pods)), io.ErrUnexpectedEOF
		}), ProbeVerdict{Failed: true, Kind: "body: unexpected EOF"}},
		{"200 then HTTP/2 stream reset", with(ok("/version", nil, 10*ms, 20*ms), func(a *ProbeAttempt) {
			a.BodyErr = errors.New("stream error: stream ID 7; INTERNAL_ERROR; received from peer")
		}), ProbeVerdict{Failed: true, Kind: "body: reset"}},
		{"body not complete within 10 s", with(ok("/version", nil, 10*ms, 10*time.Second), func(a *ProbeAttempt) {
			a.BodyErr = fmt.Errorf("%w (%v)", errProbeBodyTooLate, context.Canceled)
		}), ProbeVerdict{Failed: true, Kind: "body: timeout"}},
		{"shorter than its Content-Length, no error", with(ok("/version", version[:10], 10*ms, 20*ms), func(a *ProbeAttempt) { a.ContentLength = int64(len(version)) }),
			ProbeVerdict{Failed: true, Kind: "body: truncated"}},
		{"cut JSON, unknown length", with(ok("/api/v1/pods?limit=500", pods[:30], 10*ms, 20*ms), func(a *ProbeAttempt) { a.ContentLength = -1 }),
			ProbeVerdict{Failed: true, Kind: "body: malformed"}},
		{"not a version", ok("/version", []byte(`{}`), 10*ms, 20*ms), ProbeVerdict{Failed: true, Kind: "body: malformed"}},
		{"not a pod list", ok("/api/v1/pods?limit=500", version, 10*ms, 20*ms), ProbeVerdict{Failed: true, Kind: "body: malformed"}},
	} {
		if got := ClassifyProbe(tc.a); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
