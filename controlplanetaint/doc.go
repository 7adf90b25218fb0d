// Package controlplanetaint keeps tenants' pods off the masters whenever the
// cluster has somewhere else to put them: while any Node lacks the
// control-plane label, every control-plane Node carries the taint
// node-role.kubernetes.io/control-plane:NoSchedule (kubeadm's). A cluster of
// masters alone (a single node included) stays schedulable, and the
// controller says so with an event on each master.
//
// It removes only a taint it added itself (marked by an annotation), never
// one an administrator set, and it never touches a Node without the
// control-plane label. Decide is pure; Controller observes Nodes and writes
// the taints.
package controlplanetaint
