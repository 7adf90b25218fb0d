// Package checkpoint owns `bootlet checkpoint`: it reads the checkpoint store
// (package checkpoint of the module root) from the disk, not through the
// daemon, so it is the disaster-recovery view that works while the daemon is
// down.
package checkpoint
