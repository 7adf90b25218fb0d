package certificates

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"

	"github.com/bootlet/bootlet/manifests"
)

// Renewal of render's leaf certificates, for `bootlet certs renew`: the
// same CA, the same key, the same subject, SANs and usages, a fresh
// validity of the same length. What the files say is the truth; every other
// copy (the kubeconfigs, the rendered Secrets here, the Secrets in the
// apiserver in renew.go) is brought in line with the files, so a renewal
// cut short is finished by running it again.

// RenewableCerts are the leaves render issues, by their name under pki/
// (check-expiration's CERTIFICATE column), in render's order. Renewal never
// re-issues a CA (manifests.CABases): CA rotation is a procedure
// (docs/operations.md, "Certificates").
func RenewableCerts() []string {
	var out []string
	for _, b := range manifests.CertBases() {
		if !slices.Contains(manifests.CABases(), b) {
			out = append(out, b)
		}
	}
	return out
}

// SelectRenewals picks what `certs renew` re-issues among candidates (the
// names it may renew, in order) from its arguments: "all", or names; or,
// with no argument and within > 0, every candidate whose notAfter lies
// before now+within (the automatic renewal). A CA, or a name that is not a
// candidate, is an error naming the valid ones. Pure.
func SelectRenewals(args, candidates []string, notAfter map[string]time.Time, within time.Duration, now time.Time) ([]string, error) {
	if len(args) == 0 {
		if within <= 0 {
			return nil, errors.New("name the certificates to renew (all, or names as check-expiration prints them), or give --expiring-within")
		}
		var out []string
		for _, c := range candidates {
			if t, ok := notAfter[c]; ok && t.Before(now.Add(within)) {
				out = append(out, c)
			}
		}
		return out, nil
	}
	if slices.Contains(args, "all") {
		if len(args) > 1 {
			return nil, fmt.Errorf("all renews every certificate: give it alone, not with %v", slices.DeleteFunc(slices.Clone(args), func(s string) bool { return s == "all" }))
		}
		return slices.Clone(candidates), nil
	}
	var out []string
	for _, c := range candidates {
		if slices.Contains(args, c) {
			out = append(out, c)
		}
	}
	for _, a := range args {
		switch {
		case slices.Contains(manifests.CABases(), a):
			return nil, fmt.Errorf("%s is a CA: certs renew re-issues leaves with the same CA; rotating a CA is the procedure in docs/operations.md (Certificates)", a)
		case !slices.Contains(candidates, a):
			return nil, fmt.Errorf("unknown certificate %q: valid names are all, %s", a, strings.Join(candidates, ", "))
		}
	}
	return out, nil
}

// RenewedCert is one re-issued certificate.
type RenewedCert struct {
	Name                 string
	OldSerial, NewSerial *big.Int
	NotAfter             time.Time
}

// RenewResult is what RenewPKI rewrote.
type RenewResult struct {
	Certs []RenewedCert
	// Kubeconfigs are the ASSETS/*.conf files whose client certificate
	// changed; SecretFiles the self-hosted/*.yaml files whose Secrets did.
	Kubeconfigs, SecretFiles []string
}

// RenewPKI re-issues names (RenewableCerts' names) under ASSETS/pki, then
// brings the kubeconfigs and the rendered Secrets in line with pki/. Each
// file is replaced atomically, files first: a crash leaves every file
// whole, and running it again re-issues and finishes the rest.
func RenewPKI(assetDir string, names []string, now time.Time, logf func(string, ...any)) (*RenewResult, error) {
	pkiDir := filepath.Join(assetDir, manifests.PKIDir)
	cas, err := loadCAs(pkiDir)
	if err != nil {
		return nil, err
	}
	res := &RenewResult{}
	for _, name := range names {
		if !slices.Contains(RenewableCerts(), name) {
			return nil, fmt.Errorf("%s is not a leaf certificate render issues", name)
		}
		rc, err := renewPair(pkiDir, name, cas, now)
		if err != nil {
			return res, err
		}
		logf("[certs] renewed %s: serial %s -> %s, expires %s", name, rc.OldSerial, rc.NewSerial, rc.NotAfter.UTC().Format(time.RFC3339))
		res.Certs = append(res.Certs, *rc)
	}
	leaves, err := LeafPEMs(pkiDir)
	if err != nil {
		return res, err
	}
	confs, err := filepath.Glob(filepath.Join(assetDir, "*.conf"))
	if err != nil {
		return res, err
	}
	for _, f := range confs {
		data, err := os.ReadFile(f)
		if err != nil {
			return res, err
		}
		out, changed, err := SyncKubeconfig(data, leaves)
		if err != nil {
			return res, fmt.Errorf("%s: %w", f, err)
		}
		if changed {
			if err := manifests.WriteFile(f, out, 0o600); err != nil {
				return res, err
			}
			logf("[certs] updated kubeconfig %s", filepath.Base(f))
			res.Kubeconfigs = append(res.Kubeconfigs, filepath.Base(f))
		}
	}
	files, err := SecretFiles(assetDir)
	if err != nil {
		return res, err
	}
	rendered, err := filepath.Glob(filepath.Join(assetDir, manifests.SelfHostedDir, "*.yaml"))
	if err != nil {
		return res, err
	}
	for _, f := range rendered {
		changed, err := syncRenderedSecrets(f, files)
		if err != nil {
			return res, fmt.Errorf("%s: %w", f, err)
		}
		if changed {
			logf("[certs] updated the Secrets of %s", filepath.Join(manifests.SelfHostedDir, filepath.Base(f)))
			res.SecretFiles = append(res.SecretFiles, filepath.Join(manifests.SelfHostedDir, filepath.Base(f)))
		}
	}
	return res, nil
}

