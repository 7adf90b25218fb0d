// Package join owns `bootlet join`, `join print` and `join finish` (bootlet-tools
// only): a worker checks the cluster CA by token and hash (kubeadm's
// discovery), writes the kubelet's bootstrap kubeconfig and configuration,
// and later drops the bootstrap token once its kubelet has its own
// certificate.
package join
