// Package daemon owns `bootlet daemon`'s command line: its flags and its
// configuration file (daemonconfig.go, the flags winning over the file),
// turned into node.Options, and the effective configuration the daemon
// serves to the CLI on the node. What runs is package node's.
package daemon
