//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfields "k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/ownprocess"
)

// Helpers of the pivot test (pivot_test.go): a registered kubelet, the
// 50 ms probe client of issue 9, and a watch of default/kubernetes.

// UseAPIServer makes the kubelet (not started yet) register with the
// apiserver of kubeconfig: render's kubelet.conf, whose client certificate
// is system:node:NODE for the kubelet's node name. Its configuration is
// then make up's (the same generator), on the test's ports and
// directories: Webhook authentication and authorization, client
// certificates of render's kubelet client CA only. Its ClientCert becomes
// the apiserver's kubelet client, which RBAC lets in.
func (k *Kubelet) UseAPIServer(t testing.TB, kubeconfig string) {
	t.Helper()
	pki := filepath.Join(filepath.Dir(kubeconfig), manifests.PKIDir)
	k.writeConfig(t, false, filepath.Join(pki, manifests.KubeletClientCA+".crt"))
	k.ClientCert = filepath.Join(pki, manifests.APIServerKubeletClnt+".crt")
	k.ClientKey = filepath.Join(pki, manifests.APIServerKubeletClnt+".key")
	k.Kubeconfig = kubeconfig
}

// ProbeResult is what a probe client saw.
type ProbeResult struct {
	Requests, Failed int
	HTTP2            int // answers over HTTP/2
	NewConns         int // connections opened (a keep-alive client reconnects after GOAWAY)
	// SlowAnswers are the failures in which an apiserver did answer (200
	// and its headers within the timeout) but the body took longer: a
	// loaded machine, not a connection routed to an apiserver that does
	// not serve, nor a refusal. They count in Failed too.
	SlowAnswers int
	Failures    []string
	// FailedSpans are the failed requests' start and end, in order (the
	// failure windows of a fail-over: FailureWindows).
	FailedSpans [][2]time.Time
}

// FailureWindows merges failed requests into windows: failures whose
// spans are less than gap apart (the next request after a failure starts
// one interval later) are one window.
func (r ProbeResult) FailureWindows(gap time.Duration) [][2]time.Time {
	var ws [][2]time.Time
	for _, s := range r.FailedSpans {
		if n := len(ws); n > 0 && s[0].Sub(ws[n-1][1]) < gap {
			if s[1].After(ws[n-1][1]) {
				ws[n-1][1] = s[1]
			}
			continue
		}
		ws = append(ws, s)
	}
	return ws
}

// failuresSuffix lists r's failures after a colon, or nothing.
func failuresSuffix(r ProbeResult) string {
	if len(r.Failures) == 0 {
		return ""
	}
	return ":\n" + strings.Join(r.Failures, "\n")
}

// NotAnswered is the number of failed requests no serving apiserver
// answered: refused, reset, queued at a listener that does not serve, or
// 503 from one that is shutting down. The port hand-over promises 0.
func (r ProbeResult) NotAnswered() int { return r.Failed - r.SlowAnswers }

// Prober is issue 9's probe client: every 50 ms, in turn, GET /version and
// a list of pods, with a 1 s timeout and no retries (a plain http.Client,
// not client-go's request, which retries on Retry-After). With keepAlive the
// requests share one HTTP/2 connection as long as the server keeps it;
// without, each request opens a new connection (which shows what
// tcp_migrate_req changes: a connection queued at a closing listener).
type Prober struct {
	name   string
	client *http.Client
	host   string
	mu     sync.Mutex
	res    ProbeResult
	start  time.Time
	cancel context.CancelFunc
	done   chan struct{}
}

// StartProber starts a probe client against the apiserver of kubeconfig.
func StartProber(t testing.TB, name, kubeconfig string, keepAlive bool) *Prober {
	t.Helper()
	return StartProberEvery(t, name, kubeconfig, keepAlive, 50*time.Millisecond, 1)
}

