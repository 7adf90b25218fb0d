// Package runner is bootlet's pod runner: it turns the desired pods it is
// given into running sandboxes and containers, the way the kubelet's pod
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
//	handoff.go     the worker's side of the handoff (the Handoff interface, hands-off syncs)
//	gate.go        RuntimeGate: the registry's runtime before and after containerd answers
//	logs.go, stream.go  container logs, exec/attach/port-forward
//	volumes*.go    volume setup; the pod directories over two roots (volumes_dirs.go):
//	               kubelet-layout data in the kubelet's root dir, materialised volumes in
//	               bootlet's
//
// The controllers above the runner name their pure core Facts → Decide →
// Decision. The runner keeps the kubelet's names instead, Plan(PlanInput)
// → Actions for kuberuntime's computePodActions(pod, status) → podActions,
// so that each rule can be read side by side with the kubelet's.
//
// A failed runtime read aborts the sync (NotFound excepted): nothing is
// planned from a partial view and the last published status stays. A failed
// start (sandbox, pull, create, start) is retried with the kubelet's backoff.
//
// Locks across bootlet's packages, in the only order they may be taken (a
// lock may be held while taking one further right, never one to its left):
//
//	podapi core.wmu → runner.RuntimeGate.mu → runner.Manager.mu → worker.mu
//
// The registry calls its PodRuntime (this gate) with its writers' lock
// core.wmu held (podapi's afterWrite, afterGraceful); its readers' lock
// core.mu guards only pure CPU work and is never held across a call out.
// The runner calls back into podapi (StatusSink, EventSink, OwnerSink)
// holding no lock.
//
// and leaves that are taken alone: Manager.runtimeMu, Manager.nameMu,
// probeResults.mu, podBackoff.mu (and the flowcontrol.Backoff inside it),
// inflight.mu, and the controllers' own locks (handoff.Handoff.mu,
// checkpointer.Checkpointer.mu), which are never held across a call into
// the runner. No runner lock is ever held across a CRI call, a filesystem
// call, a sink callback (StatusSink, EventSink), a call into the handoff
// or a channel wait.
//
// runner must not own durability (checkpoint does) nor serve HTTP (podapi
// does); it reaches the runtime only through package cri. It never imports
// the controllers above it (handoff, pivot, checkpointer, nodephase): the
// handoff reaches a worker only through the Handoff interface, with plain
// values in and out. It never removes the kubelet's pod directory of a pod
// the kubelet owns, and never puts a volume the static copy does not carry
// in the kubelet's volumes/ dirs.
package runner
