package apitls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
)

// PKI is what the TCP listener serves with: a serving certificate and the
// CA client certificates must chain to. When bootlet made the client CA
// itself, ClientCAKey is set and the daemon can mint client certificates
// (`bootlet kubeconfig`).
type PKI struct {
	// serving is what every handshake gets (GetCertificate), swapped whole
	// when the files change, so a renewed certificate is served without a
	// restart and a handshake never sees half of one.
	serving atomic.Pointer[tls.Certificate]
	// ServingCertFile and ServingKeyFile are the serving pair's files,
	// which WatchServing re-reads.
	ServingCertFile, ServingKeyFile string
	// OwnServing: bootlet made the serving certificate (ROOT/pki) and
	// holds its CA's key, so RenewServingCert may re-issue it.
	OwnServing   bool
	ServingCAPEM []byte // the CA of the serving certificate (kubeconfig certificate-authority-data)
	ClientCAs    *x509.CertPool
	ClientCA     *x509.Certificate
	ClientCAKey  crypto.Signer
}

// ServingCertificate is the certificate handshakes get now.
func (p *PKI) ServingCertificate() *tls.Certificate { return p.serving.Load() }

// SetServingCertificate makes c the certificate of every later handshake.
func (p *PKI) SetServingCertificate(c tls.Certificate) { p.serving.Store(&c) }

// getCertificate is tls.Config.GetCertificate: one load of the pointer,
// no lock, no I/O in the handshake.
func (p *PKI) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return p.serving.Load(), nil
}

// ServerTLSConfig is the listener's mutual TLS: the current serving
// certificate at every handshake, and a client certificate that chains to
// the client CA required of every client.
func (p *PKI) ServerTLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: p.getCertificate,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      p.ClientCAs,
		NextProtos:     []string{"h2", "http/1.1"},
	}
}

// PKIOptions says where the files are; empty paths mean ROOT/pki, created
// on first start and reused afterwards.
type PKIOptions struct {
	Dir               string // ROOT/pki
	CertFile, KeyFile string // --tls-cert-file, --tls-private-key-file
	ClientCAFile      string // --client-ca-file
	ClientCAKeyFile   string // --client-ca-key-file (only to mint kubeconfigs)
	NodeName          string
	Hosts             []string // SANs beyond node name, localhost, 127.0.0.1
}

// LoadOrCreatePKI loads the given files, or creates (once) a CA and a
// serving certificate under Dir.
func LoadOrCreatePKI(o PKIOptions) (*PKI, error) {
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	caCertPath, caKeyPath := filepath.Join(o.Dir, "ca.crt"), filepath.Join(o.Dir, "ca.key")
	var ca *x509.Certificate
	var caKey crypto.Signer
	needOwnCA := o.CertFile == "" || o.ClientCAFile == ""
	if needOwnCA {
		var err error
		ca, caKey, err = loadOrCreateCA(caCertPath, caKeyPath)
		if err != nil {
			return nil, err
		}
	}
	p := &PKI{}
	// Serving certificate.
	if o.CertFile != "" {
		if o.KeyFile == "" {
			return nil, errors.New("--tls-cert-file needs --tls-private-key-file")
		}
		c, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("serving certificate: %w", err)
		}
		p.SetServingCertificate(c)
		p.ServingCertFile, p.ServingKeyFile = o.CertFile, o.KeyFile
		// The client trusts the chain's last certificate if it is a CA,
		// otherwise the system roots.
		if len(c.Certificate) > 1 {
			p.ServingCAPEM = pemCert(c.Certificate[len(c.Certificate)-1])
		}
	} else {
		hosts := append([]string{o.NodeName, "localhost", "127.0.0.1"}, o.Hosts...)
		certPath, keyPath := filepath.Join(o.Dir, "apiserver.crt"), filepath.Join(o.Dir, "apiserver.key")
		c, err := loadServing(certPath, keyPath, hosts)
		if err != nil {
			klog.InfoS("Creating the serving certificate", "path", certPath, "hosts", hosts, "reason", err.Error())
			if c, err = createServing(certPath, keyPath, ca, caKey, hosts); err != nil {
				return nil, err
			}
		}
		p.SetServingCertificate(c)
		p.ServingCertFile, p.ServingKeyFile, p.OwnServing = certPath, keyPath, true
		p.ServingCAPEM = pemCert(ca.Raw)
	}
	// Client CA.
	p.ClientCAs = x509.NewCertPool()
	if o.ClientCAFile != "" {
		data, err := os.ReadFile(o.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		certs, err := certutil.ParseCertsPEM(data)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		for _, c := range certs {
			p.ClientCAs.AddCert(c)
		}
		p.ClientCA = certs[0]
		if o.ClientCAKeyFile != "" {
			k, err := keyutil.PrivateKeyFromFile(o.ClientCAKeyFile)
			if err != nil {
				return nil, fmt.Errorf("--client-ca-key-file: %w", err)
			}
			s, ok := k.(crypto.Signer)
			if !ok {
				return nil, errors.New("--client-ca-key-file: not a signing key")
			}
			p.ClientCAKey = s
		}
	} else {
		p.ClientCAs.AddCert(ca)
		p.ClientCA, p.ClientCAKey = ca, caKey
	}
	return p, nil
}

func pemCert(der []byte) []byte {
	b, _ := certutil.EncodeCertificates(&x509.Certificate{Raw: der})
	return b
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	pemKey, err := keyutil.MarshalPrivateKeyToPEM(k)
	return k, pemKey, err
}

func loadOrCreateCA(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	if data, err := os.ReadFile(certPath); err == nil {
		certs, err := certutil.ParseCertsPEM(data)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", certPath, err)
		}
		k, err := keyutil.PrivateKeyFromFile(keyPath)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", keyPath, err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, nil, fmt.Errorf("%s: not a signing key", keyPath)
		}
		return certs[0], s, nil
	} else if !os.IsNotExist(err) {
		return nil, nil, err
	}
	k, pemKey, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "bootlet-ca"}, k)
	if err != nil {
		return nil, nil, err
	}
	if err := keyutil.WriteKey(keyPath, pemKey); err != nil {
		return nil, nil, err
	}
	if err := certutil.WriteCert(certPath, pemCert(ca.Raw)); err != nil {
		return nil, nil, err
	}
	klog.InfoS("Created the bootlet CA", "path", certPath)
	return ca, k, nil
}

// loadCA reads an existing CA pair (loadOrCreateCA without the create).
func loadCA(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	certs, err := certutil.CertsFromFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	k, err := keyutil.PrivateKeyFromFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("%s: not a signing key", keyPath)
	}
	return certs[0], s, nil
}
