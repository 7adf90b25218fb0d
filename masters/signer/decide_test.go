package signer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
)

var w1Addr = netip.MustParseAddr("10.0.0.21")

// signed is tmpl made into a request and parsed back, as RequestOf would.
func signed(t *testing.T, tmpl *x509.CertificateRequest) *x509.CertificateRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		t.Fatal(err)
	}
	return csr
}

func TestDecide(t *testing.T) {
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth}
	good := func() Request {
		return Request{Username: "system:node:w1", Groups: []string{"system:nodes", "system:authenticated"}, Usages: usages, CSR: signed(t, Template("w1", []netip.Addr{w1Addr}))}
	}
	with := func(f func(*Request)) Request { r := good(); f(&r); return r }
	withCSR := func(f func(*x509.CertificateRequest)) Request {
		tmpl := Template("w1", []netip.Addr{w1Addr})
		f(tmpl)
		r := good()
		r.CSR = signed(t, tmpl)
		return r
	}
	labelled := NodeFacts{Found: true, Labelled: true, Addresses: []netip.Addr{w1Addr}}
	unlabelled := NodeFacts{Found: true, Addresses: []netip.Addr{w1Addr}}
	cases := []struct {
		name   string
		r      Request
		node   NodeFacts
		want   VerdictKind
		reason string
	}{
		{"a labelled node's own request, as Template makes it", good(), labelled, Issue, "EtcdMemberOfMaster"},
		{"without the two optional usages", with(func(r *Request) { r.Usages = usages[2:] }), labelled, Issue, "EtcdMemberOfMaster"},
		{"a worker: its Node is not labelled", good(), unlabelled, Deny, "NotAMaster"},
		{"a Node not registered yet waits", good(), NodeFacts{}, Wait, "NodeNotFound"},
		{"a bootstrap token", with(func(r *Request) { r.Username, r.Groups = "system:bootstrap:abcdef", []string{"system:bootstrappers"} }), labelled, Deny, "NotANode"},
		{"a node name outside system:nodes", with(func(r *Request) { r.Groups = []string{"system:authenticated"} }), labelled, Deny, "NotANode"},
		{"an administrator", with(func(r *Request) { r.Username, r.Groups = "kubernetes-admin", []string{"system:masters"} }), labelled, Deny, "NotANode"},
		{"for another node's name", withCSR(func(c *x509.CertificateRequest) { c.Subject.CommonName = "m1" }), labelled, Deny, "Subject"},
		{"with an organization (a group)", withCSR(func(c *x509.CertificateRequest) { c.Subject.Organization = []string{"system:masters"} }), labelled, Deny, "Subject"},
		{"another DNS name", withCSR(func(c *x509.CertificateRequest) { c.DNSNames = append(c.DNSNames, "kubernetes") }), labelled, Deny, "SubjectAltNames"},
		{"another node's address", withCSR(func(c *x509.CertificateRequest) { c.IPAddresses = append(c.IPAddresses, net.ParseIP("10.0.0.11")) }), labelled, Deny, "SubjectAltNames"},
		{"loopbacks alone", withCSR(func(c *x509.CertificateRequest) { c.IPAddresses = loopbacks }), labelled, Deny, "SubjectAltNames"},
		{"loopbacks alone, from a Node that reports a loopback", withCSR(func(c *x509.CertificateRequest) { c.IPAddresses = loopbacks }),
			NodeFacts{Found: true, Labelled: true, Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}, Issue, "EtcdMemberOfMaster"},
		{"a URI", withCSR(func(c *x509.CertificateRequest) {
			c.URIs = []*url.URL{{Scheme: "spiffe", Host: "cluster", Path: "/w1"}}
		}), labelled, Deny, "SubjectAltNames"},
		{"an e-mail address", withCSR(func(c *x509.CertificateRequest) { c.EmailAddresses = []string{"root@w1"} }), labelled, Deny, "SubjectAltNames"},
		{"code signing", with(func(r *Request) { r.Usages = append(r.Usages, certificatesv1.UsageCodeSigning) }), labelled, Deny, "Usages"},
		{"client auth alone", with(func(r *Request) { r.Usages = []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth} }), labelled, Deny, "Usages"},
		{"a request that does not parse", with(func(r *Request) { r.CSR, r.ParseError = nil, "no PEM" }), labelled, Deny, "Malformed"},
		{"malformed from a Node that is gone: denied, not kept", with(func(r *Request) { r.CSR, r.ParseError = nil, "no PEM" }), NodeFacts{}, Deny, "Malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(tc.r, func(name string) NodeFacts {
				if name != "w1" {
					t.Fatalf("read node %q", name)
				}
				return tc.node
			})
			if v.Kind != tc.want || v.Reason != tc.reason {
				t.Fatalf("Decide = %+v, want kind %v reason %s", v, tc.want, tc.reason)
			}
			if v.Message == "" {
				t.Fatal("no message")
			}
		})
	}
	// The refusal names the label an administrator sets.
	v := Decide(good(), func(string) NodeFacts { return unlabelled })
	if !strings.Contains(v.Message, "node-role.kubernetes.io/control-plane") {
		t.Fatalf("message %q does not name the label", v.Message)
	}
}
