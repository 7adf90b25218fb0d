package csrapprover

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const group = "system:bootstrappers:bootlet:default-node-token"

func csrPEM(t *testing.T, cn string, orgs []string, dns []string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: cn, Organization: orgs}, DNSNames: dns,
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
}

func TestDecide(t *testing.T) {
	clientUsages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	mk := func(name string, mut func(*certificatesv1.CertificateSigningRequest)) *certificatesv1.CertificateSigningRequest {
		r := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
				Username:   "system:bootstrap:abcdef",
				Groups:     []string{"system:bootstrappers", group, "system:authenticated"},
				Usages:     clientUsages,
				Request:    csrPEM(t, "system:node:worker-1", []string{"system:nodes"}, nil),
			},
		}
		if mut != nil {
			mut(r)
		}
		return r
	}
	existing := map[string]bool{"master-1": true, "worker-0": true}
	claims := map[string]string{"worker-9": "csr-old"}
	facts := Facts{
		BootstrapGroup: group,
		NodeExists:     func(n string) bool { return existing[n] },
		ClaimedBy: func(n, except string) string {
			if c := claims[n]; c != except {
				return c
			}
			return ""
		},
	}
	for _, tc := range []struct {
		name   string
		csr    *certificatesv1.CertificateSigningRequest
		want   Verdict
		reason string
	}{
		{"a new worker's request", mk("csr-1", nil), Approve, ReasonApproved},
		{"a master's name", mk("csr-2", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = csrPEM(t, "system:node:master-1", []string{"system:nodes"}, nil)
		}), Deny, ReasonNodeExists},
		{"an existing worker's name", mk("csr-3", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = csrPEM(t, "system:node:worker-0", []string{"system:nodes"}, nil)
		}), Deny, ReasonNodeExists},
		{"a name approved for another request, not registered yet", mk("csr-4", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = csrPEM(t, "system:node:worker-9", []string{"system:nodes"}, nil)
		}), Deny, ReasonNodeNameClaimed},
		{"the approved request itself, seen again", mk("csr-old", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = csrPEM(t, "system:node:worker-9", []string{"system:nodes"}, nil)
		}), Approve, ReasonApproved},
		{"system:masters in the subject", mk("csr-5", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = csrPEM(t, "system:node:worker-1", []string{"system:nodes", "system:masters"}, nil)
		}), Deny, ReasonNotNodeClient},
		{"not a node's CN", mk("csr-6", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = csrPEM(t, "admin", []string{"system:nodes"}, nil)
		}), Deny, ReasonNotNodeClient},
		{"a DNS SAN", mk("csr-7", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = csrPEM(t, "system:node:worker-1", []string{"system:nodes"}, []string{"kubernetes"})
		}), Deny, ReasonNotNodeClient},
		{"server usage", mk("csr-8", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Usages = append(r.Spec.Usages, certificatesv1.UsageServerAuth)
		}), Deny, ReasonNotNodeClient},
		{"garbage request", mk("csr-9", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = []byte("not a pem")
		}), Deny, ReasonNotNodeClient},
		{"a name that is not a node name", mk("csr-10", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Request = csrPEM(t, "system:node:Bad_Name", []string{"system:nodes"}, nil)
		}), Deny, ReasonInvalidName},
		{"a node renewing its own certificate: the controller-manager's", mk("csr-11", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Username, r.Spec.Groups = "system:node:worker-0", []string{"system:nodes", "system:authenticated"}
			r.Spec.Request = csrPEM(t, "system:node:worker-0", []string{"system:nodes"}, nil)
		}), Ignore, ""},
		{"another signer", mk("csr-12", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.SignerName = certificatesv1.KubeletServingSignerName
		}), Ignore, ""},
		{"a token of another group", mk("csr-13", func(r *certificatesv1.CertificateSigningRequest) {
			r.Spec.Groups = []string{"system:bootstrappers", "system:bootstrappers:other"}
		}), Ignore, ""},
		{"already denied", mk("csr-14", func(r *certificatesv1.CertificateSigningRequest) {
			r.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: v1.ConditionTrue}}
		}), Ignore, ""},
		{"already approved", mk("csr-15", func(r *certificatesv1.CertificateSigningRequest) {
			r.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue}}
		}), Ignore, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.csr, facts)
			if d.Verdict != tc.want || d.Reason != tc.reason {
				t.Fatalf("Decide = %v %q (%s), want %v %q", d.Verdict, d.Reason, d.Message, tc.want, tc.reason)
			}
			if d.Verdict != Ignore && d.Message == "" {
				t.Fatal("a verdict without a message")
			}
		})
	}
}

func TestNodeNameOf(t *testing.T) {
	r := &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{
		SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Groups: []string{group},
		Request: csrPEM(t, "system:node:w1", []string{"system:nodes"}, nil),
	}}
	if got := NodeNameOf(r, group); got != "" {
		t.Fatalf("a pending request claims %q", got)
	}
	r.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue}}
	if got := NodeNameOf(r, group); got != "w1" {
		t.Fatalf("NodeNameOf = %q, want w1", got)
	}
	if got := NodeNameOf(r, "system:bootstrappers:other"); got != "" {
		t.Fatalf("another group's request claims %q", got)
	}
}
