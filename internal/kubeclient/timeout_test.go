package kubeclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// TestWithRequestTimeout: a request that answers too late fails at the
// timeout; a watch streams past it; an answer read in time is whole.
func TestWithRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("watch") == "true":
			// A watch: events for longer than the timeout.
			w.WriteHeader(http.StatusOK)
			for i := range 6 {
				_, _ = io.WriteString(w, strings.Repeat("e", i+1)+"\n")
				w.(http.Flusher).Flush()
				time.Sleep(50 * time.Millisecond)
			}
		case r.URL.Path == "/slow":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		default:
			_, _ = io.WriteString(w, "ok")
		}
	}))
	defer srv.Close()
	defer close(release)
	const d = 100 * time.Millisecond
	cfg := WithRequestTimeout(&rest.Config{Host: srv.URL, Timeout: time.Hour}, d)
	if cfg.Timeout != 0 {
		t.Fatalf("the http.Client's timeout is %s: it would end watches", cfg.Timeout)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (string, error) {
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			return "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	start := time.Now()
	if _, err := get("/slow"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a request answered too late: %v, want the deadline", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the late request failed after %s, want about %s", took, d)
	}
	if body, err := get("/fast"); err != nil || body != "ok" {
		t.Fatalf("a request answered in time: %q %v", body, err)
	}
	start = time.Now()
	body, err := get("/api/v1/nodes?watch=true")
	if err != nil {
		t.Fatalf("a watch streaming for longer than the request timeout: %v", err)
	}
	if took := time.Since(start); took < 2*d || strings.Count(body, "\n") != 6 {
		t.Fatalf("the watch streamed %d events over %s, want 6 over more than %s", strings.Count(body, "\n"), took, 2*d)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// requestDeadline is how long a request (not a watch) of cfg may take:
// the deadline its round tripper puts on a request's context (0: none).
func requestDeadline(cfg *rest.Config) time.Duration {
	var got time.Duration
	rt := http.RoundTripper(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if dl, ok := r.Context().Deadline(); ok {
			got = time.Until(dl)
		}
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(""))}, nil
	}))
	if cfg.WrapTransport != nil {
		rt = cfg.WrapTransport(rt)
	}
	resp, err := rt.RoundTrip(httptest.NewRequest(http.MethodGet, "https://apiserver/api/v1/nodes", nil))
	if err == nil {
		_ = resp.Body.Close()
	}
	return got
}
