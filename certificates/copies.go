package certificates

import (
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"

	"github.com/bootlet/bootlet/manifests"
)

// Readers of the certificates render writes, for `bootlet certs
// check-expiration`. They return problems (a file that does not parse, an
// expected one missing) rather than stop at the first, so that one bad copy
// does not hide when the others expire.

// PKIFileCopies reads ASSETS/pki/**/*.crt. managedCAs are the CA
// certificates whose key lies next to them. A certificate render issues that
// is not there is a problem.
func PKIFileCopies(assetDir string) (copies []CertCopy, managedCAs []*x509.Certificate, problems []string, err error) {
	dir := filepath.Join(assetDir, manifests.PKIDir)
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, nil, fmt.Errorf("the asset dir's PKI: %w", err)
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".crt") {
			return nil
		}
		rel, _ := filepath.Rel(assetDir, path)
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.ToSlash(rel), manifests.PKIDir+"/"), ".crt")
		if name == manifests.CASigning {
			// A copy of ca's signing certificate, not a CA of its own.
			name = manifests.CA
		} else {
			seen[name] = true
		}
		certs, err := certutil.CertsFromFile(path)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", rel, err))
			return nil
		}
		// A bundle's first certificate is the one its key belongs to, as
		// kubeadm reads it.
		c := certs[0]
		copies = append(copies, CertCopy{Name: name, Source: SourceFile, Where: "file " + filepath.ToSlash(rel), Cert: c})
		if c.IsCA {
			if _, err := os.Stat(strings.TrimSuffix(path, ".crt") + ".key"); err == nil {
				managedCAs = append(managedCAs, c)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	for _, base := range manifests.CertBases() {
		if !seen[base] {
			problems = append(problems, fmt.Sprintf("%s/%s.crt is missing (render issues it)", manifests.PKIDir, base))
		}
	}
	return copies, managedCAs, problems, nil
}

// KubeconfigCopies reads the client certificates and CAs embedded in
// ASSETS/*.conf.
func KubeconfigCopies(assetDir string) (copies []CertCopy, problems []string, err error) {
	files, err := filepath.Glob(filepath.Join(assetDir, "*.conf"))
	if err != nil {
		return nil, nil, err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		base := filepath.Base(f)
		cs, err := kubeconfigCertCopies(data, base, SourceKubeconfig, "kubeconfig "+base)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", base, err))
		}
		copies = append(copies, cs...)
	}
	return copies, problems, nil
}

// kubeconfigCertCopies are the client certificates and CA data embedded in
// a kubeconfig named file. A kubeconfig render writes is named after its
// key pair, so its copies line up with pki/'s; another one's are named after
// the file.
func kubeconfigCertCopies(data []byte, file string, src CertSource, where string) ([]CertCopy, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, err
	}
	clientName, caName := file, file+"/ca"
	if file == manifests.BootstrapKubeletKubeconfig {
		// A worker's bootstrap kubeconfig: ca.crt and a token, no
		// certificate of its own.
		caName = manifests.CA
	}
	if pair, ok := manifests.KubeconfigPair(file); ok {
		clientName, caName = pair, manifests.CA
	}
	var out []CertCopy
	var errs []error
	add := func(name, where string, pemData []byte) {
		certs, err := certutil.ParseCertsPEM(pemData)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			return
		}
		out = append(out, CertCopy{Name: name, Source: src, Where: where, Cert: certs[0]})
	}
	// Only when a kubeconfig has several users or clusters does WHERE need
	// to say which; render's have one of each.
	suffix := func(kind, n string, total int) string {
		if total > 1 {
			return fmt.Sprintf(" (%s %s)", kind, n)
		}
		return ""
	}
	for _, n := range sortedKeys(cfg.AuthInfos) {
		if d := cfg.AuthInfos[n].ClientCertificateData; len(d) > 0 {
			add(clientName, where+suffix("user", n, len(cfg.AuthInfos)), d)
		}
	}
	for _, n := range sortedKeys(cfg.Clusters) {
		if d := cfg.Clusters[n].CertificateAuthorityData; len(d) > 0 {
			add(caName, where+suffix("cluster", n, len(cfg.Clusters)), d)
		}
	}
	return out, errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SecretCertCopies are the certificates in a Secret's data: KEY.crt, and
// the kubeconfigs (KEY.conf). Keys are render's (manifests.SecretKey), so
// they map back to the names under pki/. where says where the Secret was
// read, given the data key.
func SecretCertCopies(s *v1.Secret, src CertSource, where func(key string) string) ([]CertCopy, error) {
	byKey := map[string]string{}
	for _, base := range manifests.CertBases() {
		byKey[manifests.SecretKey(manifests.PKIDir+"/"+base+".crt")] = base
	}
	byKey[manifests.SecretKey(manifests.PKIDir+"/"+manifests.CASigning+".crt")] = manifests.CA
	var out []CertCopy
	var errs []error
	for _, key := range sortedKeys(s.Data) {
		switch {
		case strings.HasSuffix(key, ".crt"):
			certs, err := certutil.ParseCertsPEM(s.Data[key])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where(key), err))
				continue
			}
			name, ok := byKey[key]
			if !ok {
				name = strings.TrimSuffix(key, ".crt")
			}
			out = append(out, CertCopy{Name: name, Source: src, Where: where(key), Cert: certs[0]})
		case strings.HasSuffix(key, ".conf"):
			cs, err := kubeconfigCertCopies(s.Data[key], key, src, where(key))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where(key), err))
			}
			out = append(out, cs...)
		}
	}
	return out, errors.Join(errs...)
}

// RenderedSecret is a Secret of self-hosted/ and its file there.
type RenderedSecret struct {
	File   string // relative to the asset dir
	Secret *v1.Secret
}

// RenderedSecrets are the kube-system Secrets in ASSETS/self-hosted/*.yaml:
// the ones the self-hosted control plane mounts, and so the ones the
// apiserver and the checkpoints hold copies of.
func RenderedSecrets(assetDir string) ([]RenderedSecret, error) {
	files, err := filepath.Glob(filepath.Join(assetDir, manifests.SelfHostedDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []RenderedSecret
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		objs, err := manifests.DecodeObjects(r)
		r.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, o := range objs {
			// The bootstrap token's Secret holds no file of the asset dir.
			if s, ok := o.(*v1.Secret); ok && s.Namespace == metav1.NamespaceSystem && s.Type != bootstrapapi.SecretTypeBootstrapToken {
				out = append(out, RenderedSecret{File: filepath.Join(manifests.SelfHostedDir, filepath.Base(f)), Secret: s})
			}
		}
	}
	return out, nil
}
