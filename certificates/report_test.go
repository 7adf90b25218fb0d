package certificates

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"slices"
	"testing"
	"time"
)

var serial int64

// testCert makes a certificate valid until notAfter; ca nil makes a
// self-signed CA. ECDSA keys keep the test fast.
func testCert(t *testing.T, cn string, notAfter time.Time, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: notAfter.Add(-2 * 365 * 24 * time.Hour), NotAfter: notAfter, BasicConstraintsValid: true}
	parent, signer := tmpl, key
	if ca == nil {
		tmpl.IsCA, tmpl.KeyUsage = true, x509.KeyUsageCertSign
	} else {
		parent, signer = ca, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func TestCheckCertExpiration(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	ca, caKey := testCert(t, "kubernetes", now.Add(3650*day), nil, nil)
	extCA, extKey := testCert(t, "etcd-ca", now.Add(3650*day), nil, nil)
	apiserver, _ := testCert(t, "kube-apiserver", now.Add(365*day), ca, caKey)
	// The copy render replaced: same name, other bytes, and it expires
	// sooner.
	oldAPIServer, _ := testCert(t, "kube-apiserver", now.Add(10*day), ca, caKey)
	expired, _ := testCert(t, "kube-scheduler", now.Add(-time.Hour), ca, caKey)
	etcdPeer, _ := testCert(t, "node1", now.Add(29*day), extCA, extKey)
	orphan, _ := testCert(t, "somebody", now.Add(100*day), extCA, extKey)

	// Listed out of order on purpose: the report sorts.
	copies := []CertCopy{
		{Name: "kubeconfig/scheduler", Source: SourceKubeconfig, Where: "kubeconfig scheduler.conf", Cert: expired},
		{Name: "apiserver", Source: SourceCheckpoint, Where: "checkpoint secret kube-system/kube-apiserver apiserver.crt", Cert: oldAPIServer},
		{Name: "apiserver", Source: SourceAPISecret, Where: "secret kube-system/kube-apiserver apiserver.crt (apiserver)", Cert: apiserver},
		{Name: "apiserver", Source: SourceFile, Where: "file pki/apiserver.crt", Cert: apiserver},
		{Name: "ca", Source: SourceKubeconfig, Where: "kubeconfig admin.conf", Cert: ca},
		{Name: "ca", Source: SourceFile, Where: "file pki/ca.crt", Cert: ca},
		{Name: "etcd/peer", Source: SourceFile, Where: "file pki/etcd/peer.crt", Cert: etcdPeer},
		{Name: "etcd/ca", Source: SourceFile, Where: "file pki/etcd/ca.crt", Cert: extCA},
	}
	r := CheckCertExpiration(copies, []*x509.Certificate{ca}, now, 30*day)

	type row struct {
		name, where, authority  string
		expired, soon, external bool
		differs                 string
	}
	got := func(rows []CertRow) []row {
		var out []row
		for _, r := range rows {
			out = append(out, row{r.Name, r.Where, r.Authority, r.Expired, r.ExpiresSoon, r.ExternallyManaged, r.DiffersFrom})
		}
		return out
	}
	wantCerts := []row{
		// Sorted by name, then source: the file first, and the others
		// compared with it.
		{"apiserver", "file pki/apiserver.crt", "ca", false, false, false, ""},
		{"apiserver", "secret kube-system/kube-apiserver apiserver.crt (apiserver)", "ca", false, false, false, ""},
		{"apiserver", "checkpoint secret kube-system/kube-apiserver apiserver.crt", "ca", false, true, false, "file pki/apiserver.crt"},
		// Its CA's key is not bootlet's: externally managed, as kubeadm says.
		{"etcd/peer", "file pki/etcd/peer.crt", "etcd/ca", false, true, true, ""},
		{"kubeconfig/scheduler", "kubeconfig scheduler.conf", "ca", true, true, false, ""},
	}
	wantCAs := []row{
		{"ca", "file pki/ca.crt", "", false, false, false, ""},
		{"ca", "kubeconfig admin.conf", "", false, false, false, ""},
		{"etcd/ca", "file pki/etcd/ca.crt", "", false, false, true, ""},
	}
	if g := got(r.Certificates); !slices.Equal(g, wantCerts) {
		t.Errorf("certificates:\n got %v\nwant %v", g, wantCerts)
	}
	if g := got(r.CertificateAuthorities); !slices.Equal(g, wantCAs) {
		t.Errorf("CAs:\n got %v\nwant %v", g, wantCAs)
	}
	if r.Certificates[0].Expires != apiserver.NotAfter || r.Certificates[0].ResidualTimeSeconds != int64(365*day/time.Second) {
		t.Errorf("apiserver expires %s in %ds", r.Certificates[0].Expires, r.Certificates[0].ResidualTimeSeconds)
	}
	if r.Certificates[4].ResidualTimeSeconds != -3600 {
		t.Errorf("expired residual %d, want -3600 (kubeadm's printer shows <invalid>)", r.Certificates[4].ResidualTimeSeconds)
	}

	var soon []string
	for _, row := range r.ExpiringSoon() {
		soon = append(soon, row.Where)
	}
	if want := []string{"checkpoint secret kube-system/kube-apiserver apiserver.crt", "file pki/etcd/peer.crt", "kubeconfig scheduler.conf"}; !slices.Equal(soon, want) {
		t.Errorf("ExpiringSoon %v, want %v", soon, want)
	}
	if d := r.Differing(); len(d) != 1 || d[0].Source != "checkpoint" {
		t.Errorf("Differing %v, want the checkpoint's apiserver.crt", d)
	}

	// A leaf whose CA is in none of the copies names its issuer.
	r = CheckCertExpiration([]CertCopy{{Name: "x", Where: "file pki/x.crt", Cert: orphan}}, nil, now, 0)
	if row := r.Certificates[0]; row.Authority != "etcd-ca" || !row.ExternallyManaged || row.ExpiresSoon {
		t.Errorf("orphan: %+v", row)
	}
	// The threshold is strict: a certificate expiring exactly at
	// now+warnWithin is not within it.
	r = CheckCertExpiration([]CertCopy{{Name: "x", Where: "w", Cert: orphan}}, nil, now, 100*day)
	if r.Certificates[0].ExpiresSoon {
		t.Errorf("expiring at the threshold counted as within it")
	}
}