// StartProberEvery is StartProber with another interval and parallel
// loops, each with its own requests in turn.
func StartProberEvery(t testing.TB, name, kubeconfig string, keepAlive bool, interval time.Duration, parallel int) *Prober {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: tlsCfg.Clone(), ForceAttemptHTTP2: keepAlive, DisableKeepAlives: !keepAlive,
		MaxIdleConnsPerHost: 1, IdleConnTimeout: 90 * time.Second}
	if !keepAlive {
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Prober{name: name, client: &http.Client{Transport: tr, Timeout: time.Second}, host: cfg.Host,
		start: time.Now(), cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	for i := 0; i < parallel; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); p.run(ctx, interval) }()
	}
	go func() { wg.Wait(); close(p.done) }()
	t.Cleanup(func() { p.Stop() })
	return p
}

func (p *Prober) run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	paths := []string{"/version", "/api/v1/pods?limit=500"}
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		path := paths[i%2]
		newConn, local := false, ""
		trace := &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
			newConn = !ci.Reused
			if ci.Conn != nil {
				local = ci.Conn.LocalAddr().String()
			}
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, p.host+path, nil)
		at := time.Now()
		resp, err := p.client.Do(req)
		var status, proto int
		var body []byte
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			status, proto = resp.StatusCode, resp.ProtoMajor
		}
		p.mu.Lock()
		p.res.Requests++
		if newConn {
			p.res.NewConns++
		}
		if proto == 2 {
			p.res.HTTP2++
		}
		if err != nil || status != http.StatusOK {
			p.res.Failed++
			if status == http.StatusOK {
				p.res.SlowAnswers++
			}
			if len(p.res.FailedSpans) < 100000 {
				p.res.FailedSpans = append(p.res.FailedSpans, [2]time.Time{at, time.Now()})
			}
			if len(p.res.Failures) < 50 {
				if status == http.StatusOK || len(body) > 300 {
					body = body[:min(len(body), 300)]
				}
				p.res.Failures = append(p.res.Failures, fmt.Sprintf("%s +%s GET %s (from %s, new connection %v, took %s): status %d err %v body %q",
					at.Format("15:04:05.000"), at.Sub(p.start).Round(time.Millisecond), path, local, newConn, time.Since(at).Round(time.Millisecond), status, err, body))
			}
		}
		p.mu.Unlock()
	}
}

// Stop stops the prober and returns what it saw.
func (p *Prober) Stop() ProbeResult {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.res
}

// Result is what the prober saw so far.
func (p *Prober) Result() ProbeResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.res
	r.Failures = append([]string(nil), p.res.Failures...)
	r.FailedSpans = append([][2]time.Time(nil), p.res.FailedSpans...)
	return r
}

// EndpointsWatch watches default/kubernetes (the Endpoints and its
// EndpointSlices) from before the objects exist until it is stopped. From
// the moment each kind first lists an address, it records every moment it
// listed none (or was deleted).
type EndpointsWatch struct {
	mu       sync.Mutex
	firstEP  time.Time // first time the Endpoints listed an address
	firstEPS time.Time // same for the EndpointSlices
	events   int
	empties  []string
	errs     []string
	slices   map[string]int // slice name → ready addresses
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// WatchKubernetesEndpoints starts the watches with the client of kubeconfig.
func WatchKubernetesEndpoints(t testing.TB, kubeconfig string) *EndpointsWatch {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 0 // watches
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &EndpointsWatch{slices: map[string]int{}, cancel: cancel}
	ep := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "endpoints", metav1.NamespaceDefault,
		k8sfields.OneTermEqualSelector("metadata.name", "kubernetes"))
	eps := cache.NewFilteredListWatchFromClient(cs.DiscoveryV1().RESTClient(), "endpointslices", metav1.NamespaceDefault,
		func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=kubernetes" })
	for _, lw := range []*cache.ListWatch{ep, eps} {
		listThenWatch(ctx, t, lw, &w.wg, w.observe, func(problem string) {
			w.mu.Lock()
			w.errs = append(w.errs, problem)
			w.mu.Unlock()
		})
	}
	t.Cleanup(w.Stop)
	return w
}

// listThenWatch lists lw, hands each listed object to observe as Added,
// then watches from the list's resourceVersion with a RetryWatcher (which
// outlives an apiserver's restart or hand-over) and hands on every event
// until ctx ends, in a goroutine wg counts. problem hears of a watch error
// event and of a watch that ended before ctx.
func listThenWatch(ctx context.Context, t testing.TB, lw *cache.ListWatch, wg *sync.WaitGroup, observe func(watch.EventType, interface{}), problem func(string)) {
	t.Helper()
	list, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list for a watch: %v", err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range items {
		observe(watch.Added, obj)
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.(metav1.ListInterface).GetResourceVersion(), lw)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					if ctx.Err() == nil {
						problem("a watch ended")
					}
					return
				}
				if ev.Type == watch.Error {
					problem(fmt.Sprintf("watch error: %v", ev.Object))
					continue
				}
				observe(ev.Type, ev.Object)
			}
		}
	}()
}

