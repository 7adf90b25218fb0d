package signer

import (
	"crypto/x509"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/utils/ptr"

	btypes "github.com/bootlet/bootlet/types"
)

func TestDecideIdentity(t *testing.T) {
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth}
	month := int32(MaxIdentityLife / time.Second)
	good := func() Request {
		return Request{Username: "system:node:w1", Groups: []string{"system:nodes", "system:authenticated"}, Usages: usages, CSR: signed(t, IdentityTemplate()), ExpirationSeconds: &month}
	}
	with := func(f func(*Request)) Request { r := good(); f(&r); return r }
	withCSR := func(f func(*x509.CertificateRequest)) Request {
		tmpl := IdentityTemplate()
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
		{"a labelled node's own request, as IdentityTemplate makes it", good(), labelled, Issue, "CheckpointerOfMaster"},
		{"client auth alone", with(func(r *Request) { r.Usages = usages[2:] }), labelled, Issue, "CheckpointerOfMaster"},
		{"a worker: its Node is not labelled", good(), unlabelled, Deny, "NotAMaster"},
		{"a Node not registered yet waits", good(), NodeFacts{}, Wait, "NodeNotFound"},
		{"a node name outside system:nodes", with(func(r *Request) { r.Groups = []string{"system:authenticated"} }), labelled, Deny, "NotANode"},
		{"system:masters as organization: cluster-admin", withCSR(func(c *x509.CertificateRequest) { c.Subject.Organization = []string{"system:masters"} }), labelled, Deny, "Subject"},
		{"an organizational unit", withCSR(func(c *x509.CertificateRequest) { c.Subject.OrganizationalUnit = []string{"x"} }), labelled, Deny, "Subject"},
		{"another CN", withCSR(func(c *x509.CertificateRequest) { c.Subject.CommonName = "system:kube-controller-manager" }), labelled, Deny, "Subject"},
		{"a DNS name", withCSR(func(c *x509.CertificateRequest) { c.DNSNames = []string{"w1"} }), labelled, Deny, "SubjectAltNames"},
		{"an IP", withCSR(func(c *x509.CertificateRequest) { c.IPAddresses = []net.IP{net.ParseIP("10.0.0.21")} }), labelled, Deny, "SubjectAltNames"},
		{"server auth: a client identity serves nothing", with(func(r *Request) { r.Usages = append(r.Usages, certificatesv1.UsageServerAuth) }), labelled, Deny, "Usages"},
		{"no client auth", with(func(r *Request) { r.Usages = usages[:2] }), labelled, Deny, "Usages"},
		{"no life asked: the controller-manager's year", with(func(r *Request) { r.ExpirationSeconds = nil }), labelled, Deny, "Expiration"},
		{"a life longer than a month", with(func(r *Request) { r.ExpirationSeconds = ptr.To(month + 1) }), labelled, Deny, "Expiration"},
		{"a day", with(func(r *Request) { r.ExpirationSeconds = ptr.To(int32(86400)) }), labelled, Issue, "CheckpointerOfMaster"},
		{"a request that does not parse", with(func(r *Request) { r.CSR, r.ParseError = nil, "no PEM" }), labelled, Deny, "Malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := DecideIdentity(tc.r, func(name string) NodeFacts {
				if name != "w1" {
					t.Fatalf("read node %q", name)
				}
				return tc.node
			})
			if v.Kind != tc.want || v.Reason != tc.reason {
				t.Fatalf("DecideIdentity = %+v, want kind %v reason %s", v, tc.want, tc.reason)
			}
			if v.Message == "" {
				t.Fatal("no message")
			}
		})
	}
	v := DecideIdentity(good(), func(string) NodeFacts { return unlabelled })
	if !strings.Contains(v.Message, "node-role.kubernetes.io/control-plane") {
		t.Fatalf("message %q does not name the label", v.Message)
	}
}

// TestIsIdentityRequest: only a node's request of the apiserver client
// signer for the checkpointer's CN is decided here; a person's request of
// the same signer, or a node's for another CN, is left alone.
func TestIsIdentityRequest(t *testing.T) {
	ours := signed(t, IdentityTemplate())
	other := signed(t, &x509.CertificateRequest{})
	other.Subject.CommonName = "jane"
	cases := []struct {
		name   string
		signer string
		r      Request
		want   bool
	}{
		{"a node's, for the checkpointer", IdentitySignerName, Request{Username: "system:node:w1", CSR: ours}, true},
		{"a node's that does not parse: decided (denied)", IdentitySignerName, Request{Username: "system:node:w1"}, true},
		{"a node's, for another CN", IdentitySignerName, Request{Username: "system:node:w1", CSR: other}, false},
		{"a person's, for the checkpointer", IdentitySignerName, Request{Username: "kubernetes-admin", CSR: ours}, false},
		{"the kubelet's client signer", certificatesv1.KubeAPIServerClientKubeletSignerName, Request{Username: "system:node:w1", CSR: ours}, false},
		{"the etcd member signer", SignerName, Request{Username: "system:node:w1", CSR: ours}, false},
	}
	for _, tc := range cases {
		if got := IsIdentityRequest(tc.signer, tc.r); got != tc.want {
			t.Errorf("%s: IsIdentityRequest = %v, want %v", tc.name, got, tc.want)
		}
	}
	if IdentityTemplate().Subject.CommonName != btypes.CheckpointerUser {
		t.Error("the template is not the checkpointer's")
	}
}
