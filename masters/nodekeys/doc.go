// Package nodekeys is one node's side of its credentials as a master.
// Once an administrator has labelled the node's Node a master, it asks,
// with the node's own kubelet identity, for:
//   - its etcd member certificate: it makes a key on the node, asks the
//     masters' signer (masters/signer) for a certificate of signer
//     bootlet.dev/etcd-member, and writes the pair, with the etcd CA the
//     signer returns after it, where an etcd member's pod reads them:
//     server.crt and peer.crt (the signer's certificate serves both, as
//     kubeadm's two do), their keys, and ca.crt;
//   - the checkpointer identity (types.CheckpointerUser), the identity a
//     master's bootlet reads the control plane's Secrets with: a client
//     certificate of the apiserver's client signer, which the masters'
//     leader approves for a labelled node and the controller-manager
//     signs, written as a kubeconfig beside the kubelet's.
//
// Why the node asks rather than receives: its keys never leave it, and
// the CAs' keys never leave the masters (docs/design/masters.md, "A
// node that has never been a master").
//
// Decide and DecideIdentity (decide.go, identity.go) are pure: the label,
// the Node's addresses and what is on disk in, whether to ask out. Run
// (run.go) reads, asks, waits and writes. It must not write a credential
// the node already has and that is still good (a first-boot master's,
// which render wrote), delete anything (a demoted node's pair stays, as
// its member's data does; its identity lapses within IdentityLife), or
// touch etcd or any object but its own requests.
package nodekeys
