// Package podapi is bootlet's API: the Kubernetes REST shape for the objects
// a node needs before there is an apiserver (Pods, Secrets, ConfigMaps,
// Events), served over a unix socket, plus the Go client the CLI uses.
//
// It owns the object registry (resourceVersion, validation, defaulting,
// durability through package checkpoint before any 2xx) and the HTTP edge. It
// must not touch the container runtime: it hands desired pods to a
// PodRuntime (package runner) and reads status and logs back from it.
//
// Three of its sub-packages own the edge's security, each imported by
// podapi and importing none of podapi: apitls the certificates (serving,
// client CA, minting), authn who sent a request (client certificate or
// socket peer), authz what that user may do. The fourth, podclient, is the
// other side of the edge, the CLI's verbs over client-go: podapi does not
// import it, and it imports none of podapi.
//
// Its writers' lock (core.wmu) comes first in the lock order across
// packages, which is written once, in package runner's doc (runner/doc.go):
// the registry calls its PodRuntime with it held, and nothing below may
// call back into the registry while holding a lock of its own.
package podapi
