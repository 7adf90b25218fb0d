//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
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
	// SlowAnswers are answers that were complete and correct (200, its
	// headers within 1 s, the whole body read and well formed) but took
	// longer than 1 s in all: a loaded machine, not a hand-over's fault.
	// They are not in Failed; everything else that is not such an answer
	// (a reset, a truncated body, an unexpected EOF, any non-2xx) is.
	SlowAnswers int
	// Kinds counts the failures by ProbeVerdict.Kind.
	Kinds    map[string]int
	Failures []string
	// Windows are the runs of failed requests (windows.go), all of them.
	Windows []FailureWindow
}

// failuresSuffix lists r's failures after a colon, or nothing.
func failuresSuffix(r ProbeResult) string {
	if len(r.Failures) == 0 {
		return ""
	}
	return ":\n" + strings.Join(r.Failures, "\n")
}

// NotAnswered is the number of failed requests. It was once Failed less
// the slow answers; slow answers are no longer failures, so nothing is
// exempt and it is Failed.
func (r ProbeResult) NotAnswered() int { return r.Failed }

const (
	// probeAnswerWithin bounds a request's headers: a connection queued at
	// a listener that does not serve is a failure, not a slow answer.
	probeAnswerWithin = time.Second
	// probeBodyWithin bounds the whole answer, body included, so that a
	// slow body can be read to its end and checked.
	probeBodyWithin = 10 * time.Second
)

// errProbeNoAnswer is the cause of a request cancelled for want of
// headers within probeAnswerWithin; errProbeBodyTooLate, of a body still
// unread at probeBodyWithin.
var (
	errProbeNoAnswer    = errors.New("no answer within 1s")
	errProbeBodyTooLate = errors.New("body not complete within 10s")
)

// ProbeAttempt is what one probe request saw, the input of ClassifyProbe.
type ProbeAttempt struct {
	Path string
	// Err is the round trip's error (no headers).
	Err           error
	Status        int
	ContentLength int64 // -1 when unknown
	Body          []byte
	BodyErr       error // reading the body to its end
	// HeaderTook is from the send to the headers, Took to the body's end.
	HeaderTook, Took time.Duration
}

// ProbeVerdict is ClassifyProbe's answer: OK, Slow (complete and correct
// but late, not a failure), or Failed, with the failure's kind.
type ProbeVerdict struct {
	Failed, Slow bool
	Kind         string
}

// ClassifyProbe judges one request (pure). Only a 200 whose headers came
// within probeAnswerWithin and whose body was read to its end, of the
// length announced and well formed for its path, is an answer; one that
// took longer than probeAnswerWithin in all is slow. Everything else is a
// failure: an error before the headers (refused, reset, timeout), a non-2xx
// or any other status than 200, a body cut short (reset, unexpected EOF,
// shorter than its Content-Length, not a whole JSON document of the kind
// asked for).
func ClassifyProbe(a ProbeAttempt) ProbeVerdict {
	fail := func(kind string) ProbeVerdict { return ProbeVerdict{Failed: true, Kind: kind} }
	switch {
	case a.Err != nil:
		return fail("no answer: " + errKind(a.Err))
	case a.HeaderTook > probeAnswerWithin:
		return fail("no answer: timeout")
	case a.Status < 200 || a.Status > 299:
		return fail(fmt.Sprintf("status %d", a.Status))
	case a.Status != http.StatusOK:
		return fail(fmt.Sprintf("status %d, want 200", a.Status))
	case a.BodyErr != nil:
		return fail("body: " + errKind(a.BodyErr))
	case a.ContentLength >= 0 && int64(len(a.Body)) != a.ContentLength:
		return fail("body: truncated")
	case !wellFormed(a.Path, a.Body):
		return fail("body: malformed")
	case a.Took > probeAnswerWithin:
		return ProbeVerdict{Slow: true, Kind: "slow"}
	}
	return ProbeVerdict{}
}

// wellFormed reports whether body is a whole JSON document of what path
// returns: /version's gitVersion, a PodList.
func wellFormed(path string, body []byte) bool {
	var doc struct {
		Kind       string          `json:"kind"`
		GitVersion string          `json:"gitVersion"`
		Items      json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return false
	}
	switch {
	case path == "/version":
		return doc.GitVersion != ""
	case strings.HasPrefix(path, "/api/v1/pods"):
		return doc.Kind == "PodList" && len(doc.Items) > 0
	}
	return true
}

// errKind names an error of a probe request, for the report.
func errKind(err error) string {
	switch {
	case errors.Is(err, errProbeNoAnswer), errors.Is(err, errProbeBodyTooLate),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), strings.Contains(err.Error(), "stream error"):
		return "reset"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected EOF"
	}
	return "other"
}

// Prober is issue 9's probe client: every 50 ms, in turn, GET /version and
// a list of pods, no retries (a plain http.Client, not client-go's request,
// which retries on Retry-After). A request must have its headers within
// 1 s and its whole body, checked, within 10 s (ClassifyProbe). With
// keepAlive the requests share one HTTP/2 connection as long as the server
// keeps it; without, each request opens a new connection (which shows what
// tcp_migrate_req changes: a connection queued at a closing listener).
type Prober struct {
	name     string
	client   *http.Client
	host     string
	mu       sync.Mutex
	res      ProbeResult
	outcomes []ProbeOutcome
	start    time.Time
	cancel   context.CancelFunc
	done     chan struct{}
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
	// No Timeout: each request's context bounds it (run).
	p := &Prober{name: name, client: &http.Client{Transport: tr}, host: cfg.Host,
		start: time.Now(), cancel: cancel, done: make(chan struct{}), res: ProbeResult{Kinds: map[string]int{}}}
	var wg sync.WaitGroup
	for i := 0; i < parallel; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); p.run(ctx, interval) }()
	}
	go func() { wg.Wait(); close(p.done) }()
	t.Cleanup(func() { p.Stop() })
	return p
}

