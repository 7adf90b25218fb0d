package manifests

import (
	"crypto"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/util/keyutil"
)

func TestCertBases(t *testing.T) {
	specs, err := certSpecs(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	var bases, cas []string
	for _, s := range specs {
		bases = append(bases, s.Base)
		if s.CA == "" {
			cas = append(cas, s.Base)
		}
	}
	slices.Sort(bases)
	slices.Sort(cas)
	if want := slices.Sorted(slices.Values(CertBases())); !slices.Equal(bases, want) {
		t.Errorf("CertBases %v, certSpecs %v: keep them the same", want, bases)
	}
	if want := slices.Sorted(slices.Values(CABases())); !slices.Equal(cas, want) {
		t.Errorf("CABases %v, certSpecs' CAs %v: keep them the same", want, cas)
	}
}

// TestReissueCertKeptByRender: every leaf render issues, re-issued, is one
// render keeps, so a re-render after a renewal undoes nothing.
func TestReissueCertKeptByRender(t *testing.T) {
	dir := filepath.Join(rendered(t), PKIDir)
	specs, err := certSpecs(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	signer := func(base string) crypto.Signer {
		t.Helper()
		k, err := keyutil.PrivateKeyFromFile(filepath.Join(dir, base+".key"))
		if err != nil {
			t.Fatal(err)
		}
		return k.(crypto.Signer)
	}
	now := time.Now().Add(time.Hour)
	for _, s := range specs {
		if s.CA == "" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, s.Base+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		caData, err := os.ReadFile(filepath.Join(dir, s.CA+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		old, ca, key := parseCert(t, data), parseCert(t, caData), signer(s.Base)
		renewed, err := ReissueCert(s.Base, old, key, ca, signer(s.CA), now)
		if err != nil {
			t.Fatalf("%s: %v", s.Base, err)
		}
		if why := certMismatch(renewed, key, s, ca, now); why != "" {
			t.Errorf("%s: render would re-issue the renewed certificate: it %s", s.Base, why)
		}
		if renewed.SerialNumber.Cmp(old.SerialNumber) == 0 || !renewed.NotAfter.After(old.NotAfter) {
			t.Errorf("%s: serial %s -> %s, NotAfter %s -> %s", s.Base, old.SerialNumber, renewed.SerialNumber, old.NotAfter, renewed.NotAfter)
		}
	}
}
