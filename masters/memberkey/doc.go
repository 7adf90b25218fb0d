// Package memberkey is one node's side of its etcd member certificate.
// Once an administrator has labelled the node's Node a master, it makes a
// key on the node, asks the masters' signer (masters/signer) for a
// certificate with the node's own kubelet identity, and writes the pair,
// with the etcd CA the signer returns after it, where an etcd member's pod
// reads them: server.crt and peer.crt (the signer's certificate serves
// both, as kubeadm's two do), their keys, and ca.crt.
//
// Why the node asks rather than receives: its key never leaves it, and
// the etcd CA's key never leaves the masters (docs/design/masters.md, "A
// node that has never been a master").
//
// Decide (decide.go) is pure: the label, the Node's addresses and what
// is on disk in, whether to ask out. Run (run.go) reads, asks, waits and
// writes. It must not write a pair the node already has and that is
// still good (a first-boot master's, which render wrote), delete
// anything (a demoted node's pair stays, as its member's data does), or
// touch etcd or any object but its own requests.
package memberkey
