// Package shim is bootlet's pod lifecycle engine: it turns the desired pods it
// is given into running sandboxes and containers, the way the kubelet's pod
// workers and kuberuntime manager do, and reports their status.
//
// The core is pure: Plan (plan.go), ComputeStatus (status.go), gcDecision
// (gc.go), the backoff and failure mappings (backoff.go) take the desired
// pod, the observed CRI state and the clock, and return decisions. A worker
// (worker.go) keeps only the sequencing of one pod's sync; the I/O it
// sequences has one file per step, as containerd's CRI server has one per
// RPC:
//
//	observe.go     ListPodSandbox/PodSandboxStatus/ListContainers/ContainerStatus → Observed
//	sandbox.go     RunPodSandbox, the shared start environment, volume refresh
//	containers.go  image, CreateContainer, StartContainer, postStart; StopContainer with preStop
//	terminate.go   a deleted pod: stop, remove, forget; orphan cleanup
//	gc.go          dead containers and sandboxes
//	publish.go     status to the StatusSink
//	probe.go       probe loops and lifecycle handlers
//	calls.go       every mutating CRI call, detached from shutdown, counted for Shutdown
//	handoff.go     the kubelet's healthz, static copies of the pods, owner, hands-off syncs
//	               (decisions in handoff_plan.go)
//	checkpointer.go  self-hosted pods' checkpoints: a client of the apiserver and the
//	               kubelet's /pods; stores through checkpoint, runs a checkpoint as a
//	               pod of bootlet's registry (decisions in checkpointer_plan.go)
//
// A failed runtime read aborts the sync (NotFound excepted): nothing is
// planned from a partial view and the last published status stays. A failed
// start (sandbox, pull, create, start) is retried with the kubelet's backoff.
//
// Locks, in the only order they may be taken (a lock may be held while
// taking one further down, never up):
//
//	Manager.mu (workers) → worker.mu (desired pod, status, waiting, probing)
//
// and leaves that are taken alone: Manager.runtimeMu, Manager.nameMu,
// probeResults.mu, podBackoff.mu (and the flowcontrol.Backoff inside it),
// inflight.mu, handoff.mu, Checkpointer.mu. No shim lock is ever held across a CRI call, a filesystem
// call, a sink callback (StatusSink, EventSink) or a channel wait.
//
// shim must not own durability (checkpoint does) nor serve HTTP (podapi
// does; shim is only a client: the kubelet's healthz and /pods, the
// apiserver); it reaches the runtime only through package cri.
package shim
