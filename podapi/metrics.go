package podapi

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

var (
	watchesActive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "bootlet_api_watches", Help: "Number of open watch streams.",
	})
	watchEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bootlet_api_watch_events_total", Help: "Object changes published to watches, by resource and type.",
	}, []string{"resource", "type"})
)

func observeWrite(ev watchEvent) {
	watchEvents.WithLabelValues(ev.resource, string(ev.typ)).Inc()
}

// apiMetrics is the daemon's Prometheus registry: API request latency by
// verb, resource and code (named like the apiserver's), pods by phase.
type apiMetrics struct {
	reg      *prometheus.Registry
	latency  *prometheus.HistogramVec
	requests *prometheus.CounterVec
}

type podPhaseCollector struct {
	r    *Registry
	desc *prometheus.Desc
}

func (c *podPhaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *podPhaseCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[string]float64{}
	for _, ph := range []v1.PodPhase{v1.PodPending, v1.PodRunning, v1.PodSucceeded, v1.PodFailed, v1.PodUnknown} {
		counts[string(ph)] = 0
	}
	pods, _ := c.r.ListPods("")
	for _, p := range pods {
		ph := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			ph = "Terminating"
		}
		counts[ph]++
	}
	for ph, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, n, ph)
	}
}

func newAPIMetrics(r *Registry) *apiMetrics {
	m := &apiMetrics{
		reg: prometheus.NewRegistry(),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "bootlet_api_request_duration_seconds", Help: "API request latency by verb, resource and code (watches and log streams excluded).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"verb", "resource", "subresource", "code"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "bootlet_api_requests_total", Help: "API requests by verb, resource and code.",
		}, []string{"verb", "resource", "subresource", "code"}),
	}
	m.reg.MustRegister(m.latency, m.requests, watchesActive, watchEvents,
		&podPhaseCollector{r: r, desc: prometheus.NewDesc("bootlet_pods", "Pods by phase (Terminating for pods being deleted).", []string{"phase"}, nil)},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *apiMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// observe records one request, with the apiserver's verb names.
func (m *apiMetrics) observe(req *http.Request, code int, d time.Duration) {
	if m == nil || !strings.HasPrefix(req.URL.Path, "/api/v1") {
		return
	}
	rt, ok := parseRoute(req.URL.Path)
	if !ok || req.URL.Path == "/api/v1" {
		return
	}
	verb, resource, sub := requestLabels(req.Method, rt, isWatch(req), req.Header.Get("Content-Type"))
	c := strconv.Itoa(code)
	m.requests.WithLabelValues(verb, resource, sub, c).Inc()
	if verb != "WATCH" && sub != "log" {
		m.latency.WithLabelValues(verb, resource, sub, c).Observe(d.Seconds())
	}
}

// Label values are drawn from these fixed sets, never copied from the
// request: a client could otherwise mint a new series per URL or method
// (the apiserver does the same, see its cleanVerb and "other" resources).
var (
	metricResources    = sets.New("pods", "secrets", "configmaps", "events", "namespaces", "nodes")
	metricSubresources = sets.New("", "log", "status")
	metricMethods      = sets.New(http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
		http.MethodPatch, http.MethodDelete, http.MethodOptions)
)

// requestLabels maps a request to its verb, resource and subresource
// labels: a route's resource and subresource when the API serves them,
// otherwise "other", and the apiserver's verb name for the method.
func requestLabels(method string, rt route, watch bool, contentType string) (verb, resource, sub string) {
	resource, sub = "other", "other"
	if metricResources.Has(rt.resource) {
		resource = rt.resource
	}
	if metricSubresources.Has(rt.sub) {
		sub = rt.sub
	}
	switch {
	case method == http.MethodGet && watch:
		verb = "WATCH"
	case method == http.MethodGet && rt.name == "":
		verb = "LIST"
	case method == http.MethodPost:
		verb = "CREATE"
	case method == http.MethodPut:
		verb = "UPDATE"
	case method == http.MethodPatch && strings.HasPrefix(contentType, "application/apply-patch"):
		verb = "APPLY"
	case metricMethods.Has(method):
		verb = method
	default:
		verb = "OTHER"
	}
	return verb, resource, sub
}

// statusRecorder remembers the status code and keeps streaming working.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (s *statusRecorder) WriteHeader(code int) {
	if !s.wrote {
		s.code, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(p)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if h, ok := s.ResponseWriter.(http.Hijacker); ok {
		return h.Hijack()
	}
	return nil, nil, errors.New("hijack not supported")
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// RegisterMetrics adds collectors from the rest of the daemon (CRI calls,
// container restarts) to /metrics.
func (s *Server) RegisterMetrics(cs ...prometheus.Collector) {
	s.metrics.reg.MustRegister(cs...)
}
