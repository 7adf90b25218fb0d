// Package pivot hands the control plane from bootlet's bootstrap pods to
// the self-hosted ones (docs/pivot.md): it waits for the apiserver, creates
// render's self-hosted objects, labels this node control-plane once its own
// bootstrap apiserver serves, watches this node's self-hosted pods, and
// withdraws each bootstrap pod from bootlet's registry once its self-hosted
// pod has taken over; then it records that the pivot is complete
// (done.go). sysctl.go sets net.ipv4.tcp_migrate_req, so connections queued
// at a closing apiserver move to the other one.
//
// Each round gathers its Facts first (observe.go: the reads, then the one
// probe), calls Decide once (decide.go, pure) and carries out the Decision
// (act.go); setup.go is what happens once before the rounds. It must not touch the runtime or the
// kubelet: it acts only by deleting bootstrap pods through bootlet's
// registry (BootstrapPods), and asks package ownprocess which process
// answers a self-hosted apiserver's /readyz.
package pivot
