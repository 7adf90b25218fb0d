// Package cli is the plumbing the verb packages share: the daemon's client
// (with a failed dial turned into advice), the printers of get and status,
// klog's flags, and the bridge by which bootlet execs bootlet-tools for the
// heavy verbs (Tools, ExecTools), and how the verbs that work on a node's
// files find them (node.go): they ask the running daemon, over its socket,
// for the paths it runs with (NodeDefaults), a flag given explicitly
// winning, and an error about a missing path names the flag that sets it
// (NameFlag). It holds no verb.
package cli
