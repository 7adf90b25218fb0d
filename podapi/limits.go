package podapi

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/podapi/authz"
)

// Limits are the API's caps on concurrent work, as the apiserver's
// --max-requests-inflight and --request-timeout, scaled to a node daemon
// with a handful of clients (the node's provisioner, kubectl, bootlet's
// CLI) on a small control-plane node. Each class has a cap in total and a
// cap per user, so one user (one certificate CN, one socket uid) cannot
// take the whole daemon. Over a cap the answer is 429 with Retry-After, as
// the apiserver's maxinflight filter answers. The health endpoints are
// never limited, so probes see the truth under load.
type Limits struct {
	// Short requests (everything but watches and streams).
	MaxRequestsInFlight, MaxRequestsInFlightPerUser int
	// Watches (?watch=true).
	MaxWatches, MaxWatchesPerUser int
	// Long-running streams: followed logs (?follow=true), exec, attach and
	// port-forward sessions.
	MaxStreams, MaxStreamsPerUser int
	// RequestTimeout bounds a short request: its context ends, and its
	// connection's read and write deadlines are set, so a client that
	// neither sends its body nor reads the answer holds nothing longer.
	RequestTimeout time.Duration
}

// DefaultLimits: a quarter of the apiserver's 400+200 in-flight requests
// (a node daemon serialises its writes behind one store lock anyway), half
// of that per user; watches and streams are goroutines with buffers that
// live for minutes, so they are capped lower; the apiserver's 60 s request
// timeout.
var DefaultLimits = Limits{
	MaxRequestsInFlight: 100, MaxRequestsInFlightPerUser: 50,
	MaxWatches: 100, MaxWatchesPerUser: 25,
	MaxStreams: 50, MaxStreamsPerUser: 10,
	RequestTimeout: 60 * time.Second,
}

// Listener timeouts, on the unix socket and the TCP listener: a client
// gets this long to send its request headers, and an idle keep-alive
// connection is closed after IdleTimeout.
const (
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = 90 * time.Second
)

// writeGrace is how long after its request timeout a short request may
// still write (its error).
var writeGrace = 5 * time.Second

// requestClass is what a request counts against.
type requestClass int

const (
	classShort requestClass = iota
	classWatch
	classStream
	classExempt
)

func (c requestClass) String() string {
	return [...]string{"requests", "watches", "streams", "exempt"}[c]
}

// classify sorts a request as the apiserver's long-running check does
// (watch verbs; log, exec, attach, port-forward subresources), except that
// a log that does not follow is short.
func classify(req *http.Request, ri *apirequest.RequestInfo) requestClass {
	switch req.URL.Path {
	case "/healthz", "/livez", "/readyz":
		return classExempt
	}
	if ri == nil || !ri.IsResourceRequest {
		return classShort
	}
	switch {
	case ri.Verb == "watch":
		return classWatch
	case ri.Subresource == "log":
		if f := req.URL.Query().Get("follow"); f == "true" || f == "1" {
			return classStream
		}
	case authz.IsStreaming(ri.Subresource):
		return classStream
	}
	return classShort
}

// limiter counts what runs, per class, in total and per user.
type limiter struct {
	limits Limits
	mu     sync.Mutex // leaf
	total  [3]int
	byUser [3]map[string]int
}

func newLimiter(l Limits) *limiter {
	lim := &limiter{limits: l}
	for i := range lim.byUser {
		lim.byUser[i] = map[string]int{}
	}
	return lim
}

func (l *limiter) caps(c requestClass) (total, perUser int) {
	switch c {
	case classWatch:
		return l.limits.MaxWatches, l.limits.MaxWatchesPerUser
	case classStream:
		return l.limits.MaxStreams, l.limits.MaxStreamsPerUser
	}
	return l.limits.MaxRequestsInFlight, l.limits.MaxRequestsInFlightPerUser
}

// acquire takes a slot of class c for user, or says which cap is reached.
// A cap of 0 is no cap.
func (l *limiter) acquire(c requestClass, name string) (release func(), refused string) {
	if c == classExempt {
		return func() {}, ""
	}
	total, perUser := l.caps(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case total > 0 && l.total[c] >= total:
		return nil, fmt.Sprintf("too many %s in flight (the limit is %d); please try again later", c, total)
	case perUser > 0 && l.byUser[c][name] >= perUser:
		return nil, fmt.Sprintf("too many %s in flight for user %q (the limit is %d per user); please try again later", c, name, perUser)
	}
	l.total[c]++
	l.byUser[c][name]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total[c]--
			if l.byUser[c][name]--; l.byUser[c][name] == 0 {
				delete(l.byUser[c], name)
			}
		})
	}, ""
}

// inFlight is the current count of a class (tests, metrics).
func (l *limiter) inFlight(c requestClass) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total[c]
}

// SetLimits sets the API's limits (before serving).
func (s *Server) SetLimits(l Limits) { s.limiter = newLimiter(l) }

// admit applies the limits to an authorized request: it refuses one over a
// cap with 429, and otherwise sets its deadlines. The caller serves the
// returned request and then calls release.
func (s *Server) admit(raw, w http.ResponseWriter, req *http.Request, u user.Info, ri *apirequest.RequestInfo) (*http.Request, func(), bool) {
	c := classify(req, ri)
	name := ""
	if u != nil {
		name = u.GetName()
	}
	release, refused := s.limiter.acquire(c, name)
	if refused != "" {
		klog.V(2).InfoS("Request refused over a limit", "user", name, "class", c, "path", req.URL.Path, "reason", refused)
		w.Header().Set("Retry-After", "1")
		writeError(w, apierrors.NewTooManyRequests(refused, 1))
		return nil, nil, false
	}
	rc := http.NewResponseController(raw)
	timeout := s.limiter.limits.RequestTimeout
	if c != classShort || timeout <= 0 {
		// Long-running: no deadline. One left on the connection by an
		// earlier request (keep-alive) must not end this one, and a
		// hijacked stream keeps its connection's deadlines.
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
		return req, release, true
	}
	deadline := time.Now().Add(timeout)
	_ = rc.SetReadDeadline(deadline)
	// The write deadline comes a little later, so a handler that ends at
	// its context's deadline can still write its error.
	_ = rc.SetWriteDeadline(deadline.Add(writeGrace))
	ctx, cancel := context.WithDeadline(req.Context(), deadline)
	return req.WithContext(ctx), func() { cancel(); release() }, true
}
