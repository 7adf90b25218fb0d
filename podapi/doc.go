// Package podapi is bootlet's API: the Kubernetes REST shape for the objects
// a node needs before there is an apiserver (Pods, Secrets, ConfigMaps,
// Events), served over a unix socket, plus the Go client the CLI uses.
//
// It owns the object registry (resourceVersion, validation, defaulting,
// durability through package checkpoint before any 2xx) and the HTTP edge. It
// must not touch the container runtime: it hands desired pods to a
// PodRuntime (package runner) and reads status and logs back from it.
package podapi
