package manifests

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
)

// Base names of the PKI files under pki/ (kubeadm's, plus kubeconfig/ for the
// client credentials behind the kubeconfigs, which kubeadm only embeds).
const (
	CA                    = "ca"
	KubeletClientCA       = "kubelet-client-ca"
	APIServer             = "apiserver"
	APIServerKubeletClnt  = "apiserver-kubelet-client"
	FrontProxyCA          = "front-proxy-ca"
	FrontProxyClient      = "front-proxy-client"
	EtcdCA                = "etcd/ca"
	EtcdServer            = "etcd/server"
	EtcdPeer              = "etcd/peer"
	EtcdHealthcheckClient = "etcd/healthcheck-client"
	APIServerEtcdClient   = "apiserver-etcd-client"
	AdminClient           = "kubeconfig/admin"
	ControllerMgrClient   = "kubeconfig/controller-manager"
	SchedulerClient       = "kubeconfig/scheduler"
	KubeletClient         = "kubeconfig/kubelet"
	// ServiceAccountKey is sa.key and sa.pub.
	ServiceAccountKey = "sa"
	// CASigning is the cluster CA's signing certificate alone: the first
	// certificate of ca.crt, the one ca.key belongs to, rewritten by every
	// render. The controller-manager's --cluster-signing-cert-file names it
	// instead of kubeadm's ca.crt because its CSR signer takes exactly one
	// certificate, while ca.crt must be free to hold a bundle (old and new
	// CA) during a CA rotation; docs/operations.md, "CA rotation". It is a
	// copy of ca, not a certificate of its own (check-expiration lists it
	// as one).
	CASigning = "ca-signing"
)

// certBackdate is kubeadm's: NotBefore lies this far in the past, so small
// clock differences between the node and its clients do not matter. A
// certificate's lifetime (NotAfter - NotBefore) is therefore the requested
// validity plus the backdate, exactly as kubeadm issues them.
const certBackdate = kubeadmconstants.CertificateBackdate

// certSpec is one certificate to have under pki/: what it must say, and who
// signs it. Pure data, computed from the Config by certSpecs.
type certSpec struct {
	Base     string // file base name under pki/
	CA       string // Base of the signing CA; "" for a self-signed CA
	Config   certutil.Config
	Validity time.Duration
}

