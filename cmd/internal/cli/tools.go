package cli

import "github.com/spf13/cobra"

// describe, render, certs, etcd, recover, join and master live in bootlet-tools
// (cmd/bootlet-tools), which bootlet execs, so the daemon never links their
// libraries (docs/design/architecture.md, "Footprint"); toolsexec.go is the bridge.

// Use and Short of the tool verbs, shared by both binaries so that
// `bootlet --help` reads the same in each.
const (
	DescribeUse   = "describe (pod|secret|configmap) NAME"
	DescribeShort = "Show an object in detail, with its events (as kubectl describe)"
	RenderUse     = "render --asset-dir DIR"
	RenderShort   = "Render a control plane (one node, or one asset dir per --master): PKI, kubeconfigs, bootstrap pods, self-hosted objects"
	CertsUse      = "certs"
	CertsShort    = "Check (check-expiration) and renew (renew) the certificates bootlet rendered or minted"
	EtcdUse       = "etcd snapshot save|restore FILE"
	EtcdShort     = "Save a snapshot of the node's etcd member, or restore one into a new data directory"
	RecoverUse    = "recover [--snapshot FILE]"
	RecoverShort  = "Recover a control-plane node from its etcd data or a snapshot, offline: bootlet's next start runs the bootstrap pods, the pivot hands back"
	JoinUse       = "join API_ENDPOINT --token TOKEN --discovery-token-ca-cert-hash sha256:HASH"
	JoinShort     = "Join a worker: check the cluster CA by token and hash, write the kubelet's bootstrap kubeconfig and the cluster's kubelet configuration (join print: the command, on a master)"
	MasterUse     = "master status|remove NAME"
	MasterShort   = "Show the masters and etcd's members (status), or remove a master that is gone for good from etcd (remove)"
)

// Tools is how a binary provides the tool verbs: bootlet as forwarders to
// bootlet-tools (ExecTools), bootlet-tools as the verbs themselves.
type Tools struct {
	// Commands are the tool verbs' commands; server is the root's --server.
	Commands func(server *string) []*cobra.Command
	// Path is the binary that runs the tool verb verb, for the daemon's
	// automatic certificate renewal.
	Path func(verb string) (string, error)
}
