// Package csrapprover approves the client-certificate requests that a
// joining kubelet posts with a bootstrap token, and denies those that would
// give a token holder the identity of a node that already exists.
//
// The controller-manager's approver checks only that a request names some
// system:node: identity in system:nodes; with it, a bootstrap token yields a
// master's identity, and through the Node authorizer whatever that master's
// pods may read. bootlet's render therefore grants the token's group no
// auto-approval, and this controller approves in its place. Renewals by a
// node of its own certificate stay the controller-manager's
// (selfnodeclient); this package does not look at them.
//
// Decide is pure: the request and the facts in, the verdict out. Controller
// observes requests and Nodes through informers and writes the verdict as
// the request's approval condition. It never signs, never deletes, and
// never touches a request that another requester posted.
package csrapprover
