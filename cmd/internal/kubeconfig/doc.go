// Package kubeconfig owns `bootlet kubeconfig`'s flags: it asks the daemon,
// over its unix socket only (podclient.Kubeconfig), to mint a client
// certificate for the TCP listener; the daemon signs and records it, the CLI
// only prints the kubeconfig.
package kubeconfig