// certSpecs lists every certificate, CAs first, with kubeadm's subjects,
// usages and SANs, except where noted.
func certSpecs(c Config) ([]certSpec, error) {
	advertise := net.ParseIP(c.AdvertiseAddress)
	if advertise == nil {
		return nil, fmt.Errorf("advertise address %q is not an IP", c.AdvertiseAddress)
	}
	svcIP, err := c.APIServerServiceIP()
	if err != nil {
		return nil, err
	}
	loopback := net.IPv4(127, 0, 0, 1)
	ca := func(base, cn string) certSpec {
		// kubeadm also puts the CN in the DNS SANs of its CAs.
		return certSpec{Base: base, Config: certutil.Config{CommonName: cn, AltNames: certutil.AltNames{DNSNames: []string{cn}}}, Validity: c.CAValidity}
	}
	leaf := func(base, signer, cn string, orgs []string, usages []x509.ExtKeyUsage, alt certutil.AltNames) certSpec {
		return certSpec{Base: base, CA: signer, Config: certutil.Config{CommonName: cn, Organization: orgs, AltNames: normalizeAltNames(alt), Usages: usages}, Validity: c.CertValidity}
	}
	server := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	// kubeadm's GetEtcdAltNames: node name, localhost, advertise address and
	// both loopbacks.
	etcdAlt := certutil.AltNames{DNSNames: []string{c.NodeName, "localhost"}, IPs: []net.IP{advertise, loopback, net.IPv6loopback}}

	return []certSpec{
		ca(CA, "kubernetes"),
		ca(FrontProxyCA, "front-proxy-ca"),
		ca(EtcdCA, "etcd-ca"),
		// The kubelet's API trusts this CA only (its x509 clientCAFile), and
		// it signs only the apiserver's kubelet client. The cluster CA also
		// signs the controller-manager's, the scheduler's and every
		// CSR-approved certificate, none of which may reach the kubelet.
		ca(KubeletClientCA, KubeletClientCA),
		leaf(APIServer, CA, kubeadmconstants.APIServerCertCommonName, nil, server, apiserverAltNames(c, svcIP, advertise)),
		leaf(APIServerKubeletClnt, KubeletClientCA, kubeadmconstants.APIServerKubeletClientCertCommonName, nil, client, certutil.AltNames{}),
		leaf(FrontProxyClient, FrontProxyCA, kubeadmconstants.FrontProxyClientCertCommonName, nil, client, certutil.AltNames{}),
		leaf(EtcdServer, EtcdCA, c.NodeName, nil, both, etcdAlt),
		leaf(EtcdPeer, EtcdCA, c.NodeName, nil, both, etcdAlt),
		leaf(EtcdHealthcheckClient, EtcdCA, kubeadmconstants.EtcdHealthcheckClientCertCommonName, nil, client, certutil.AltNames{}),
		leaf(APIServerEtcdClient, EtcdCA, kubeadmconstants.APIServerEtcdClientCertCommonName, nil, client, certutil.AltNames{}),
		// admin is in system:masters, not kubeadm:cluster-admins: the latter
		// needs a ClusterRoleBinding that kubeadm creates with a separate
		// super-admin.conf, which bootlet does not make.
		leaf(AdminClient, CA, "kubernetes-admin", []string{kubeadmconstants.SystemPrivilegedGroup}, client, certutil.AltNames{}),
		leaf(ControllerMgrClient, CA, kubeadmconstants.ControllerManagerUser, nil, client, certutil.AltNames{}),
		leaf(SchedulerClient, CA, kubeadmconstants.SchedulerUser, nil, client, certutil.AltNames{}),
		leaf(KubeletClient, CA, kubeadmconstants.NodesUserPrefix+c.NodeName, []string{kubeadmconstants.NodesGroup}, client, certutil.AltNames{}),
		checkpointerCertSpec(c),
	}, nil
}

// apiserverAltNames are the apiserver certificate's SANs: kubeadm's
// GetAPIServerAltNames (the node's name and address, the kubernetes
// Service's names and IP, the controlPlaneEndpoint's host), plus localhost
// and 127.0.0.1 so that clients on the node (bootlet's own readiness
// checks, the kubelet later) can verify the apiserver over loopback. With
// Masters, every master's name and address instead of the node's, in the
// masters' order: the certificate is then the same for every master, as
// it must be, since the self-hosted apiserver runs on all of them from one
// Secret.
func apiserverAltNames(c Config, svcIP, advertise net.IP) certutil.AltNames {
	dns := []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc." + c.ClusterDomain, "localhost"}
	ips := []net.IP{svcIP}
	if len(c.Masters) == 0 {
		dns = append(dns, c.NodeName)
		ips = append(ips, advertise)
	} else {
		for _, m := range c.Masters {
			dns = append(dns, m.Name)
			ips = append(ips, net.ParseIP(m.Address))
		}
	}
	ips = append(ips, net.IPv4(127, 0, 0, 1))
	if host := c.ControlPlaneEndpointHost(); host != "" {
		if ip := net.ParseIP(host); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, host)
		}
	}
	return certutil.AltNames{DNSNames: dns, IPs: ips}
}

// normalizeAltNames is kubeadm's RemoveDuplicateAltNames: DNS names sorted
// and unique, IPs unique in their given order.
func normalizeAltNames(a certutil.AltNames) certutil.AltNames {
	out := certutil.AltNames{}
	if len(a.DNSNames) > 0 {
		out.DNSNames = sets.List(sets.New(a.DNSNames...))
	}
	seen := map[string]bool{}
	for _, ip := range a.IPs {
		if !seen[ip.String()] {
			seen[ip.String()] = true
			out.IPs = append(out.IPs, ip)
		}
	}
	return out
}

// keyPair is a loaded or issued certificate with its key, and their PEM.
type keyPair struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
}

// PKI is every key pair by base name, plus the service-account key PEMs.
type PKI struct {
	Pairs          map[string]*keyPair
	SAKeyPEM       []byte
	SAPublicKeyPEM []byte
}

