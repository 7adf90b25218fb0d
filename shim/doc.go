// Package shim is bootlet's pod lifecycle engine: it turns the desired pods it
// is given into running sandboxes and containers, the way the kubelet's pod
// workers and kuberuntime manager do, and reports their status.
//
// The core is pure: Plan (plan.go) and ComputeStatus (status.go) take the
// desired pod, the observed CRI state and the clock, and return decisions.
// Workers (worker.go) do the I/O: they observe through CRI, call the core, and
// execute its actions. Volumes, probes and hosts files sit at the same edge.
//
// shim must not own durability (checkpoint does) nor speak HTTP (podapi
// does); it reaches the runtime only through package cri.
package shim
