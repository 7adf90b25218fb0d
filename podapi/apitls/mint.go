package apitls

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"time"
)

// MintClientCert signs a client certificate (CN=user, O=groups) with the
// client CA.
func (p *PKI) MintClientCert(user string, groups []string, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if p.ClientCAKey == nil {
		return nil, nil, errors.New("the client CA's key is not available (--client-ca-file without --client-ca-key-file)")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	return signCert(tmpl, p.ClientCA, p.ClientCAKey, validity)
}

func signCert(tmpl, ca *x509.Certificate, caKey crypto.Signer, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	k, keyPEM, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-5 * time.Minute).UTC()
	tmpl.NotAfter = time.Now().Add(validity).UTC()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, k.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	return pemCert(der), keyPEM, nil
}