// certMismatch says why an existing certificate cannot be kept for spec (""
// if it can): it must be for this key, signed by this CA, say exactly what
// the spec says, have the requested lifetime, and not be in the last tenth of
// it. Pure, so it is table-tested.
func certMismatch(cert *x509.Certificate, key crypto.Signer, spec certSpec, ca *x509.Certificate, now time.Time) string {
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return "does not match its key"
	}
	if ca == nil {
		if !cert.IsCA || cert.CheckSignatureFrom(cert) != nil {
			return "is not a self-signed CA"
		}
	} else if cert.IsCA || !bytes.Equal(cert.RawIssuer, ca.RawSubject) || cert.CheckSignatureFrom(ca) != nil {
		return "is not signed by " + spec.CA
	}
	if cert.Subject.CommonName != spec.Config.CommonName || !slices.Equal(cert.Subject.Organization, spec.Config.Organization) {
		return fmt.Sprintf("has subject %q", cert.Subject.String())
	}
	if !slices.Equal(cert.DNSNames, spec.Config.AltNames.DNSNames) || !ipsEqual(cert.IPAddresses, spec.Config.AltNames.IPs) {
		return fmt.Sprintf("has SANs %v %v", cert.DNSNames, cert.IPAddresses)
	}
	if !usagesEqual(cert.ExtKeyUsage, spec.Config.Usages) {
		return "has other key usages"
	}
	lifetime := cert.NotAfter.Sub(cert.NotBefore)
	if lifetime != spec.Validity+certBackdate {
		return fmt.Sprintf("has a lifetime of %s, not %s", lifetime-certBackdate, spec.Validity)
	}
	if now.Before(cert.NotBefore) {
		return "is not valid yet"
	}
	if !now.Before(cert.NotAfter.Add(-lifetime / 10)) {
		return "expires soon (less than a tenth of its lifetime left)"
	}
	return ""
}

func ipsEqual(a, b []net.IP) bool {
	return slices.EqualFunc(a, b, func(x, y net.IP) bool { return x.Equal(y) })
}

func usagesEqual(a, b []x509.ExtKeyUsage) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	sort.Slice(a, func(i, j int) bool { return a[i] < a[j] })
	sort.Slice(b, func(i, j int) bool { return b[i] < b[j] })
	return slices.Equal(a, b)
}

