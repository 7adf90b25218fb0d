// Package controller is the upgrade controller: one leader among the
// masters' daemons (a Lease in kube-system) reads the desired version
// (the ClusterVersion), observes the cluster, asks the rule book
// (upgrade.Decide) what to do, writes the answer into the ClusterVersion's
// status, and only then acts: it sets a workload's image (the apiserver
// DaemonSet, the controller-manager and scheduler, kube-proxy, CoreDNS),
// or puts it back to the image of the version it left. Because the status
// is written before each act, a new leader, or the same daemon after a
// reboot, reads the step in flight and resumes it.
//
// It decides nothing itself (package upgrade does), and it never touches
// a node's files: a kubelet's or an etcd member's step is taken by that
// node's own daemon, from the status this controller writes.
package controller
