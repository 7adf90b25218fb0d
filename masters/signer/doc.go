// Package signer decides the credentials a node asks for once an
// administrator has made it a master (masters/nodekeys asks):
//   - it approves and signs the CertificateSigningRequests of signer
//     SignerName (an etcd member's certificate) that a node's own kubelet
//     identity posts for itself, once its Node carries the masters' label,
//     and denies every other request of that signer with a reason;
//   - it approves a node's own request of the apiserver's client signer
//     for the checkpointer identity (IdentitySignerName, CN
//     types.CheckpointerUser and nothing else) on the same condition, and
//     denies it otherwise; the controller-manager signs. Requests of that
//     signer for any other name, or from anyone but a node, are not its
//     to decide.
//
// Why requests and not keys handed out: the node makes its key and never
// sends it; the CAs' keys stay on the masters' disks; and the one thing
// that lets a request through is the label that NodeRestriction forbids
// any kubelet to set on its own Node. A worker's credentials can post a
// request, and it is denied (docs/design/masters.md, "A node that has
// never been a master").
//
// Decide and DecideIdentity (decide.go, identity.go) are pure: the request
// and the Node's facts in, the verdict out. Issue (issue.go) makes the
// etcd member's certificate. Lead runs on the masters' leader and writes
// the verdicts. It must not touch a request it does not decide, the
// record, or etcd's member list.
package signer
