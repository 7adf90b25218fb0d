// Package servinggate sets the readiness gate bootlet renders on the
// self-hosted apiserver's pods (types.PodConditionServing,
// "bootlet.dev/serving") for the pods of this node: True once the pod's own
// process answers its readiness endpoint, False when it does not
// (docs/pivot.md, "The serving gate").
//
// Two apiservers share the port during a rolling update (SO_REUSEPORT), and
// the kubelet's readiness probe of the new pod is a new connection, which
// bootlet's router gives to the old one until the new one serves: without
// the gate the new pod turns Ready, and the DaemonSet controller deletes the
// old one, before the new one serves anything.
//
// decide.go is the pure decision (Decide, table-tested); gate.go the I/O: a
// list of this node's pods in kube-system, the own-process check
// (ownprocess.ServesReadinessVia, which asks the router first), and a
// strategic-merge patch of pods/status when the condition changes. It
// patches only pods that declare the gate and run in the host network, and
// touches nothing else: not the pod, not its containers, not the router.
package servinggate
