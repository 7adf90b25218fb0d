// Package servinggate sets the readiness gate bootlet renders on the
// self-hosted apiserver's pods (types.PodConditionServing,
// "bootlet.dev/serving") for the pods of this node: True once the pod's own
// process answers its readiness endpoint, False when it does not
// (docs/design/servinggate.md, "The rule book: `Decide`").
//
// Two apiservers share the port during a rolling update (SO_REUSEPORT), and
// the kubelet's readiness probe of the new pod is a new connection, which
// bootlet's router gives to the old one until the new one serves: without
// the gate the new pod turns Ready, and the DaemonSet controller deletes the
// old one, before the new one serves anything.
//
// Each round observes, decides, then acts (round.go): it lists this node's
// pods in kube-system and asks each gated one's own process
// (ownprocess.ServesReadinessVia, which asks the router first); Decide
// (decide.go, pure, table-tested) turns each pod's facts into the condition
// to set; and a strategic-merge patch of pods/status writes the conditions
// that change. gate.go is the loop and the apiserver client
// (internal/kubeclient). It patches only pods that declare the gate and run
// in the host network, and touches nothing else: not the pod, not its
// containers, not the router.
package servinggate
