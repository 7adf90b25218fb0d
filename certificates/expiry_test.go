package certificates

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestPrintCertReportAndError(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	r := CertReport{Now: now, WarnWithin: 30 * 24 * time.Hour,
		Certificates: []CertRow{
			{Name: "apiserver", Where: "file pki/apiserver.crt", Authority: "ca", Expires: now.Add(-2 * time.Hour), ResidualTimeSeconds: -7200, Expired: true, ExpiresSoon: true},
			{Name: "apiserver", Where: "checkpoint secret kube-system/kube-apiserver apiserver.crt", Authority: "ca", Expires: now.Add(-3 * time.Hour), ResidualTimeSeconds: -10800, Expired: true, ExpiresSoon: true, DiffersFrom: "file pki/apiserver.crt"},
			{Name: "etcd/peer", Where: "file pki/etcd/peer.crt", Authority: "etcd/ca", Expires: now.Add(400 * 24 * time.Hour), ResidualTimeSeconds: 400 * 86400},
		},
		CertificateAuthorities: []CertRow{
			{Name: "ca", Where: "file pki/ca.crt", IsCA: true, Expires: now.Add(10 * 24 * time.Hour), ResidualTimeSeconds: 10 * 86400, ExpiresSoon: true, ExternallyManaged: true},
		},
	}
	var out bytes.Buffer
	if err := printCertReport(&out, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"CERTIFICATE   WHERE", "CERTIFICATE AUTHORITY   WHERE",
		"Jun 01, 2026 10:00 UTC", "<invalid>", "EXPIRED; differs from file pki/apiserver.crt",
		"400d", "expires within 30d", "yes",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}

	err := expirationError(r, []string{"pki/x.crt: bad"})
	want := "2 certificates expired or expiring within 30d: ca (expires Jun 11, 2026 12:00 UTC, 1 copy), " +
		"apiserver (EXPIRED Jun 01, 2026 09:00 UTC, 2 copies); and 1 certificate could not be checked: pki/x.crt: bad"
	if err == nil || err.Error() != want {
		t.Errorf("error\n got %v\nwant %s", err, want)
	}
	r.Certificates, r.CertificateAuthorities = r.Certificates[2:], nil
	if err := expirationError(r, nil); err != nil {
		t.Errorf("nothing expiring: %v", err)
	}
}
