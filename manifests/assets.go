package manifests

import (
	"crypto"
	"crypto/x509"
	"io"
	"os"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	certutil "k8s.io/client-go/util/cert"
)

// What package certificates needs of render's layout and formats to read
// and renew an asset dir render wrote. These are render's own facts (its
// certificate list, its Secret keys, its YAML), so they stay here, next to
// the code that decides them; the reading and the renewal do not.

// certBases are the Base of every certSpec. certSpecs needs a Config, which
// a reader of an existing asset dir does not have; TestCertBases keeps the
// two lists the same.
var certBases = []string{
	CA, FrontProxyCA, EtcdCA, KubeletClientCA,
	APIServer, APIServerKubeletClnt, FrontProxyClient, EtcdServer, EtcdPeer, EtcdHealthcheckClient, APIServerEtcdClient,
	AdminClient, ControllerMgrClient, SchedulerClient, KubeletClient, CheckpointerClient,
}

// caBases are the CAs among certBases.
var caBases = []string{CA, FrontProxyCA, EtcdCA, KubeletClientCA}

// CertBases are the certificates render issues, by their name under pki/
// (without .crt), CAs first.
func CertBases() []string { return slices.Clone(certBases) }

// CABases are the CAs among CertBases.
func CABases() []string { return slices.Clone(caBases) }

// SelfHostedSecretNames are the kube-system Secrets render writes into
// self-hosted/ (credentialSecret), for readers without an asset dir.
var SelfHostedSecretNames = []string{KubeAPIServer, KubeControllerManager, KubeScheduler}

// KubeconfigPair is the key pair under pki/ whose client certificate the
// kubeconfig render writes as file embeds; ok is false for a file render
// does not write with a client certificate.
func KubeconfigPair(file string) (pair string, ok bool) {
	for _, spec := range kubeconfigSpecs(Config{}) {
		if spec.File == file {
			return spec.Pair, true
		}
	}
	return "", false
}

// SecretKey is the key of a credential file (relative to the asset dir) in
// the self-hosted Secrets.
func SecretKey(rel string) string { return secretKey(rel) }

// DecodeObjects reads a self-hosted/*.yaml file's objects, typed.
func DecodeObjects(r io.Reader) ([]runtime.Object, error) { return decodeObjects(r) }

// MarshalObjects writes objects as render writes a self-hosted/*.yaml
// file, so that a rewritten file is the one a re-render would write.
func MarshalObjects(objs []runtime.Object) ([]byte, error) { return marshalObjects(objs) }

// WriteFile replaces path as render replaces the asset dir's files: not at
// all when the bytes are the same, else atomically.
func WriteFile(path string, data []byte, perm os.FileMode) error { return writeFile(path, data, perm) }

// ReissueCert re-issues old, pki/NAME.crt, for its own key with the CA
// that signed it, as kubeadm's renewal does (certToConfig): its subject,
// SANs and extended usages, with the lifetime it had. The result is what a
// re-render keeps (certMismatch), so render and renewal never undo each
// other.
func ReissueCert(name string, old *x509.Certificate, key crypto.Signer, caCert *x509.Certificate, caKey crypto.Signer, now time.Time) (*x509.Certificate, error) {
	return issue(renewalSpec(name, old), key, &keyPair{Cert: caCert, Key: caKey}, now)
}

// renewalSpec is the certSpec that re-issues old. Pure.
func renewalSpec(name string, old *x509.Certificate) certSpec {
	return certSpec{
		Base: name,
		Config: certutil.Config{
			CommonName:   old.Subject.CommonName,
			Organization: old.Subject.Organization,
			AltNames:     certutil.AltNames{DNSNames: old.DNSNames, IPs: old.IPAddresses},
			Usages:       old.ExtKeyUsage,
		},
		Validity: old.NotAfter.Sub(old.NotBefore) - certBackdate,
	}
}
