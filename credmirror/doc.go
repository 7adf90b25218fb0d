// Package credmirror keeps the self-hosted control plane's credentials on
// the masters' disks, out of every kubelet's reach.
//
// The apiserver, controller-manager and scheduler need the cluster's
// signing keys (ca.key, sa.key) and client keys. Their Secrets stay in the
// apiserver, so that a renewal or a CA rotation is written once for every
// master, but no pod mounts them: the Node authorizer lets a kubelet read
// only the Secrets of pods bound to its node, so no node credential can
// read them. Instead each master's bootlet, with its checkpointer identity,
// mirrors every Secret that carries bootlet.dev/credential-dir into that
// host directory with the kubelet's own AtomicWriter (the code path of a
// Secret volume), and the components' pods mount the directory as a
// hostPath, as kubeadm's static pods mount /etc/kubernetes/pki.
//
// The package owns those directories: their layout, their seeding from
// render's self-hosted/ files before the first pivot, and their refresh
// from the apiserver. It writes nothing else and makes no API write.
package credmirror