func (w *EndpointsWatch) observe(t watch.EventType, obj interface{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	now := time.Now()
	switch o := obj.(type) {
	//lint:ignore SA1019 the apiserver still writes default/kubernetes as Endpoints
	case *v1.Endpoints:
		n := 0
		for _, s := range o.Subsets {
			n += len(s.Addresses)
		}
		if t == watch.Deleted {
			n = 0
		}
		if n > 0 && w.firstEP.IsZero() {
			w.firstEP = now
		}
		if n == 0 && !w.firstEP.IsZero() {
			w.empties = append(w.empties, fmt.Sprintf("%s Endpoints default/kubernetes %s with no address", now.Format("15:04:05.000"), t))
		}
	case *discoveryv1.EndpointSlice:
		n := 0
		for _, e := range o.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				n += len(e.Addresses)
			}
		}
		if t == watch.Deleted {
			delete(w.slices, o.Name)
		} else {
			w.slices[o.Name] = n
		}
		total := 0
		for _, c := range w.slices {
			total += c
		}
		if total > 0 && w.firstEPS.IsZero() {
			w.firstEPS = now
		}
		if total == 0 && !w.firstEPS.IsZero() {
			w.empties = append(w.empties, fmt.Sprintf("%s EndpointSlices of default/kubernetes list no ready address (%s %s)", now.Format("15:04:05.000"), t, o.Name))
		}
	}
}

// Stop ends the watches.
func (w *EndpointsWatch) Stop() {
	w.cancel()
	w.wg.Wait()
}

// Report returns the first time each kind listed an address, the moments
// either listed none after that, and watch errors.
func (w *EndpointsWatch) Report() (firstEP, firstEPS time.Time, events int, empties, errs []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.firstEP, w.firstEPS, w.events, append([]string(nil), w.empties...), append([]string(nil), w.errs...)
}

// staticCopy is the path of bootlet's static copy of a pod.
func staticCopy(k *Kubelet, ns, name string) string {
	return filepath.Join(k.ManifestDir, "bootlet_"+ns+"_"+name+".yaml")
}

// ConnectStorm opens plain TCP connections to the apiserver's port as fast
// as loops allow and sends each a plain HTTP request, which a TLS server
// answers at once with a 400 and a close, without any crypto. It counts how
// each connection ended. Connections still in a closing listener's accept
// queue are reset (ECONNRESET) unless net.ipv4.tcp_migrate_req moves them to
// the other listener: this is the measurement with the sysctl off and on.
type ConnectStorm struct {
	mu      sync.Mutex
	counts  map[string]int
	samples map[string]string
	cancel  context.CancelFunc
	done    chan struct{}
}

// StartConnectStorm starts loops connection loops against addr.
func StartConnectStorm(t testing.TB, addr string, loops int) *ConnectStorm {
	ctx, cancel := context.WithCancel(context.Background())
	s := &ConnectStorm{counts: map[string]int{}, samples: map[string]string{}, cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	for i := 0; i < loops; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				kind, detail := connectOnce(addr)
				s.mu.Lock()
				s.counts[kind]++
				if _, ok := s.samples[kind]; !ok {
					s.samples[kind] = detail
				}
				s.mu.Unlock()
				time.Sleep(time.Millisecond)
			}
		}()
	}
	go func() { wg.Wait(); close(s.done) }()
	t.Cleanup(func() { s.Stop() })
	return s
}

