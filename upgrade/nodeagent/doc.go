// Package nodeagent takes a node's own steps of an upgrade: its kubelet's
// and its etcd member's. It reads the step the upgrade controller recorded
// in flight (or rolling back) for this node in the ClusterVersion's status.
// For the kubelet, once the controller has drained the node, it puts the
// target's kubelet binary in place (taken out of the target's kubelet
// image, the running one kept beside it) and restarts the kubelet through
// its unit, whose start gate lets the new kubelet adopt every running
// container; on a rollback it puts the kept binary back. For etcd it sets
// the member's stored pod to the target's image, with helper members where
// etcd has fewer than three (helper.go).
//
// A first-boot master's daemon runs it for both. A worker runs `bootlet
// upgrade agent` for its kubelet, and keeps it once labelled a master,
// while its daemon runs a second agent, without a kubelet binary, for its
// etcd member alone (node/promotedleader.go): one step, one agent.
//
// Decide is pure; Agent reads the API, the binary's version and the node,
// and acts. It never writes to the API: the controller judges the step by
// what the kubelet reports.
package nodeagent
