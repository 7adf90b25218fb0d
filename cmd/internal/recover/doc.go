// Package recover owns `bootlet recover` (bootlet-tools only): an offline
// recovery of a control-plane node, refused while a daemon runs on the root
// dir; package noderecover does the work.
package recover
