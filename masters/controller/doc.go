// Package controller is the masters' controller: while its daemon leads
// (the upgrade controller's Lease, so that one leader runs both and no
// operation on the masters begins during an upgrade's step), it runs a
// round of masters.Decide every few seconds. A round observes the Nodes,
// the control plane's pods, etcd's own member list (through this
// master's member), the record it keeps in the ConfigMap
// kube-system/bootlet-masters, and whether an upgrade step is in flight;
// it writes the record first, then makes the one call on etcd's member
// list the decision asks for, then says on each Node where it stands (the
// BootletMaster condition, and an Event when that changes).
//
// It owns etcd's member list and that record. It must not touch a node's
// files, pods or address: a node's part of a promotion or a demotion is
// its own daemon's, which reports it on its Node (masters.Annotation*).
package controller
