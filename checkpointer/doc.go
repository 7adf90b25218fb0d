// Package checkpointer keeps the self-hosted pods of this node that ask for
// it (bootlet.dev/checkpoint: "true") runnable without an apiserver
// (docs/checkpointer.md): it stores each component's latest Running and
// Ready pod with its Secrets and ConfigMaps, runs the checkpoint as a pod of
// bootlet's registry once the apiserver has been unreachable long enough,
// and withdraws it once the self-hosted pod is back and Ready long enough.
//
// Each Tick observes every component first (observe.go: the apiserver,
// the store, the registry, the runtime and readiness probes), calls Decide
// once per component (decide.go, pure, with the ownership rule book in
// owner.go) and carries out the Decisions (act.go). checkpoint.go is the
// stored record and the pod run from it.
//
// It must not touch the runtime: it asks whether a pod runs through
// Config.PodRunning (runner.Manager.PodRunning), and acts only through
// bootlet's registry (Registry) and the checkpoint store.
package checkpointer
