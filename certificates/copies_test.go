package certificates

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/bootlet/bootlet/manifests"
)

// TestAssetCertCopies reads a rendered asset dir: every certificate render
// issues is found under the name of its pki/ file, in the files, the
// kubeconfigs and the Secrets, and every copy is the file's.
func TestAssetCertCopies(t *testing.T) {
	dir := rendered(t)
	files, managed, problems, err := PKIFileCopies(dir)
	if err != nil || len(problems) > 0 {
		t.Fatalf("PKIFileCopies: %v %v", err, problems)
	}
	// ca-signing.crt is a second copy of ca, not a certificate of its own.
	if len(files) != len(manifests.CertBases())+1 || len(managed) != 4 {
		t.Errorf("%d files, %d managed CAs; want %d and 4", len(files), len(managed), len(manifests.CertBases())+1)
	}
	signingAsCA := func(c CertCopy) bool {
		return c.Name == manifests.CA && c.Where == "file pki/"+manifests.CASigning+".crt"
	}
	if !slices.ContainsFunc(files, signingAsCA) || slices.ContainsFunc(files, func(c CertCopy) bool { return c.Name == manifests.CASigning }) {
		t.Errorf("ca-signing.crt is not listed as a copy of ca: %v", files)
	}
	kcs, problems, err := KubeconfigCopies(dir)
	if err != nil || len(problems) > 0 {
		t.Fatalf("KubeconfigCopies: %v %v", err, problems)
	}
	// bootstrap-kubelet.conf holds the CA only.
	if n := len(clientKubeconfigs(t, dir)); len(kcs) != 2*n+1 {
		t.Errorf("%d kubeconfig copies, want a client certificate and a CA for each of %d, and the CA of %s", len(kcs), n, manifests.BootstrapKubeletKubeconfig)
	}
	secrets, err := RenderedSecrets(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var scs []CertCopy
	for _, s := range secrets {
		names = append(names, s.Secret.Name)
		cs, err := SecretCertCopies(s.Secret, SourceRenderedSecret, func(key string) string { return s.File + " " + key })
		if err != nil {
			t.Fatal(err)
		}
		scs = append(scs, cs...)
	}
	if !slices.Equal(names, manifests.SelfHostedSecretNames) {
		t.Errorf("rendered Secrets %v, want %v", names, manifests.SelfHostedSecretNames)
	}
	byName := map[string][]byte{}
	for _, c := range files {
		byName[c.Name] = c.Cert.Raw
	}
	for _, c := range slices.Concat(kcs, scs) {
		if raw, ok := byName[c.Name]; !ok || !slices.Equal(raw, c.Cert.Raw) {
			t.Errorf("%s (%s) is not the file pki/%s.crt", c.Where, c.Name, c.Name)
		}
	}
	for _, want := range []string{"etcd/ca", "apiserver-etcd-client", "kubeconfig/scheduler", "kubeconfig/controller-manager"} {
		if !slices.ContainsFunc(scs, func(c CertCopy) bool { return c.Name == want }) {
			t.Errorf("no Secret copy named %s", want)
		}
	}
	r := CheckCertExpiration(slices.Concat(files, kcs, scs), managed, time.Now(), 0)
	if d := r.Differing(); len(d) > 0 {
		t.Errorf("a fresh render has differing copies: %+v", d)
	}
}

func TestPKIFileCopiesProblems(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, manifests.PKIDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, manifests.PKIDir, "apiserver.crt"), []byte("not PEM"), 0o644); err != nil {
		t.Fatal(err)
	}
	copies, _, problems, err := PKIFileCopies(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The bad file, and the other certificates render issues, missing.
	if len(copies) != 0 || len(problems) != len(manifests.CertBases()) || !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, "pki/apiserver.crt:") }) {
		t.Errorf("copies %v, problems %q", copies, problems)
	}
	if _, _, _, err := PKIFileCopies(filepath.Join(dir, "nowhere")); err == nil {
		t.Error("no error for an asset dir without pki/")
	}
}

func TestSecretCertCopiesSkipsKeys(t *testing.T) {
	s := &v1.Secret{Data: map[string][]byte{"sa.key": []byte("x"), "sa.pub": []byte("x"), "apiserver.key": []byte("x")}}
	if cs, err := SecretCertCopies(s, SourceAPISecret, func(k string) string { return k }); err != nil || len(cs) != 0 {
		t.Errorf("keys read as certificates: %v %v", cs, err)
	}
	s.Data["apiserver.crt"] = []byte("garbage")
	if _, err := SecretCertCopies(s, SourceAPISecret, func(k string) string { return "secret x " + k }); err == nil {
		t.Error("no error for a certificate that does not parse")
	}
}
