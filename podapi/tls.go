package podapi

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/checkpoint"
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

// ServeTLSListener serves the API on l with mutual TLS: every client must
// present a certificate that chains to the client CA. The node-local
// endpoints (/bootlet/v1/...) are not served here.
func (s *Server) ServeTLSListener(ctx context.Context, l net.Listener, p *PKI) error {
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: p.getCertificate,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		ClientCAs:      p.ClientCAs,
		NextProtos:     []string{"h2", "http/1.1"},
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: ReadHeaderTimeout, IdleTimeout: IdleTimeout, TLSConfig: cfg}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(tls.NewListener(l, cfg)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// KubeconfigRequest is what POST /bootlet/v1/kubeconfig takes (query
// parameters): user (CN, default bootlet-admin), group (O, repeatable,
// default system:masters), server (URL clients use), validity (Go duration,
// default and at most Server.MaxMintValidity, 24h unless
// --kubeconfig-max-validity says otherwise). Every minting is audited
// (mint.go).
func (s *Server) serveKubeconfig(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		writeError(w, methodNotAllowed(req))
		return
	}
	if s.PKI == nil || s.TCPAddress == "" {
		writeError(w, apierrors.NewServiceUnavailable("the daemon has no TCP listener (start it with --listen)"))
		return
	}
	q := req.URL.Query()
	user := q.Get("user")
	if user == "" {
		user = "bootlet-admin"
	}
	groups := q["group"]
	if len(groups) == 0 {
		groups = []string{"system:masters"}
	}
	validity, err := s.mintValidity(user, q.Get("validity"))
	if err != nil {
		writeError(w, err)
		return
	}
	server := q.Get("server")
	if server == "" {
		server = "https://" + s.TCPAddress
	}
	certPEM, keyPEM, err := s.PKI.MintClientCert(user, groups, validity)
	if err != nil {
		writeError(w, apierrors.NewServiceUnavailable(err.Error()))
		return
	}
	name := "bootlet"
	if s.Registry != nil && s.Registry.nodeName != "" {
		name = "bootlet-" + s.Registry.nodeName
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: s.PKI.ServingCAPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = name
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		writeError(w, err)
		return
	}
	s.auditMint(req, user, groups, validity, certPEM)
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(out)
}

// localHandler is what the unix socket serves: the API plus the
// node-local endpoints.
func (s *Server) localHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/bootlet/v1/kubeconfig", s.serveKubeconfig)
	mux.Handle("/", s)
	return mux
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
