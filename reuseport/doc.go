// Package reuseport owns the hand-over of a TCP port between two processes
// that share it with SO_REUSEPORT, as two kube-apiservers share 6443 while
// bootlet withdraws one of them (the bootstrap apiserver at the pivot, the
// checkpoint apiserver once the self-hosted one serves again).
//
// Without it the kernel hands each new connection to one of the group's
// listeners by a hash of its addresses. Two kinds of request then fail for
// a client that does not retry: a new connection given to a listener that is
// bound but not serving yet (kube-apiserver binds seconds before it serves),
// and a request on a kept-alive connection to the withdrawn apiserver that
// reaches its handler in the moment between its shutdown filter starting to
// answer 503 and its GOAWAY (docs/pivot.md, "Zero failed requests").
//
// The hand-over closes both: an SK_REUSEPORT eBPF program attached to the
// group gives every new connection to the one listener in a
// REUSEPORT_SOCKARRAY map (Steer), the listener of the apiserver that takes
// over; then bootlet waits, bounded, until the outgoing apiserver holds no
// accepted connection on the port any more (its clients move on the GOAWAY
// of --goaway-chance, and reconnect to the steered listener) before it
// withdraws it. When the map's socket is closed the kernel drops it from the
// map and the program lets the kernel's hash choose again, so a steering
// never outlives the listener it names.
//
// The listeners are the apiservers' own sockets, borrowed for a moment with
// pidfd_getfd(2) (the attach and the map update need a file descriptor) and
// closed at once: bootlet must never keep a listener open, or a socket
// nobody accepts on would stay in the group.
//
// reuseport reads /proc and this network namespace's /proc/net/tcp*; it must
// not decide which apiserver takes over (the pivot and the checkpointer do),
// and it never accepts, closes or shuts down another process's socket.
package reuseport
