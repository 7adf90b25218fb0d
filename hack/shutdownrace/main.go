// Command shutdownrace is the minimal reproduction of the race at the end of
// kube-apiserver's shutdown delay (docs/design/reuseport.md, "What fails without it").
// It owns nothing of bootlet and touches nothing outside its own loopback
// servers.
//
// It builds only what kube-apiserver v1.36.3 runs there: the apiserver's own
// WithWaitGroup filter (k8s.io/apiserver) over a SafeWaitGroup
// (k8s.io/apimachinery), served by net/http's HTTP/2 server over TLS. One
// signal starts two goroutines, as genericapiserver.go does on
// NotAcceptingNewRequest: one calls the wait group's Wait, after which the
// filter answers 503 "apiserver is shutting down"; the other calls the
// server's Shutdown, which sends GOAWAY to every connection and closes the
// listener. A client that does not retry sends requests on one kept-alive
// HTTP/2 connection; a request that reaches the filter between the two
// gets the 503. Nothing outside the process orders the two goroutines: the
// only lever from outside is that no client sends a request on a
// connection to the stopping process at that moment.
//
//	go run ./hack/shutdownrace -trials 200 -interval 50ms
//
// prints how many trials (one shutdown each) saw a 503 and how many requests
// got one. -interval 0 sends the requests back to back.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"time"

	utilwaitgroup "k8s.io/apimachinery/pkg/util/waitgroup"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
)

func main() {
	trials := flag.Int("trials", 200, "shutdowns, each with a fresh server and client")
	interval := flag.Duration("interval", 50*time.Millisecond, "the client's pause between requests (0: back to back)")
	flag.Parse()
	if *trials < 1 || *interval < 0 {
		fmt.Fprintln(os.Stderr, "shutdownrace: -trials >= 1, -interval >= 0")
		os.Exit(2)
	}
	hit, requests, refused := 0, 0, 0
	for i := 0; i < *trials; i++ {
		r, err := trial(*interval)
		if err != nil {
			fmt.Fprintln(os.Stderr, "shutdownrace:", err)
			os.Exit(1)
		}
		requests += r.requests
		refused += r.n503
		if r.n503 > 0 {
			hit++
		}
	}
	fmt.Printf("interval %s: %d of %d shutdowns answered a kept-alive request 503 \"apiserver is shutting down\" (%d requests of %d)\n",
		*interval, hit, *trials, refused, requests)
}

type result struct{ requests, n503 int }

// trial runs one server, lets the client send requests for a random 100 to
// 300 ms, then signals NotAcceptingNewRequest, and counts the client's 503s
// until its requests fail (the listener is closed: a real client would now
// connect to the apiserver that takes over).
func trial(interval time.Duration) (result, error) {
	var wg utilwaitgroup.SafeWaitGroup
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{}") })
	notLongRunning := func(*http.Request, *apirequest.RequestInfo) bool { return false }
	filtered := genericfilters.WithWaitGroup(ok, notLongRunning, &wg)
	// WithRequestInfo's stand-in: the filter needs a RequestInfo.
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := &apirequest.RequestInfo{IsResourceRequest: false, Path: r.URL.Path, Verb: "get"}
		filtered.ServeHTTP(w, r.WithContext(apirequest.WithRequestInfo(r.Context(), info)))
	})
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()
	client.Timeout = time.Second

	var res result
	done := make(chan error, 1)
	go func() {
		for {
			resp, err := client.Get(srv.URL + "/version")
			if err != nil {
				done <- nil // refused: the listener is closed
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			res.requests++
			if resp.ProtoMajor != 2 {
				done <- errors.New("not HTTP/2")
				return
			}
			if resp.StatusCode == http.StatusServiceUnavailable {
				res.n503++
			}
			time.Sleep(interval)
		}
	}()

	time.Sleep(time.Duration(100+rand.IntN(200)) * time.Millisecond)
	notAcceptingNewRequest := make(chan struct{})
	var stopping sync.WaitGroup
	stopping.Add(2)
	go func() { // genericapiserver.go: the in-flight requests' drain
		defer stopping.Done()
		<-notAcceptingNewRequest
		wg.Wait()
	}()
	go func() { // genericapiserver.go: stopHTTPServerCh, then Server.Shutdown
		defer stopping.Done()
		<-notAcceptingNewRequest
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Config.Shutdown(ctx)
	}()
	close(notAcceptingNewRequest)
	stopping.Wait()
	select {
	case err := <-done:
		return res, err
	case <-time.After(10 * time.Second):
		return res, errors.New("the client never saw the listener close")
	}
}
