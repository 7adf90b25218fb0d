package signer

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math"
	"math/big"
	"net"
	"net/netip"
	"time"
)

// backdate covers clocks a little behind the signer's, as kubeadm's
// certificates are backdated.
const backdate = 5 * time.Minute

// DefaultValidity is a member certificate's life when the request asks
// for none: the year of kubeadm's and render's leaf certificates.
const DefaultValidity = 365 * 24 * time.Hour

// Template is the request a node makes for its member: CN its name, its
// name and localhost, its addresses and both loopbacks (kubeadm's etcd
// SANs), for server and client auth. Decide issues it for a labelled node
// with those addresses.
func Template(name string, addrs []netip.Addr) *x509.CertificateRequest {
	ips := make([]net.IP, 0, len(addrs)+len(loopbacks))
	for _, a := range addrs {
		ips = append(ips, net.IP(a.AsSlice()))
	}
	ips = append(ips, loopbacks...)
	return &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}, DNSNames: []string{name, "localhost"}, IPAddresses: ips}
}

// IssueCertificate signs the request's key with the CA: the request's
// subject and names (Decide checked them), server and client auth, for
// validity (at most until the CA's own end). It returns the PEM.
func IssueCertificate(csr *x509.CertificateRequest, ca *x509.Certificate, caKey crypto.Signer, validity time.Duration, now time.Time) ([]byte, error) {
	if validity <= 0 {
		validity = DefaultValidity
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).SetInt64(math.MaxInt64-1))
	if err != nil {
		return nil, err
	}
	notBefore := now.UTC().Truncate(time.Second).Add(-backdate)
	notAfter := now.UTC().Add(validity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	if !notAfter.After(now) {
		return nil, errors.New("the etcd CA has expired")
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial.Add(serial, big.NewInt(1)),
		Subject:               pkix.Name{CommonName: csr.Subject.CommonName},
		DNSNames:              csr.DNSNames,
		IPAddresses:           csr.IPAddresses,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, csr.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
