package certificates

import (
	"bytes"
	"cmp"
	"crypto/x509"
	"slices"
	"time"
)

// CertSource is the kind of place a copy of a certificate lives in. Its
// order is the order a certificate's copies are listed in, and the first
// copy is the one the others are compared with: render writes pki/ first and
// builds everything else from it, so a copy that differs from the file is
// the one left behind.
type CertSource int

// The sources, in listing order.
const (
	SourceFile           CertSource = iota // ASSETS/pki/**/*.crt
	SourceKubeconfig                       // ASSETS/*.conf
	SourceRenderedSecret                   // a Secret in ASSETS/self-hosted/*.yaml
	SourceAPISecret                        // a Secret read from the apiserver
	SourceMirror                           // a Secret's mirror on this master's disk (package credmirror)
	SourceCheckpoint                       // a Secret in the daemon's checkpoint store
	SourceBootlet                          // the daemon's own serving certificate and CA
)

var sourceNames = [...]string{"file", "kubeconfig", "rendered-secret", "apiserver-secret", "mirror", "checkpoint", "bootlet"}

func (s CertSource) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "unknown"
}

// CertCopy is one copy of a certificate, as a collector found it. Name is
// the certificate's identity across copies (the base name under pki/, such
// as "apiserver" or "kubeconfig/admin"): copies with the same Name are
// expected to be byte for byte the same.
type CertCopy struct {
	Name   string
	Source CertSource
	Where  string
	Cert   *x509.Certificate
}

// CertRow is one copy in the report.
type CertRow struct {
	Name   string `json:"name"`
	Where  string `json:"where"`
	Source string `json:"source"`
	// Subject and Authority are there because Name alone does not say
	// which CA a copy really chains to once copies disagree.
	Subject string `json:"subject"`
	// Authority is the Name of the CA among the copies that signed this
	// one, or the issuer's common name if none did; "" for a self-signed
	// CA.
	Authority           string    `json:"certificateAuthority,omitempty"`
	IsCA                bool      `json:"isCA"`
	Expires             time.Time `json:"expires"`
	ResidualTimeSeconds int64     `json:"residualTimeSeconds"`
	// ExternallyManaged is kubeadm's: bootlet does not hold the key of the
	// CA (for a CA, its own key), so `bootlet render` cannot re-issue it.
	ExternallyManaged bool `json:"externallyManaged"`
	Expired           bool `json:"expired"`
	// ExpiresSoon: expired, or expiring within the report's WarnWithin.
	ExpiresSoon bool `json:"expiresSoon"`
	// DiffersFrom is the Where of the first copy of the same Name when this
	// copy's bytes are not that copy's: a stale (or newer) copy.
	DiffersFrom string `json:"differsFrom,omitempty"`
}

// CertReport is kubeadm's check-expiration, one row per copy.
type CertReport struct {
	Now        time.Time     `json:"now"`
	WarnWithin time.Duration `json:"-"`
	// WarnWithinSeconds is WarnWithin for JSON readers, in kubeadm's unit.
	WarnWithinSeconds      int64     `json:"warnWithinSeconds"`
	Certificates           []CertRow `json:"certificates"`
	CertificateAuthorities []CertRow `json:"certificateAuthorities"`
}

// CheckCertExpiration builds the report of copies at now. managedCAs are the
// CA certificates whose keys bootlet holds; anything else is externally
// managed. Pure: collectors do the reading.
func CheckCertExpiration(copies []CertCopy, managedCAs []*x509.Certificate, now time.Time, warnWithin time.Duration) CertReport {
	sorted := slices.Clone(copies)
	slices.SortStableFunc(sorted, func(a, b CertCopy) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Source, b.Source), cmp.Compare(a.Where, b.Where))
	})
	// One CA certificate per name suffices to find who signed a copy: the
	// copies of a CA share its subject and key even when they differ.
	var cas []CertCopy
	for _, c := range sorted {
		if c.Cert.IsCA && !slices.ContainsFunc(cas, func(o CertCopy) bool { return o.Name == c.Name }) {
			cas = append(cas, c)
		}
	}
	managed := func(ca *x509.Certificate) bool {
		return slices.ContainsFunc(managedCAs, func(m *x509.Certificate) bool { return sameCA(m, ca) })
	}

	r := CertReport{Now: now, WarnWithin: warnWithin, WarnWithinSeconds: int64(warnWithin / time.Second)}
	first := map[string]CertCopy{}
	for _, c := range sorted {
		row := CertRow{
			Name: c.Name, Where: c.Where, Source: c.Source.String(),
			Subject: c.Cert.Subject.String(), IsCA: c.Cert.IsCA,
			Expires:             c.Cert.NotAfter.UTC(),
			ResidualTimeSeconds: int64(c.Cert.NotAfter.Sub(now) / time.Second),
			Expired:             !now.Before(c.Cert.NotAfter),
			ExpiresSoon:         c.Cert.NotAfter.Before(now.Add(warnWithin)),
		}
		if ref, ok := first[c.Name]; !ok {
			first[c.Name] = c
		} else if !bytes.Equal(ref.Cert.Raw, c.Cert.Raw) {
			row.DiffersFrom = ref.Where
		}
		selfSigned := bytes.Equal(c.Cert.RawIssuer, c.Cert.RawSubject) && c.Cert.CheckSignatureFrom(c.Cert) == nil
		if c.Cert.IsCA && selfSigned {
			row.ExternallyManaged = !managed(c.Cert)
		} else {
			row.Authority = c.Cert.Issuer.CommonName
			row.ExternallyManaged = true
			for _, ca := range cas {
				if signedBy(c.Cert, ca.Cert) {
					row.Authority = ca.Name
					row.ExternallyManaged = !managed(ca.Cert)
					break
				}
			}
		}
		if row.IsCA {
			r.CertificateAuthorities = append(r.CertificateAuthorities, row)
		} else {
			r.Certificates = append(r.Certificates, row)
		}
	}
	return r
}

// sameCA: a CA re-issued by render keeps its key and subject, so what it
// signed still verifies; it is the same CA for this report.
func sameCA(a, b *x509.Certificate) bool {
	return bytes.Equal(a.RawSubject, b.RawSubject) && bytes.Equal(a.RawSubjectPublicKeyInfo, b.RawSubjectPublicKeyInfo)
}

func signedBy(cert, ca *x509.Certificate) bool {
	return bytes.Equal(cert.RawIssuer, ca.RawSubject) && cert.CheckSignatureFrom(ca) == nil
}

// ExpiringSoon are the rows, CAs first, that have expired or expire within
// the report's WarnWithin.
func (r CertReport) ExpiringSoon() []CertRow {
	var out []CertRow
	for _, row := range slices.Concat(r.CertificateAuthorities, r.Certificates) {
		if row.ExpiresSoon {
			out = append(out, row)
		}
	}
	return out
}

// Differing are the rows, CAs first, whose bytes are not their first
// copy's.
func (r CertReport) Differing() []CertRow {
	var out []CertRow
	for _, row := range slices.Concat(r.CertificateAuthorities, r.Certificates) {
		if row.DiffersFrom != "" {
			out = append(out, row)
		}
	}
	return out
}
