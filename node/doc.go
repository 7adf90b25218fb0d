// Package node is the daemon's composition root: Run builds the node's
// components from Options (the checkpoint store and registry, the API and
// its listeners, the container runtime and the runner, the handoff, the
// port hand-over, the pivot, the serving gate, the checkpointer and the
// master's controllers, the certificate renewal) in their start order, and
// owns their lifetime until the signal to stop. Each component is built
// by one small named function; the packages they come from know nothing
// of each other, only of the small interfaces wired here.
//
// cmd/internal/daemon turns the flags and the configuration file into
// Options; nothing here parses a flag.
package node
