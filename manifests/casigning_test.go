package manifests

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	certutil "k8s.io/client-go/util/cert"
)

// TestCASigningDuringRotation: with ca.crt a bundle (a CA rotation's
// phases), render keeps the bundle in ca.crt and the Secrets but writes
// ca-signing.crt as the first certificate alone, the one ca.key belongs to,
// and the controller-manager's Secret carries it; a leaf the first
// certificate did not sign is re-issued by it.
func TestCASigningDuringRotation(t *testing.T) {
	other := t.TempDir()
	if err := Render(testConfig(), other); err != nil {
		t.Fatal(err)
	}
	newCA, err := os.ReadFile(filepath.Join(other, PKIDir, CA+".crt"))
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := os.ReadFile(filepath.Join(other, PKIDir, CA+".key"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyTree(t, rendered(t), dir)
	oldCA, err := os.ReadFile(filepath.Join(dir, PKIDir, CA+".crt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		phase     string
		bundle    []byte
		key       []byte // nil: keep
		wantFirst []byte
	}{
		{"A, trust both, the old CA signs", append(append([]byte{}, oldCA...), newCA...), nil, oldCA},
		{"B, the new CA signs", append(append([]byte{}, newCA...), oldCA...), newKey, newCA},
		{"C, the old CA dropped", newCA, nil, newCA},
	} {
		if err := os.WriteFile(filepath.Join(dir, PKIDir, CA+".crt"), tc.bundle, 0o644); err != nil {
			t.Fatal(err)
		}
		if tc.key != nil {
			if err := os.WriteFile(filepath.Join(dir, PKIDir, CA+".key"), tc.key, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := Render(testConfig(), dir); err != nil {
			t.Fatalf("phase %s: %v", tc.phase, err)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, PKIDir, CA+".crt")); !bytes.Equal(got, tc.bundle) {
			t.Errorf("phase %s: render rewrote the bundle in ca.crt", tc.phase)
		}
		signing, err := os.ReadFile(filepath.Join(dir, PKIDir, CASigning+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(signing, tc.wantFirst) {
			t.Errorf("phase %s: ca-signing.crt is not the bundle's first certificate alone:\n%s", tc.phase, signing)
		}
		certs, err := certutil.ParseCertsPEM(signing)
		if err != nil || len(certs) != 1 {
			t.Fatalf("phase %s: ca-signing.crt: %d certificates, %v", tc.phase, len(certs), err)
		}
		ca := certs[0]
		for _, base := range []string{APIServer, ControllerMgrClient, AdminClient, KubeletClient} {
			if err := verifiesAgainstAny(readCert(t, dir, base), ca); err != nil {
				t.Errorf("phase %s: %s is not signed by the signing CA: %v", tc.phase, base, err)
			}
		}
		secrets := selfHostedSecrets(t, dir)
		found := false
		for _, s := range secrets {
			if s.Name == KubeControllerManager {
				found = bytes.Equal(s.Data[CASigning+".crt"], tc.wantFirst) && bytes.Equal(s.Data[CA+".crt"], tc.bundle)
			}
		}
		if !found {
			t.Errorf("phase %s: the controller-manager's Secret does not hold ca-signing.crt and the bundle", tc.phase)
		}
	}
}

// verifiesAgainstAny verifies cert against ca alone, for any usage.
func verifiesAgainstAny(cert, ca *x509.Certificate) error {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}
