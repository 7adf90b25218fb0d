// Package handoff hands bootlet's pods to a kubelet on the node without a
// container restart (docs/handoff.md): it keeps a static copy (same UID) of
// every pod bootlet runs in the kubelet's staticPodPath, trusts the
// kubelet's healthz only when the kubelet's own process answers it
// (kubelet.go), decides each pod's owner (bootlet, kubelet-static,
// released) and tells the pod's worker whether to keep its hands off.
//
// Each Step gathers its Facts first (observe.go), calls Decide once
// (decide.go, pure, table-tested) and carries out the Decision (act.go). A
// second look waits for the next step. StaticPod renders the static copy
// (static.go); a pod that takes Secret values into env never gets one
// (secrets.go). handoff.go runs the healthz poll loop, actuated.go keeps
// the kubelet's actuated-resources checkpoint while no kubelet runs.
//
// It must not touch the runtime: it never calls CRI, and reaches the pod
// runner only as runner.Handoff (the worker calls Step with plain values
// and applies the answer) and through the Runner interface of its poll
// loop. It never imports package runner. mu is a leaf: no lock is held
// across I/O or a call into the runner.
package handoff
