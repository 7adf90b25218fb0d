// Package join owns joining a worker to a cluster bootlet rendered, all
// three steps of it: Run on the worker (kubeadm's token discovery of the
// cluster CA, then the cluster's kubelet configuration read with the
// token and written, all or nothing, beside the bootstrap kubeconfig),
// PrintCommand on a master (the command line with the endpoint, the token
// and the CA's hashes, as `kubeadm token create --print-join-command`),
// and Finish on the worker (the bootstrap token's copy removed once the
// kubelet authenticates with its own certificate).
//
// What render writes for joining (the token, cluster-info, the
// kubelet-config ConfigMap and their RBAC) stays in package manifests,
// which owns only files under the asset dir and never talks to an
// apiserver; this package is the part that does, and uses manifests'
// pure pieces (NodeKubeletConfig, ReadBootstrapToken, CACertHash).
package join
