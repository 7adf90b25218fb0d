// Package etcd owns `bootlet etcd snapshot save|restore` (bootlet-tools only): it
// takes the endpoints, the client identity and the member's identity from
// the rendered etcd pod in --asset-dir, and package etcdsnapshot does the
// work.
package etcd
