package shim

import "github.com/prometheus/client_golang/prometheus"

var containerRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "bootlet_container_restarts_total",
	Help: "Container restarts bootlet performed (crashes, failed liveness probes, spec changes), by pod and container.",
}, []string{"namespace", "pod", "container"})

// Collectors are the lifecycle metrics, for the daemon's /metrics registry.
func Collectors() []prometheus.Collector { return []prometheus.Collector{containerRestarts} }
