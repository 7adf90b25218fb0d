// Package cli is the plumbing the verb packages share: the daemon's client
// (with a failed dial turned into advice), the printers of get and status,
// manifest decoding, klog's flags, and the bridge by which bootlet execs
// bootlet-tools for the heavy verbs (Tools, ExecTools). It holds no verb.
package cli