// loadOrCreatePKI makes dir/pki hold every certificate and key of specs.
// Keys are kept whenever they parse; a certificate is kept while
// certMismatch finds nothing, and otherwise re-issued for the same key. A
// re-issued CA keeps its key and subject, so certificates it signed earlier
// still verify. A CA certificate without its key is an error rather than a
// new CA: replacing a cluster's CA silently would cut off every client.
func loadOrCreatePKI(dir string, specs []certSpec, now time.Time, logf func(string, ...any)) (*PKI, error) {
	pki := &PKI{Pairs: map[string]*keyPair{}}
	for _, spec := range specs {
		var ca *keyPair
		if spec.CA != "" {
			ca = pki.Pairs[spec.CA]
			if ca == nil {
				return nil, fmt.Errorf("certificate %s: CA %s comes later in the list", spec.Base, spec.CA)
			}
		}
		kp, err := loadOrCreatePair(dir, spec, ca, now, logf)
		if err != nil {
			return nil, err
		}
		pki.Pairs[spec.Base] = kp
	}

	keyPath := filepath.Join(dir, ServiceAccountKey+".key")
	key, keyPEM, created, err := loadOrCreateKey(keyPath)
	if err != nil {
		return nil, err
	}
	if created {
		logf("[pki] generated %s", keyPath)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	pki.SAKeyPEM = keyPEM
	pki.SAPublicKeyPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	if err := writeFile(filepath.Join(dir, ServiceAccountKey+".pub"), pki.SAPublicKeyPEM, 0o600); err != nil {
		return nil, err
	}
	return pki, nil
}

func loadOrCreatePair(dir string, spec certSpec, ca *keyPair, now time.Time, logf func(string, ...any)) (*keyPair, error) {
	certPath := filepath.Join(dir, spec.Base+".crt")
	keyPath := filepath.Join(dir, spec.Base+".key")
	if spec.CA == "" {
		if _, err := os.Stat(certPath); err == nil {
			if _, err := os.Stat(keyPath); errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s exists but %s does not: refusing to replace a CA (remove both to start a new one)", certPath, keyPath)
			}
		}
	}
	key, keyPEM, created, err := loadOrCreateKey(keyPath)
	if err != nil {
		return nil, err
	}
	if created {
		logf("[pki] generated %s", keyPath)
	}
	var caCert *x509.Certificate
	if ca != nil {
		caCert = ca.Cert
	}

	if data, err := os.ReadFile(certPath); err == nil {
		certs, perr := certutil.ParseCertsPEM(data)
		if perr == nil {
			why := certMismatch(certs[0], key, spec, caCert, now)
			if why == "" {
				if err := os.Chmod(certPath, 0o644); err != nil {
					return nil, err
				}
				return &keyPair{Cert: certs[0], Key: key, CertPEM: data, KeyPEM: keyPEM}, nil
			}
			logf("[pki] re-issuing %s: it %s", certPath, why)
		} else {
			logf("[pki] re-issuing %s: %v", certPath, perr)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}

	cert, err := issue(spec, key, ca, now)
	if err != nil {
		return nil, fmt.Errorf("issuing %s: %w", certPath, err)
	}
	certPEM, err := certutil.EncodeCertificates(cert)
	if err != nil {
		return nil, err
	}
	if err := writeFile(certPath, certPEM, 0o644); err != nil {
		return nil, err
	}
	return &keyPair{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

// loadOrCreateKey returns the RSA-2048 key at path (kubeadm's default
// algorithm), generating and writing it (0600) only if the file is missing.
// A file that does not parse is an error, not a reason to replace a key.
func loadOrCreateKey(path string) (crypto.Signer, []byte, bool, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		k, err := keyutil.ParsePrivateKeyPEM(data)
		if err != nil {
			return nil, nil, false, fmt.Errorf("%s: %w (move it away to generate a new key)", path, err)
		}
		signer, ok := k.(crypto.Signer)
		if !ok {
			return nil, nil, false, fmt.Errorf("%s: not a signing key", path)
		}
		// Keys are 0600 even if something loosened them.
		return signer, data, false, os.Chmod(path, 0o600)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, false, err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, false, err
	}
	data, err = keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, false, err
	}
	if err := writeFile(path, data, 0o600); err != nil {
		return nil, nil, false, err
	}
	return key, data, true, nil
}

// issue makes a certificate the way kubeadm's pkiutil does (random 63-bit
// serial, digitalSignature+keyEncipherment, certSign for CAs, NotBefore
// backdated), with NotAfter = NotBefore + backdate + validity.
func issue(spec certSpec, key crypto.Signer, ca *keyPair, now time.Time) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).SetInt64(math.MaxInt64-1))
	if err != nil {
		return nil, err
	}
	notBefore := now.UTC().Truncate(time.Second).Add(-certBackdate)
	tmpl := &x509.Certificate{
		SerialNumber:          serial.Add(serial, big.NewInt(1)),
		Subject:               pkix.Name{CommonName: spec.Config.CommonName, Organization: spec.Config.Organization},
		DNSNames:              spec.Config.AltNames.DNSNames,
		IPAddresses:           spec.Config.AltNames.IPs,
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(certBackdate + spec.Validity),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           spec.Config.Usages,
		BasicConstraintsValid: true,
	}
	parent, signer := tmpl, key
	if ca == nil {
		tmpl.IsCA = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		parent, signer = ca.Cert, ca.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

// writeCASigning writes pki/ca-signing.crt: the certificate of ca.key alone
// (ca.crt's first certificate, as loadOrCreatePair read it).
func writeCASigning(dir string, pki *PKI) error {
	ca := pki.Pairs[CA]
	if ca == nil {
		return fmt.Errorf("no %s in the PKI", CA)
	}
	data, err := certutil.EncodeCertificates(ca.Cert)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, CASigning+".crt"), data, 0o644)
}
