// Package reuseport owns the routing of the apiserver port while two
// kube-apiservers share it with SO_REUSEPORT: the self-hosted one taking
// over from the bootstrap one at the pivot, from the checkpoint after a
// reboot, or a DaemonSet's new pod from its old one.
//
// Left to the kernel's hash, a client that does not retry sees two
// failures: a new connection given to a listener that is bound but does
// not serve yet, and a 503 on a kept-alive connection at the end of the
// outgoing apiserver's shutdown delay. The Router gives every new
// connection to the newest listener that answers /readyz itself (an
// SK_REUSEPORT eBPF program and a REUSEPORT_SOCKARRAY map), and Handover
// waits, bounded, until the outgoing apiserver holds no connection before
// the caller withdraws it. Why and the numbers: docs/design/reuseport.md.
//
// It trusts only what another local user cannot forge: it routes to the
// listeners of the apiserver containers its caller lists (by the holder's
// cgroup, DecideEligible), and its probes come from a loopback address and
// source ports only root may bind (ProbePortLow-ProbePortHigh), which the
// program matches both.
//
// It reads /proc and this network namespace's sockets (sock_diag), borrows a
// listener with pidfd_getfd(2) only for the syscalls that need its file
// descriptor, and closes it at once: a listener nobody accepts on must never
// stay in the group. It must not decide which apiserver is withdrawn (the
// pivot and the checkpointer do), and it never accepts on, closes or shuts
// down another process's socket.
package reuseport
