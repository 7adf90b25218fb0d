// Package nodeagent takes a node's own step of an upgrade: its kubelet.
// Every master's daemon runs it for its node (a worker runs `bootlet
// upgrade agent`). It reads the step the upgrade controller recorded in
// flight (or rolling back) for this node in the ClusterVersion's status,
// and once the controller has drained the node, it puts the target's
// kubelet binary in place (taken out of the target's kubelet image, the
// running one kept beside it) and restarts the kubelet through its unit,
// whose start gate lets the new kubelet adopt every running container. On
// a rollback it puts the kept binary back.
//
// Decide is pure; Agent reads the API, the binary's version and the node,
// and acts. It never writes to the API: the controller judges the step by
// what the kubelet reports.
package nodeagent
