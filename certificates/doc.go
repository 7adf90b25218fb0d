// Package certificates owns the certificates of a rendered control plane
// after render: `certs check-expiration` (CheckExpiration: every copy of
// every certificate, from the files, kubeconfigs, rendered and in-cluster
// Secrets, the credential mirror, the checkpoints and bootlet's own serving
// certificate) and `certs renew` (Renew: the same key and CA, everywhere a
// copy lives, then the wait until the components use them). Package
// manifests keeps what render shares with them: the PKI's layout, the
// renewal of the files and the expiry report.
//
// The daemon's automatic renewal is the sub-package autorenew. It runs
// `bootlet-tools certs renew` rather than importing this package, whose
// dependencies (kubeadm's, through manifests) must stay out of the
// daemon's binary.
package certificates
