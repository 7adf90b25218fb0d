// Package etcdsnapshot saves and restores snapshots of the node's etcd member
// (`bootlet etcd snapshot save|restore`), with etcd's own client and etcdutl's
// restore, pinned to the etcd the control plane runs.
//
// It owns two things: the snapshot file it writes (a new FILE.part-RANDOM,
// created exclusively, then renamed to FILE) and the new data directory it
// restores into. It never writes to a running
// member's data directory (restore refuses a directory that holds anything),
// never changes the cluster it saves from (a snapshot is a read), and knows
// nothing of bootlet's daemon, containerd or the asset directory: the caller
// says where to connect and which identity to restore (cmd/bootlet takes
// both from the rendered etcd pod, manifests.LoadEtcdMember).
package etcdsnapshot
