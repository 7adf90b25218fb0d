package nodekeys

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"

	"github.com/bootlet/bootlet/checkpoint"
)

// The files in the member's PKI directory, as render names a first-boot
// master's (manifests.PKI's etcd/ca, etcd/server, etcd/peer), so that a
// member's pod made from a master's reads them where it is.
const (
	caFile     = "ca.crt"
	serverName = "server"
	peerName   = "peer"
)

// Read is the pair in dir: server.crt's first certificate and ca.crt's.
// (nil, nil) when server.crt is not there; an error when either pair
// does not load with its key, or peer.crt is not server.crt, so that the
// node asks again rather than keep files a member could not use.
func Read(dir string) (*Pair, error) {
	leaf, err := firstCert(filepath.Join(dir, serverName+".crt"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, name := range []string{serverName, peerName} {
		if _, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")); err != nil {
			return nil, fmt.Errorf("%s's pair: %w", name, err)
		}
	}
	if peer, err := firstCert(filepath.Join(dir, peerName+".crt")); err != nil || !peer.Equal(leaf) {
		return nil, fmt.Errorf("%s.crt is not %s.crt (%v)", peerName, serverName, err)
	}
	ca, err := firstCert(filepath.Join(dir, caFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return &Pair{Leaf: leaf, CA: ca}, nil
}

func firstCert(path string) (*x509.Certificate, error) {
	certs, err := certutil.CertsFromFile(path)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// Split is the signer's answer (the certificate, then the etcd CA) as
// the leaf and the CA. The CA is the first certificate after the leaf
// that is a CA and signed it; caOnDisk stands in for a signer that
// returns none.
func Split(chain []byte, caOnDisk *x509.Certificate) (leaf, ca *x509.Certificate, err error) {
	certs, err := certutil.ParseCertsPEM(chain)
	if err != nil {
		return nil, nil, fmt.Errorf("the signer's answer: %w", err)
	}
	leaf = certs[0]
	candidates := certs[1:]
	if caOnDisk != nil {
		candidates = append(candidates, caOnDisk)
	}
	for _, c := range candidates {
		if c.IsCA && leaf.CheckSignatureFrom(c) == nil {
			return leaf, c, nil
		}
	}
	return nil, nil, fmt.Errorf("the signer's answer holds no CA that signed the certificate of %q (issuer %q)", leaf.Subject.CommonName, leaf.Issuer.String())
}

func encode(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: c.Raw})
}

// Write puts the pair in dir: ca.crt, then the peer's pair, then the
// server's, each file through a rename, so that Read, which reads
// server.crt, sees a complete pair or the one before.
func Write(dir string, leafPEM, caPEM, keyPEM []byte) error {
	if err := writeFile(filepath.Join(dir, caFile), caPEM); err != nil {
		return err
	}
	for _, name := range []string{peerName, serverName} {
		if err := writeFile(filepath.Join(dir, name+".key"), keyPEM); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, name+".crt"), leafPEM); err != nil {
			return err
		}
	}
	return nil
}

// writeFile durably replaces path with data (checkpoint's atomic write:
// mode 0600, which a key needs and a certificate of a root-run member
// does not mind), unless path holds it already.
func writeFile(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	_, err := checkpoint.WriteFileAtomic(path, data)
	return err
}
