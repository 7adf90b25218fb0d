// Package master owns `bootlet master status|remove` (bootlet-tools only:
// it links etcd's client). It reads the Nodes and pods through the API and
// etcd's member list through the node's own member, with the healthcheck
// client's certificates of the rendered etcd pod in --asset-dir, and asks
// package masters what a removal may do. It decides nothing itself, and
// `remove` is its only write: one MemberRemove that package masters
// allowed.
package master
