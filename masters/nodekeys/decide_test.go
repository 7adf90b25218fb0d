package nodekeys

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
)

var (
	// t0 is after the test CAs' start (their NotBefore is when they
	// are made).
	t0   = time.Now().Add(time.Minute)
	addr = netip.MustParseAddr("10.0.0.21")
)

// testCA is a self-signed CA (client-go's, as render's) and its key.
func testCA(t *testing.T, cn string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: cn}, key)
	if err != nil {
		t.Fatal(err)
	}
	return ca, key
}

// leafOf is a member certificate of ca for cn at ips, valid from
// notBefore for life, for usages (both auths when none), of a new key.
func leafOf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, ips []netip.Addr, notBefore time.Time, life time.Duration, usages ...x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return leafFor(t, ca, caKey, key, cn, ips, notBefore, life, usages...)
}

// leafFor is leafOf for a given key.
func leafFor(t *testing.T, ca *x509.Certificate, caKey, key *ecdsa.PrivateKey, cn string, ips []netip.Addr, notBefore time.Time, life time.Duration, usages ...x509.ExtKeyUsage) *x509.Certificate {
	t.Helper()
	if usages == nil {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, NotBefore: notBefore, NotAfter: notBefore.Add(life),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages}
	for _, a := range ips {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IP(a.AsSlice()))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDecide(t *testing.T) {
	ca, caKey := testCA(t, "etcd-ca")
	other, otherKey := testCA(t, "another-ca")
	year := 365 * 24 * time.Hour
	good := leafOf(t, ca, caKey, "w1", []netip.Addr{addr}, t0.Add(-time.Hour), year)
	loopback := netip.MustParseAddr("127.0.0.1")
	cases := []struct {
		name string
		f    Facts
		ask  bool
		why  string
	}{
		{"not labelled, nothing on disk", Facts{Addresses: []netip.Addr{addr}}, false, "not labelled"},
		{"not labelled keeps a stale pair", Facts{Addresses: []netip.Addr{addr}, Pair: &Pair{Leaf: good, CA: other}}, false, "not labelled"},
		{"labelled without an address", Facts{Labelled: true}, false, "no IP address"},
		{"labelled, nothing on disk", Facts{Labelled: true, Addresses: []netip.Addr{addr}}, true, "no member certificate"},
		{"labelled, unreadable", Facts{Labelled: true, Addresses: []netip.Addr{addr}, PairError: "data does not contain any valid RSA or ECDSA certificates"}, true, "does not read"},
		{"labelled, good", Facts{Labelled: true, Addresses: []netip.Addr{addr}, Pair: &Pair{Leaf: good, CA: ca}}, false, "good until"},
		{"labelled, no CA beside it", Facts{Labelled: true, Addresses: []netip.Addr{addr}, Pair: &Pair{Leaf: good}}, true, "no CA"},
		{"labelled, another CA", Facts{Labelled: true, Addresses: []netip.Addr{addr}, Pair: &Pair{Leaf: good, CA: other}}, true, "does not verify"},
		{"labelled, another node's", Facts{Labelled: true, Addresses: []netip.Addr{addr},
			Pair: &Pair{Leaf: leafOf(t, ca, caKey, "w2", []netip.Addr{addr}, t0.Add(-time.Hour), year), CA: ca}}, true, `"w2"'s`},
		{"labelled, the Node's address changed", Facts{Labelled: true, Addresses: []netip.Addr{netip.MustParseAddr("10.0.0.22")}, Pair: &Pair{Leaf: good, CA: ca}}, true, "10.0.0.22"},
		{"labelled, a second address", Facts{Labelled: true, Addresses: []netip.Addr{addr, loopback}, Pair: &Pair{Leaf: good, CA: ca}}, true, "127.0.0.1"},
		{"labelled, server auth only", Facts{Labelled: true, Addresses: []netip.Addr{addr},
			Pair: &Pair{Leaf: leafOf(t, ca, caKey, "w1", []netip.Addr{addr}, t0.Add(-time.Hour), year, x509.ExtKeyUsageServerAuth), CA: ca}}, true, "both server and client"},
		{"labelled, at 79% of its life", Facts{Labelled: true, Addresses: []netip.Addr{addr},
			Pair: &Pair{Leaf: leafOf(t, ca, caKey, "w1", []netip.Addr{addr}, t0.Add(-79*time.Hour), 100*time.Hour), CA: ca}}, false, "good until"},
		{"labelled, at 80% of its life", Facts{Labelled: true, Addresses: []netip.Addr{addr},
			Pair: &Pair{Leaf: leafOf(t, ca, caKey, "w1", []netip.Addr{addr}, t0.Add(-80*time.Hour), 100*time.Hour), CA: ca}}, true, "expires at"},
		{"labelled, expired", Facts{Labelled: true, Addresses: []netip.Addr{addr},
			Pair: &Pair{Leaf: leafOf(t, ca, caKey, "w1", []netip.Addr{addr}, t0.Add(-2*time.Hour), time.Hour), CA: ca}}, true, "does not verify"},
		{"a CA that signed nothing of it", Facts{Labelled: true, Addresses: []netip.Addr{addr},
			Pair: &Pair{Leaf: leafOf(t, other, otherKey, "w1", []netip.Addr{addr}, t0.Add(-time.Hour), year), CA: ca}}, true, "does not verify"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.Node, tc.f.Now = "w1", t0
			d := Decide(tc.f)
			if d.Ask != tc.ask || !strings.Contains(d.Why, tc.why) {
				t.Errorf("Decide = %+v, want ask %v and a reason with %q", d, tc.ask, tc.why)
			}
		})
	}
}

