package runner

import "github.com/prometheus/client_golang/prometheus"

// containerRestarts has one series per container of a live pod; a deleted
// pod's series go with it (forgetPodMetrics), so the series count follows
// the pods that exist, not every pod that ever ran.
var containerRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "bootlet_container_restarts_total",
	Help: "Container restarts bootlet performed (crashes, failed liveness probes, spec changes), by pod and container.",
}, []string{"namespace", "pod", "container"})

// Collectors are the lifecycle metrics, for the daemon's /metrics registry.
func Collectors() []prometheus.Collector { return []prometheus.Collector{containerRestarts} }

// forgetPodMetrics deletes the series of a pod (its runtime name).
func forgetPodMetrics(namespace, pod string) {
	containerRestarts.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "pod": pod})
}
