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
//	pivot.go       the pivot to self-hosted: the apiserver (client-go), render's self-hosted
//	               objects, this node's self-hosted pods, withdrawal of bootstrap pods
//	               (decisions in pivot_plan.go; which process answers /readyz in
//	               pivot_serving.go; net.ipv4.tcp_migrate_req in pivot_sysctl.go)
//	node_phase.go  the node's phase in the lifecycle (decideNodePhase, pure) from the
//	               registry's pods, the kubelet's healthz, the pivot record, the checkpointer
//	volumes*.go    volume setup; the pod directories over two roots (volumes_dirs.go):
//	               kubelet-layout data in the kubelet's root dir, materialised volumes in
//	               bootlet's
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
// does); it reaches the runtime only through package cri. It is only a
// client of other HTTP servers: the kubelet's healthz (handoff) and /pods
// (checkpointer), and the apiserver (pivot, checkpointer). It never removes
// the kubelet's pod directory of a pod the kubelet owns, and never puts a
// volume the static copy does not carry in the kubelet's volumes/ dirs.
package shim
