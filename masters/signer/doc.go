// Package signer issues the etcd member certificates of a node an
// administrator has made a master: it approves and signs the
// CertificateSigningRequests of signer SignerName that a node's own kubelet
// identity posts for itself, once its Node carries the masters' label, and
// denies every other request of that signer with a reason.
//
// Why requests and not keys handed out: the node makes its key and never
// sends it; the etcd CA's key stays on the masters' disks; and the one
// thing that lets a request through is the label that NodeRestriction
// forbids any kubelet to set on its own Node. A worker's credentials can
// post a request, and it is denied (docs/design/masters.md, "A node that
// has never been a master").
//
// Decide (decide.go) is pure: the request and the Node's facts in, the
// verdict out. Issue (issue.go) makes the certificate. Lead runs on the
// masters' leader and writes the verdicts. It must not touch a request of
// any other signer, the record, or etcd's member list.
package signer
