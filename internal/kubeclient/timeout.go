package kubeclient

import (
	"context"
	"io"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// WithRequestTimeout is a copy of cfg whose every request but a watch
// fails after d (the request and the reading of its answer). A
// rest.Config's own Timeout is the http.Client's, which ends a watch's
// stream too: an informer built on such a client reconnects its watch
// every Timeout, which on three masters was 2.4 new watches a second
// across the apiservers, for nothing. A watch ends when its server-side
// timeout (the reflector asks for minutes) or its context does.
func WithRequestTimeout(cfg *rest.Config, d time.Duration) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = 0
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return requestTimeout{rt: rt, d: d} })
	return cfg
}

type requestTimeout struct {
	rt http.RoundTripper
	d  time.Duration
}

// isWatch: client-go asks for a watch with watch=true (or 1).
func isWatch(req *http.Request) bool {
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

func (t requestTimeout) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.d <= 0 || isWatch(req) {
		return t.rt.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.d)
	resp, err := t.rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends the request's context once its answer is read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
