//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptrace"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Prober is the pivot's probe client: every 50 ms, in turn, GET /version and
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

// stopStrictProbes stops the probe clients, logs what each counted across
// what (a phrase: "across both promotions"), and fails the test for any
// request of theirs that failed: the strict clients of the pivot tests.
func stopStrictProbes(t testing.TB, across string, probers ...*Prober) {
	t.Helper()
	for _, p := range probers {
		res := p.Stop()
		t.Logf("probe client %s %s: %d requests, %d failed %v in windows %v, %d slow answers%s",
			p.name, across, res.Requests, res.Failed, res.Kinds, res.Windows, res.SlowAnswers, failuresSuffix(res))
		if res.Failed > 0 {
			t.Errorf("probe client %s: %d of %d requests failed %s; want none", p.name, res.Failed, res.Requests, across)
		}
	}
}
