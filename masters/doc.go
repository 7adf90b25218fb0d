// Package masters is the rule book of the set of masters: which nodes
// should run the control plane (their Node's control-plane label), what
// etcd's member list must become for that, and in which order, one node
// at a time, without losing etcd's quorum.
//
// It is pure, as package upgrade is for upgrades: Decide takes what one
// round observed (the Nodes, etcd's own member list, the record the
// controller keeps of earlier rounds) and returns the one act to take
// next, the refusals to report, and the record to keep. It must not touch
// the API, etcd or a node's files: a controller acts on the cluster's side
// of a decision (etcd's member list, Events), and each node's own daemon
// on its side (its etcd member, its checkpoints, the API address).
//
// Its two rules against the failures every other tool has had
// (docs/design/masters.md):
//   - nothing is removed because a Node, a label or a member arrived late:
//     a member goes only for a master the record has seen labelled whose
//     Node was then deleted, for an unlabelled one (a demotion), for an
//     explicit removal, or for a learner of this controller's that never
//     started;
//   - no act leaves etcd without a quorum of healthy voters, unless the
//     operator forces that one act.
package masters
