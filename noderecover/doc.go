// Package noderecover is `bootlet recover` (docs/operations.md,
// "Recovery"): it puts a control-plane node whose etcd data or snapshot
// survived, and nothing else of its running state, back where bootlet's
// next start runs the bootstrap control plane on that data and the pivot
// hands it back to the self-hosted objects etcd holds.
//
// Decide (plan.go) is the pure rule book: from Facts (what is on disk,
// what still answers, whether the node's lock was had) to a Plan of moves
// and the restore, or a refusal that names every missing or conflicting
// path. Observe and Apply (apply.go) are the I/O around it; Run (run.go)
// orders them: the lock first (recoverlock, which the daemon's start takes
// too), then every check, the snapshot's with etcd's own integrity check
// among them, before the first move. It runs offline: it never talks to a
// running daemon, kubelet or etcd except to refuse when one answers. It
// deletes nothing: what it replaces is moved aside, next to where it was.
// It must not touch containerd, the kubelet's root dir or render's files.
package noderecover
