// Package certs owns `bootlet certs check-expiration` and `bootlet certs renew`
// (bootlet-tools only): every certificate bootlet rendered or minted, every
// copy of it (files, kubeconfigs, rendered and in-cluster Secrets, the
// credential mirror, checkpoints, bootlet's own serving certificate), and
// its renewal with the same key and CA. The daemon's automatic renewal runs
// this same verb through bootlet-tools. It holds the verbs' flags (the
// paths both take, defined once in paths.go) and none of the work, which
// is package certificates'.
package certs
