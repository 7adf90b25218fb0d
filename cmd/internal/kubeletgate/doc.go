// Package kubeletgate owns `bootlet kubelet-gate`, the kubelet's
// ExecStartPre and ExecStopPost: through the run directory it shares with
// the daemon (package handoff, not the API), it announces the kubelet and
// waits until the daemon starts no container, so the kubelet adopts what
// bootlet started instead of duplicating it; it never keeps the kubelet
// from starting.
package kubeletgate
