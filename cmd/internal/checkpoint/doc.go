// Package checkpoint owns `bootlet checkpoint`'s flags and its printing: it
// reads the checkpoint store (package checkpoint of the module root:
// Inspect, InspectOne, InspectObjects) from the disk, not through the
// daemon, so it is the disaster-recovery view that works while the daemon
// is down.
package checkpoint
