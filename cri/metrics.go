package cri

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

var (
	callLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "bootlet_cri_request_duration_seconds",
		Help:    "CRI call latency by method (the calls bootlet's pod lifecycle makes).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"method"})
	callErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "bootlet_cri_request_errors_total",
		Help: "CRI calls that returned an error, by method.",
	}, []string{"method"})
)

// Collectors are the CRI metrics, for the daemon's /metrics registry.
func Collectors() []prometheus.Collector { return []prometheus.Collector{callLatency, callErrors} }

func observe(method string, start time.Time, err error) {
	callLatency.WithLabelValues(method).Observe(time.Since(start).Seconds())
	if err != nil {
		callErrors.WithLabelValues(method).Inc()
	}
}

// instrumentedRuntime times the lifecycle calls; everything else passes
// through to the kubelet's CRI client untouched.
type instrumentedRuntime struct{ internalapi.RuntimeService }

func (r instrumentedRuntime) RunPodSandbox(ctx context.Context, c *runtimeapi.PodSandboxConfig, h string) (id string, err error) {
	defer func(t time.Time) { observe("RunPodSandbox", t, err) }(time.Now())
	return r.RuntimeService.RunPodSandbox(ctx, c, h)
}

func (r instrumentedRuntime) StopPodSandbox(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("StopPodSandbox", t, err) }(time.Now())
	return r.RuntimeService.StopPodSandbox(ctx, id)
}

func (r instrumentedRuntime) RemovePodSandbox(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("RemovePodSandbox", t, err) }(time.Now())
	return r.RuntimeService.RemovePodSandbox(ctx, id)
}

func (r instrumentedRuntime) PodSandboxStatus(ctx context.Context, id string, v bool) (s *runtimeapi.PodSandboxStatusResponse, err error) {
	defer func(t time.Time) { observe("PodSandboxStatus", t, err) }(time.Now())
	return r.RuntimeService.PodSandboxStatus(ctx, id, v)
}

func (r instrumentedRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) (l []*runtimeapi.PodSandbox, err error) {
	defer func(t time.Time) { observe("ListPodSandbox", t, err) }(time.Now())
	return r.RuntimeService.ListPodSandbox(ctx, f)
}

func (r instrumentedRuntime) CreateContainer(ctx context.Context, sb string, c *runtimeapi.ContainerConfig, sc *runtimeapi.PodSandboxConfig) (id string, err error) {
	defer func(t time.Time) { observe("CreateContainer", t, err) }(time.Now())
	return r.RuntimeService.CreateContainer(ctx, sb, c, sc)
}

func (r instrumentedRuntime) StartContainer(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("StartContainer", t, err) }(time.Now())
	return r.RuntimeService.StartContainer(ctx, id)
}

func (r instrumentedRuntime) StopContainer(ctx context.Context, id string, timeout int64) (err error) {
	defer func(t time.Time) { observe("StopContainer", t, err) }(time.Now())
	return r.RuntimeService.StopContainer(ctx, id, timeout)
}

func (r instrumentedRuntime) RemoveContainer(ctx context.Context, id string) (err error) {
	defer func(t time.Time) { observe("RemoveContainer", t, err) }(time.Now())
	return r.RuntimeService.RemoveContainer(ctx, id)
}

func (r instrumentedRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) (l []*runtimeapi.Container, err error) {
	defer func(t time.Time) { observe("ListContainers", t, err) }(time.Now())
	return r.RuntimeService.ListContainers(ctx, f)
}

func (r instrumentedRuntime) ContainerStatus(ctx context.Context, id string, v bool) (s *runtimeapi.ContainerStatusResponse, err error) {
	defer func(t time.Time) { observe("ContainerStatus", t, err) }(time.Now())
	return r.RuntimeService.ContainerStatus(ctx, id, v)
}

func (r instrumentedRuntime) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (o, e []byte, err error) {
	defer func(t time.Time) { observe("ExecSync", t, err) }(time.Now())
	return r.RuntimeService.ExecSync(ctx, id, cmd, timeout)
}

type instrumentedImages struct {
	internalapi.ImageManagerService
}

func (r instrumentedImages) ImageStatus(ctx context.Context, img *runtimeapi.ImageSpec, v bool) (s *runtimeapi.ImageStatusResponse, err error) {
	defer func(t time.Time) { observe("ImageStatus", t, err) }(time.Now())
	return r.ImageManagerService.ImageStatus(ctx, img, v)
}

func (r instrumentedImages) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, a *runtimeapi.AuthConfig, c *runtimeapi.PodSandboxConfig) (ref string, err error) {
	defer func(t time.Time) { observe("PullImage", t, err) }(time.Now())
	return r.ImageManagerService.PullImage(ctx, img, a, c)
}