func connectOnce(addr string) (string, string) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return classifyConnErr("connect", err), err.Error()
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("GET /version HTTP/1.0\r\n\r\n")); err != nil {
		return classifyConnErr("write", err), err.Error()
	}
	data, err := io.ReadAll(conn)
	if len(data) > 0 {
		return "answered", ""
	}
	if err == nil {
		return "closed without an answer", ""
	}
	return classifyConnErr("read", err), err.Error()
}

func classifyConnErr(op string, err error) string {
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return op + ": reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		return op + ": refused"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return op + ": timeout"
	}
	return op + ": other"
}

// Stop stops the storm and returns the counts by outcome and a sample error
// of each.
func (s *ConnectStorm) Stop() (map[string]int, map[string]string) {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	counts, samples := map[string]int{}, map[string]string{}
	for k, v := range s.counts {
		counts[k] = v
	}
	for k, v := range s.samples {
		samples[k] = v
	}
	return counts, samples
}

// PodTimeline watches kube-system's pods from its start until it is
// stopped and records, with the watcher's clock, when each pod was first
// seen, bound to a node, Running, Ready, and marked for deletion: the
// self-hosted side of the pivot's breakdown (docs/pivot.md, "Where the
// time goes"). The watch survives the apiserver hand-over (a retry
// watcher resumes from the last resource version).
type PodTimeline struct {
	mu     sync.Mutex
	pods   map[string]*podTimes
	order  []string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type podTimes struct {
	seen, bound, running, ready, deleting time.Time
}

// WatchPodTimeline starts the watch with the client of kubeconfig.
func WatchPodTimeline(t testing.TB, kubeconfig string) *PodTimeline {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 0
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &PodTimeline{pods: map[string]*podTimes{}, cancel: cancel}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), "pods", metav1.NamespaceSystem, k8sfields.Everything())
	listThenWatch(ctx, t, lw, &w.wg, func(_ watch.EventType, obj interface{}) {
		if p, isPod := obj.(*v1.Pod); isPod {
			w.observe(p)
		}
	}, func(string) {})
	t.Cleanup(w.Stop)
	return w
}

func (w *PodTimeline) observe(p *v1.Pod) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	pt, ok := w.pods[p.Name]
	if !ok {
		pt = &podTimes{seen: now}
		w.pods[p.Name] = pt
		w.order = append(w.order, p.Name)
	}
	set := func(at *time.Time, cond bool) {
		if cond && at.IsZero() {
			*at = now
		}
	}
	set(&pt.bound, p.Spec.NodeName != "")
	set(&pt.running, Running(p))
	set(&pt.ready, Ready(p))
	set(&pt.deleting, p.DeletionTimestamp != nil)
}

// Stop ends the watch.
func (w *PodTimeline) Stop() {
	w.cancel()
	w.wg.Wait()
}

// Report is one line per pod seen, each moment relative to from.
func (w *PodTimeline) Report(from time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	rel := func(at time.Time) string {
		if at.IsZero() {
			return "-"
		}
		return "+" + at.Sub(from).Round(time.Millisecond).String()
	}
	var out []string
	for _, n := range w.order {
		pt := w.pods[n]
		out = append(out, fmt.Sprintf("%s created %s bound %s running %s ready %s deleting %s", n, rel(pt.seen), rel(pt.bound), rel(pt.running), rel(pt.ready), rel(pt.deleting)))
	}
	return out
}

// PodListens reports whether a process of the pod with uid holds a
// listening socket on port (this network namespace's, the host's for a
// hostNetwork pod): whether the pod still serves on it.
func PodListens(uid types.UID, port int) bool {
	contents, _ := ownprocess.ReadProcNetTCP()
	local := fmt.Sprintf(":%04X", port)
	listening := map[string]bool{}
	for _, c := range contents {
		for _, line := range strings.Split(c, "\n") {
			f := strings.Fields(line)
			if len(f) >= 10 && strings.HasSuffix(f[1], local) && f[3] == "0A" {
				listening[f[9]] = true
			}
		}
	}
	for _, proc := range ownprocess.Processes(ownprocess.InPod(uid)) {
		for inode := range ownprocess.SocketFDs(proc) {
			if listening[inode] {
				return true
			}
		}
	}
	return false
}
