package main

// describe, render, certs, etcd, recover and join live in bootlet-tools (-tags bootlet_tools), which bootlet execs, so the daemon
// never links their libraries (docs/architecture.md, "Footprint"); tools_full.go and tools_exec.go.

// Use and Short of the tool verbs, shared by both builds so that
// `bootlet --help` reads the same in each.
const (
	describeUse   = "describe (pod|secret|configmap) NAME"
	describeShort = "Show an object in detail, with its events (as kubectl describe)"
	renderUse     = "render --asset-dir DIR"
	renderShort   = "Render a control plane (one node, or one asset dir per --master): PKI, kubeconfigs, bootstrap pods, self-hosted objects"
	certsUse      = "certs"
	certsShort    = "Check (check-expiration) and renew (renew) the certificates bootlet rendered or minted"
	etcdUse       = "etcd snapshot save|restore FILE"
	etcdShort     = "Save a snapshot of the node's etcd member, or restore one into a new data directory"
	recoverUse    = "recover [--snapshot FILE]"
	recoverShort  = "Recover a control-plane node from its etcd data or a snapshot, offline: bootlet's next start runs the bootstrap pods, the pivot hands back"
	joinUse       = "join API_ENDPOINT --token TOKEN --discovery-token-ca-cert-hash sha256:HASH"
	joinShort     = "Join a worker: check the cluster CA by token and hash, write the kubelet's bootstrap kubeconfig and the cluster's kubelet configuration (join print: the command, on a master)"
)
