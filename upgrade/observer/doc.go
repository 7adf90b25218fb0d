// Package observer reads one round of a cluster for the upgrade's rule
// book (package upgrade): the nodes, kube-system's pods, DaemonSets and
// Deployments, and etcd's members as their pods show them. It only reads;
// it decides nothing (upgrade does) and writes nothing (the controller
// and the CLI act).
package observer