func TestDecideIdentity(t *testing.T) {
	ca, caKey := testCA(t, "kubernetes")
	const cn = "system:bootlet-checkpointer"
	client := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	good := leafOf(t, ca, caKey, cn, nil, t0, IdentityLife, client...)
	withOrg := leafOf(t, ca, caKey, cn, nil, t0, IdentityLife, client...)
	withOrg.Subject.Organization = []string{"system:masters"}
	cases := []struct {
		name string
		f    IdentityFacts
		ask  bool
		why  string
	}{
		{"unlabelled, none", IdentityFacts{Now: t0}, false, "not labelled"},
		{"unlabelled, one kept", IdentityFacts{Cert: good, Now: t0}, false, "not labelled"},
		{"labelled, none", IdentityFacts{Labelled: true, Now: t0}, true, "no checkpointer identity"},
		{"labelled, unreadable", IdentityFacts{Labelled: true, ReadError: "bad PEM", Now: t0}, true, "bad PEM"},
		{"labelled, good", IdentityFacts{Labelled: true, Cert: good, Now: t0.Add(time.Hour)}, false, "good until"},
		{"labelled, past 80% of its life", IdentityFacts{Labelled: true, Cert: good, Now: t0.Add(IdentityLife * 81 / 100)}, true, "renewed from"},
		{"labelled, expired", IdentityFacts{Labelled: true, Cert: good, Now: t0.Add(IdentityLife + time.Hour)}, true, "valid from"},
		{"labelled, not yet valid", IdentityFacts{Labelled: true, Cert: good, Now: t0.Add(-time.Hour)}, true, "valid from"},
		{"labelled, another name", IdentityFacts{Labelled: true, Cert: leafOf(t, ca, caKey, "w1", nil, t0, IdentityLife, client...), Now: t0}, true, "not system:bootlet-checkpointer's"},
		{"labelled, with a group", IdentityFacts{Labelled: true, Cert: withOrg, Now: t0}, true, "not system:bootlet-checkpointer's"},
		{"labelled, server auth only", IdentityFacts{Labelled: true, Cert: leafOf(t, ca, caKey, cn, nil, t0, IdentityLife, x509.ExtKeyUsageServerAuth), Now: t0}, true, "client auth"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideIdentity(tc.f)
			if d.Ask != tc.ask || !strings.Contains(d.Why, tc.why) {
				t.Fatalf("DecideIdentity = %+v; want ask %v, why with %q", d, tc.ask, tc.why)
			}
		})
	}
}
