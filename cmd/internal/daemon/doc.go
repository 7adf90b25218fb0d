// Package daemon owns `bootlet daemon`: its flags and configuration file
// (daemonconfig.go, the flags winning over the file), and the start order
// of the node's components (runDaemon), which it wires and owns the
// lifetime of. It also holds the daemon-only helpers: the TCP and read-only
// listeners, the apiserver port hand-over and the release of start-up
// pages. The hourly certificate renewal is certificates/autorenew's.
package daemon
