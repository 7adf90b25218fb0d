package apitls

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/checkpoint"
)

// ServingReloadInterval is how often WatchServing reads the serving
// files.
const ServingReloadInterval = 2 * time.Second

// WatchServing re-reads the serving certificate's files every interval
// until ctx ends and serves them from the next handshake on once their
// bytes change and they make a valid pair: `bootlet certs renew`, the
// daemon's automatic renewal or an operator replacing --tls-cert-file are
// picked up without a restart. A pair caught between the writes of its two
// files does not parse, or does not match, and is tried again at the next
// tick; the old certificate is served meanwhile. Polling two small files
// is cheaper and simpler than inotify, which loses the watch when a file is
// replaced by rename.
func (p *PKI) WatchServing(ctx context.Context, interval time.Duration) {
	var lastCert, lastKey []byte
	if c := p.serving.Load(); c != nil {
		lastCert, _ = os.ReadFile(p.ServingCertFile)
		lastKey, _ = os.ReadFile(p.ServingKeyFile)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		certPEM, err1 := os.ReadFile(p.ServingCertFile)
		keyPEM, err2 := os.ReadFile(p.ServingKeyFile)
		if err := errors.Join(err1, err2); err != nil {
			klog.V(2).InfoS("Serving certificate not readable; serving the loaded one", "err", err)
			continue
		}
		if bytes.Equal(certPEM, lastCert) && bytes.Equal(keyPEM, lastKey) {
			continue
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			klog.V(2).InfoS("Serving certificate files changed but are no valid pair yet; serving the loaded one", "cert", p.ServingCertFile, "err", err)
			continue
		}
		lastCert, lastKey = certPEM, keyPEM
		p.SetServingCertificate(c)
		if leaf, err := x509.ParseCertificate(c.Certificate[0]); err == nil {
			klog.InfoS("Reloaded the serving certificate", "path", p.ServingCertFile, "serial", leaf.SerialNumber.String(), "notAfter", leaf.NotAfter.UTC().Format(time.RFC3339))
		}
	}
}

// loadServing reuses the serving certificate while it is valid for a while
// yet and covers every host.
func loadServing(certPath, keyPath string, hosts []string) (tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return c, err
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return c, err
	}
	if time.Until(leaf.NotAfter) < 30*24*time.Hour {
		return c, errors.New("expires within 30 days")
	}
	for _, h := range hosts {
		if h == "" {
			continue
		}
		if err := leaf.VerifyHostname(h); err != nil {
			return c, fmt.Errorf("does not cover %s", h)
		}
	}
	return c, nil
}

func createServing(certPath, keyPath string, ca *x509.Certificate, caKey crypto.Signer, hosts []string) (tls.Certificate, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "bootlet"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	seen := map[string]bool{}
	for _, h := range hosts {
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	certPEM, keyPEM, err := signCert(tmpl, ca, caKey, 365*24*time.Hour)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := keyutil.WriteKey(keyPath, keyPEM); err != nil {
		return tls.Certificate{}, err
	}
	if err := certutil.WriteCert(certPath, certPEM); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// servingValidity is the lifetime of the serving certificate bootlet makes.
const servingValidity = 365 * 24 * time.Hour

// RenewServingCert re-issues the serving certificate bootlet made under dir
// (ROOT/pki/apiserver.crt) with its CA (ROOT/pki/ca.{crt,key}): the same
// key, names and usages, valid for a year from now. Only the certificate
// file is replaced, by rename, so the pair on disk always matches; a
// running daemon serves it within ServingReloadInterval (WatchServing).
func RenewServingCert(dir string) (old, renewed *x509.Certificate, err error) {
	certPath, keyPath := filepath.Join(dir, "apiserver.crt"), filepath.Join(dir, "apiserver.key")
	ca, caKey, err := loadCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, nil, err
	}
	certs, err := certutil.CertsFromFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	old = certs[0]
	k, err := keyutil.PrivateKeyFromFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	key, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("%s: not a signing key", keyPath)
	}
	if err := old.CheckSignatureFrom(ca); err != nil {
		return nil, nil, fmt.Errorf("%s is not signed by %s: not bootlet's own, not renewed: %w", certPath, filepath.Join(dir, "ca.crt"), err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      old.Subject,
		DNSNames:     old.DNSNames, IPAddresses: old.IPAddresses,
		ExtKeyUsage: old.ExtKeyUsage, KeyUsage: old.KeyUsage,
		NotBefore: now.Add(-5 * time.Minute).UTC(), NotAfter: now.Add(servingValidity).UTC(),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, err
	}
	if renewed, err = x509.ParseCertificate(der); err != nil {
		return nil, nil, err
	}
	// A reader (the listener's watch, check-expiration) sees the old
	// certificate or the new one, whole; the store's writer also fsyncs
	// the directory.
	if _, err := checkpoint.WriteFileAtomic(certPath, pemCert(der)); err != nil {
		return nil, nil, err
	}
	if err := os.Chmod(certPath, 0o644); err != nil {
		return nil, nil, err
	}
	return old, renewed, nil
}