// do sends one request and reads its answer to the end, within the
// deadlines of probeAnswerWithin and probeBodyWithin.
func (p *Prober) do(path string) (a ProbeAttempt, newConn bool, local string, proto int) {
	a = ProbeAttempt{Path: path, ContentLength: -1}
	trace := &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
		newConn = !ci.Reused
		if ci.Conn != nil {
			local = ci.Conn.LocalAddr().String()
		}
	}}
	ctx, cancel := context.WithCancelCause(httptrace.WithClientTrace(context.Background(), trace))
	defer cancel(nil)
	noAnswer := time.AfterFunc(probeAnswerWithin, func() { cancel(errProbeNoAnswer) })
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.host+path, nil)
	at := time.Now()
	resp, err := p.client.Do(req)
	a.HeaderTook = time.Since(at)
	noAnswer.Stop()
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = fmt.Errorf("%w (%v)", cause, err)
		}
		a.Err = err
		a.Took = a.HeaderTook
		return a, newConn, local, 0
	}
	tooLate := time.AfterFunc(probeBodyWithin-a.HeaderTook, func() { cancel(errProbeBodyTooLate) })
	a.Body, a.BodyErr = io.ReadAll(resp.Body)
	resp.Body.Close()
	tooLate.Stop()
	a.Took = time.Since(at)
	if a.BodyErr != nil {
		if cause := context.Cause(ctx); cause != nil {
			a.BodyErr = fmt.Errorf("%w (%v)", cause, a.BodyErr)
		}
	}
	a.Status, a.ContentLength = resp.StatusCode, resp.ContentLength
	return a, newConn, local, resp.ProtoMajor
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
		at := time.Now()
		a, newConn, local, proto := p.do(path)
		v := ClassifyProbe(a)
		p.mu.Lock()
		p.res.Requests++
		p.outcomes = append(p.outcomes, ProbeOutcome{At: at, Took: a.Took, Failed: v.Failed})
		if newConn {
			p.res.NewConns++
		}
		if proto == 2 {
			p.res.HTTP2++
		}
		if v.Slow {
			p.res.SlowAnswers++
		}
		if v.Failed {
			p.res.Failed++
			p.res.Kinds[v.Kind]++
		}
		if (v.Failed || v.Slow) && len(p.res.Failures) < 50 {
			body := a.Body
			if v.Slow || len(body) > 300 {
				body = body[:min(len(body), 300)]
			}
			what := "FAILED (" + v.Kind + ")"
			if v.Slow {
				what = "slow, not failed"
			}
			err := a.Err
			if err == nil {
				err = a.BodyErr
			}
			p.res.Failures = append(p.res.Failures, fmt.Sprintf("%s +%s GET %s (from %s, new connection %v, headers after %s, took %s): %s: status %d err %v body %q",
				at.Format("15:04:05.000"), at.Sub(p.start).Round(time.Millisecond), path, local, newConn, a.HeaderTook.Round(time.Millisecond), a.Took.Round(time.Millisecond), what, a.Status, err, body))
		}
		p.mu.Unlock()
	}
}

// handoverProbes are the two probe clients of a port hand-over (Prober):
// one on a kept-alive connection, one with a new connection per request.
// Not a _test.go helper, so that the lifecycle's reboot (lifecycle_master.go)
// can use it too.
type handoverProbes struct{ keepAlive, newConn *Prober }

func startHandoverProbes(t testing.TB, kubeconfig string) handoverProbes {
	t.Helper()
	return handoverProbes{StartProber(t, "keep-alive", kubeconfig, true), StartProber(t, "new connection per request", kubeconfig, false)}
}

// assertNoFailure stops both clients and fails t on any failed request
// (a complete answer later than 1 s is logged only), or on too few
// requests to mean anything.
func (p handoverProbes) assertNoFailure(t testing.TB, during string) {
	t.Helper()
	for _, r := range []struct {
		name string
		res  ProbeResult
	}{{"keep-alive", p.keepAlive.Stop()}, {"new-connection", p.newConn.Stop()}} {
		t.Logf("the %s probe client during %s: %d requests, %d failed %v, %d slow (complete, later than 1 s), %d connections opened%s",
			r.name, during, r.res.Requests, r.res.Failed, r.res.Kinds, r.res.SlowAnswers, r.res.NewConns, failuresSuffix(r.res))
		if r.res.Requests < 100 {
			t.Errorf("the %s probe client sent only %d requests during %s", r.name, r.res.Requests, during)
		}
		if r.res.Failed != 0 {
			t.Errorf("the %s probe client saw %d failed requests of %d during %s", r.name, r.res.Failed, r.res.Requests, during)
		}
	}
}

// Stop stops the prober and returns what it saw.
func (p *Prober) Stop() ProbeResult {
	p.cancel()
	<-p.done
	return p.Result()
}

// Result is what the prober saw so far.
func (p *Prober) Result() ProbeResult {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.res
	r.Failures = append([]string(nil), p.res.Failures...)
	r.Kinds = maps.Clone(p.res.Kinds)
	r.Windows = FailureWindows(p.outcomes)
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
