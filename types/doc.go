// Package types is bootlet's vocabulary: every bootlet.dev/* annotation and
// label, the owner of a pod, the key of a pod in the API, the static pod
// name, the node's phases. One copy of each, so the daemon's packages, the
// renderer, the CLI and the e2e tests agree by construction.
//
// It is a leaf: it imports only k8s.io/api and k8s.io/apimachinery, holds
// no state and does no I/O. It must not grow behaviour beyond reading these
// words off an object.
package types