// caPair is a CA certificate and its key.
type caPair struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// loadCAs are render's CA key pairs under pkiDir; a CA without its key is
// left out (it signs nothing renewal could re-issue).
func loadCAs(pkiDir string) ([]*caPair, error) {
	var out []*caPair
	for _, b := range manifests.CABases() {
		certs, err := certutil.CertsFromFile(filepath.Join(pkiDir, b+".crt"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		key, err := readSigner(filepath.Join(pkiDir, b+".key"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, &caPair{Cert: certs[0], Key: key})
	}
	return out, nil
}

func readSigner(path string) (crypto.Signer, error) {
	k, err := keyutil.PrivateKeyFromFile(path)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%s: not a signing key", path)
	}
	return s, nil
}

// renewPair re-issues pki/NAME.crt for its own key with the CA that signed
// it, keeping the key: a reader of the pair (etcd reads its files at every
// handshake) never sees a certificate for another key than the one beside
// it, which two separate file replacements could not promise with a new
// key. kubeadm's renewal makes a new key; render keeps keys, and so does
// this.
func renewPair(pkiDir, name string, cas []*caPair, now time.Time) (*RenewedCert, error) {
	certPath, keyPath := filepath.Join(pkiDir, name+".crt"), filepath.Join(pkiDir, name+".key")
	certs, err := certutil.CertsFromFile(certPath)
	if err != nil {
		return nil, err
	}
	old := certs[0]
	key, err := readSigner(keyPath)
	if err != nil {
		return nil, err
	}
	var ca *caPair
	for _, c := range cas {
		if signedBy(old, c.Cert) {
			ca = c
			break
		}
	}
	if ca == nil {
		return nil, fmt.Errorf("%s: none of the CAs under %s (with their keys) signed it (issuer %q)", certPath, pkiDir, old.Issuer.CommonName)
	}
	cert, err := manifests.ReissueCert(name, old, key, ca.Cert, ca.Key, now)
	if err != nil {
		return nil, fmt.Errorf("renewing %s: %w", certPath, err)
	}
	if cert.NotAfter.After(ca.Cert.NotAfter) {
		// A certificate outliving its CA would be cut off with it anyway;
		// say so rather than hide it.
		return nil, fmt.Errorf("renewing %s: it would expire %s, after its CA %s (%s): rotate the CA first (docs/operations.md)",
			certPath, cert.NotAfter.UTC().Format(time.RFC3339), ca.Cert.Subject.CommonName, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	pemData, err := certutil.EncodeCertificates(cert)
	if err != nil {
		return nil, err
	}
	if err := manifests.WriteFile(certPath, pemData, 0o644); err != nil {
		return nil, err
	}
	return &RenewedCert{Name: name, OldSerial: old.SerialNumber, NewSerial: cert.SerialNumber, NotAfter: cert.NotAfter}, nil
}

// LeafPEM is a leaf certificate and its PEM, as SyncKubeconfig matches it.
type LeafPEM struct {
	Cert *x509.Certificate
	PEM  []byte
}

// LeafPEMs are the leaves under pkiDir (not the CAs).
func LeafPEMs(pkiDir string) ([]LeafPEM, error) {
	var out []LeafPEM
	for _, name := range RenewableCerts() {
		data, err := os.ReadFile(filepath.Join(pkiDir, name+".crt"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		certs, err := certutil.ParseCertsPEM(data)
		if err != nil {
			return nil, fmt.Errorf("%s.crt: %w", name, err)
		}
		out = append(out, LeafPEM{Cert: certs[0], PEM: data})
	}
	return out, nil
}

// SyncKubeconfig replaces each embedded client certificate of a
// kubeconfig by the leaf under pki/ for the same key and subject when their
// bytes differ; the key (and so client-key-data) is the same. Matching by
// key, not by file name, also covers a kubeconfig render did not name. It
// returns the kubeconfig unchanged (and false) when nothing differs. Pure.
func SyncKubeconfig(data []byte, leaves []LeafPEM) ([]byte, bool, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, false, err
	}
	changed := false
	for _, name := range sortedKeys(cfg.AuthInfos) {
		ai := cfg.AuthInfos[name]
		if len(ai.ClientCertificateData) == 0 {
			continue
		}
		certs, err := certutil.ParseCertsPEM(ai.ClientCertificateData)
		if err != nil {
			return nil, false, fmt.Errorf("user %s: %w", name, err)
		}
		for _, l := range leaves {
			if sameKeyAndSubject(certs[0], l.Cert) && !bytes.Equal(ai.ClientCertificateData, l.PEM) {
				ai.ClientCertificateData = slices.Clone(l.PEM)
				changed = true
				break
			}
		}
	}
	if !changed {
		return data, false, nil
	}
	out, err := clientcmd.Write(*cfg)
	return out, true, err
}

func sameKeyAndSubject(a, b *x509.Certificate) bool {
	return bytes.Equal(a.RawSubjectPublicKeyInfo, b.RawSubjectPublicKeyInfo) && bytes.Equal(a.RawSubject, b.RawSubject)
}

// SecretFiles are the credential files of the asset dir by the Secret key
// render gives them (manifests.SecretKey): every file under pki/ and every
// *.conf. These are what the self-hosted Secrets must hold.
func SecretFiles(assetDir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	add := func(rel string) error {
		data, err := os.ReadFile(filepath.Join(assetDir, rel))
		if err != nil {
			return err
		}
		if _, dup := out[manifests.SecretKey(rel)]; !dup {
			out[manifests.SecretKey(rel)] = data
		}
		return nil
	}
	err := filepath.WalkDir(filepath.Join(assetDir, manifests.PKIDir), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		rel, err := filepath.Rel(assetDir, path)
		if err != nil {
			return err
		}
		return add(filepath.ToSlash(rel))
	})
	if err != nil {
		return nil, err
	}
	confs, err := filepath.Glob(filepath.Join(assetDir, "*.conf"))
	if err != nil {
		return nil, err
	}
	for _, f := range confs {
		if err := add(filepath.Base(f)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// RenewSecretData is a Secret's new data: each key whose file in files
// (SecretFiles) holds other bytes gets the file's; keys without a file are
// kept. changed lists the keys replaced, sorted; none: data itself. Pure.
func RenewSecretData(data, files map[string][]byte) (out map[string][]byte, changed []string) {
	for _, k := range sortedKeys(data) {
		if f, ok := files[k]; ok && !bytes.Equal(f, data[k]) {
			changed = append(changed, k)
		}
	}
	if len(changed) == 0 {
		return data, nil
	}
	out = make(map[string][]byte, len(data))
	for k, v := range data {
		out[k] = v
	}
	for _, k := range changed {
		out[k] = slices.Clone(files[k])
	}
	return out, changed
}

// syncRenderedSecrets rewrites the kube-system Secrets of one
// self-hosted/*.yaml with RenewSecretData, keeping its other objects as
// they were; the file is marshalled as render writes it.
func syncRenderedSecrets(path string, files map[string][]byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	objs, err := manifests.DecodeObjects(f)
	f.Close()
	if err != nil {
		return false, err
	}
	changed := false
	for _, o := range objs {
		s, ok := o.(*v1.Secret)
		if !ok || s.Namespace != "kube-system" {
			continue
		}
		if data, keys := RenewSecretData(s.Data, files); len(keys) > 0 {
			s.Data, changed = data, true
		}
	}
	if !changed {
		return false, nil
	}
	out, err := manifests.MarshalObjects(objs)
	if err != nil {
		return false, err
	}
	return true, manifests.WriteFile(path, out, 0o600)
}
