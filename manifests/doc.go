// Package manifests is `bootlet render`: it turns a handful of cluster
// parameters (Config) into the assets a single-node control plane needs, laid
// out as kubeadm lays out /etc/kubernetes:
//
//   - pki/: the cluster, kubelet-client, front-proxy and etcd CAs and every certificate and key
//     kubeadm makes, plus the client credentials behind the kubeconfigs;
//   - admin.conf, controller-manager.conf, scheduler.conf, kubelet.conf;
//   - kubelet-config.yaml: the kubelet's configuration, the only copy of it
//     (KubeletConfiguration; the e2e framework calls the same generator);
//   - bootstrap-manifests/: the etcd, kube-apiserver, kube-controller-manager and
//     kube-scheduler pods bootlet runs first (kubeadm's own static pod specs,
//     built by calling kubeadm's code, with host paths moved into the asset dir);
//   - self-hosted/: the DaemonSet, Deployments, PDBs, Secrets and RBAC the
//     handoff to a self-hosted control plane creates in the apiserver, and
//     join.yaml: the bootstrap token, cluster-info and the RBAC of the
//     kubelet's TLS bootstrap, and the kubelet-config ConfigMap (the
//     configuration and kubelet client CA of joining nodes), for workers
//     to join;
//   - bootstrap-kubelet.conf (a worker's bootstrap kubeconfig, the token its
//     credential) and authentication-config.yaml (the apiserver's anonymous
//     access: the health endpoints and cluster-info only).
//
// Rendering is idempotent and deterministic: existing keys are always kept,
// existing certificates are kept while they still match what is asked for, the
// bootstrap token until the last tenth of its life, and everything else is a
// pure function of the Config, the keys and the token. Files are
// rewritten only when their bytes change.
//
// Reading and renewing the certificates of an existing asset dir (`bootlet
// certs check-expiration` and `renew`) belong to package certificates,
// which imports this one; this package must not import it. What it needs of
// render is here, beside the code that decides it (assets.go): the
// certificates render issues (CertBases, CABases), the self-hosted Secrets
// and their keys (SelfHostedSecretNames, SecretKey), the kubeconfigs' key
// pairs (KubeconfigPair), the YAML and file writing of the asset dir, and
// ReissueCert, which re-issues a leaf as render would keep it.
//
// ReadBootstrapToken, NewBootstrapToken, BootstrapTokenSecret and CACertHash
// are the pieces of `bootlet join print`, NodeKubeletConfig the pure part of
// `bootlet join`'s kubelet configuration (docs/cluster.md, "Workers join");
// package join puts them together and talks to the apiserver.
//
// LoadEtcdMember reads the rendered etcd pod back for the tools that act on
// that member (`bootlet etcd snapshot`), so they take its identity from the
// same kubeadm code that rendered it.
//
// This package owns only files under the asset directory. It never talks to
// bootlet, containerd or an apiserver, and never shells out.
package manifests
