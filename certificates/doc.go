// Package certificates owns the certificate workflow of a rendered control
// plane after render, as kubeadm's certs/renewal does:
//
//   - `certs check-expiration` (CheckExpiration): every copy of every
//     certificate, read from the asset dir's files, kubeconfigs and
//     rendered Secrets (PKIFileCopies, KubeconfigCopies, RenderedSecrets,
//     SecretCertCopies), from the in-cluster Secrets, the credential
//     mirror, the checkpoints and bootlet's own serving certificate, and
//     the report of them (CheckCertExpiration);
//   - `certs renew` (Renew): which certificates to renew
//     (RenewableCerts, SelectRenewals), their renewal in the asset dir with
//     the same key and CA (RenewPKI, which also brings the kubeconfigs and
//     rendered Secrets in line with pki/), then the apiserver's copies
//     (RenewSecretData) and the wait until the components use them.
//
// Render's own facts (which certificates it issues, the Secret keys of its
// files, its YAML, how it issues a certificate so that a re-render keeps
// it) stay in package manifests, which this package imports and which must
// never import this one.
//
// The daemon's automatic renewal is the sub-package autorenew. It runs
// `bootlet-tools certs renew` rather than importing this package, whose
// dependencies (kubeadm's, through manifests) must stay out of the
// daemon's binary. This package holds no CLI flags (cmd/internal/certs)
// and does not render.
package certificates
