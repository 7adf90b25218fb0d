// Package ownprocess answers "which process answers this port": it finds
// the server side of a connection (the kernel's sock_diag), the process holding
// that socket among /proc/PID/fd, and whether a pod's own process answers
// its readiness endpoint (ServesReadiness). The pivot and the checkpointer
// use it before they trust a Ready condition (two apiservers share a port
// with SO_REUSEPORT), the handoff before it trusts the kubelet's healthz.
//
// It asks about bootlet's own network namespace, which is the answering process's when
// both run in the host network namespace. It holds no state and must not
// decide anything: callers decide what an answer means.
package ownprocess
