package signer

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/masters"
)

// etcdCA writes a CA's certificate and key into dir, as render's
// pki/etcd/ca.{crt,key}.
func etcdCA(t *testing.T, dir string) (*x509.Certificate, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca, certFile, keyFile
}

// request is node's own request for its member, as the apiserver stores
// it (the requester's identity set from the credentials).
func request(t *testing.T, name, user string, addr netip.Addr) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, Template(name, []netip.Addr{addr}), key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: "etcd-member-" + name + "-" + user},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: SignerName, Username: user, Groups: []string{"system:nodes", "system:authenticated"},
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			Usages:  []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth}}}
}

func node(name, addr string, labelled bool) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: addr}, {Type: v1.NodeHostName, Address: name}}}}
	if labelled {
		n.Labels[masters.Label] = ""
	}
	return n
}

// TestLead: the leader issues a labelled node's member certificate, signed
// by the etcd CA on its disk and verifiable for the node's address; it
// denies a worker's and another node's request for that node; the
// worker's next request, once an administrator labelled it, is issued.
func TestLead(t *testing.T) {
	ca, certFile, keyFile := etcdCA(t, t.TempDir())
	w1, w2 := netip.MustParseAddr("10.0.0.21"), netip.MustParseAddr("10.0.0.22")
	cs := fake.NewClientset(node("w1", w1.String(), true), node("w2", w2.String(), false))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s := New(Config{EtcdCA: func() (string, string, error) { return certFile, keyFile, nil }})
	go func() { s.Lead(ctx, cs, nil); close(done) }()
	defer func() { cancel(); <-done }()

	api := cs.CertificatesV1().CertificateSigningRequests()
	post := func(r *certificatesv1.CertificateSigningRequest) {
		if _, err := api.Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// await returns the request once finished.
	await := func(name string) *certificatesv1.CertificateSigningRequest {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r, err := api.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if finished(r) {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no verdict: %+v", name, r.Status)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	denied := func(r *certificatesv1.CertificateSigningRequest, reason string) {
		t.Helper()
		for _, c := range r.Status.Conditions {
			if c.Type == certificatesv1.CertificateDenied && c.Reason == reason {
				if len(r.Status.Certificate) > 0 {
					t.Fatalf("%s: denied and issued", r.Name)
				}
				return
			}
		}
		t.Fatalf("%s: not denied %s: %+v", r.Name, reason, r.Status)
	}
	issued := func(r *certificatesv1.CertificateSigningRequest, name string, addr netip.Addr) {
		t.Helper()
		blk, rest := pem.Decode(r.Status.Certificate)
		if blk == nil {
			t.Fatalf("%s: no certificate: %+v", r.Name, r.Status)
		}
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AddCert(ca)
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: addr.String(), KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Fatalf("%s: the certificate does not verify for %s: %v", r.Name, addr, err)
			}
		}
		if cert.Subject.CommonName != name {
			t.Fatalf("%s: CN %q", r.Name, cert.Subject.CommonName)
		}
		// The etcd CA follows, for the node to verify its peers.
		next, tail := pem.Decode(rest)
		if next == nil || !bytes.Equal(next.Bytes, ca.Raw) || len(bytes.TrimSpace(tail)) > 0 {
			t.Fatalf("%s: the certificate is not followed by the etcd CA and nothing else:\n%s", r.Name, r.Status.Certificate)
		}
	}

	post(request(t, "w1", "system:node:w1", w1))
	issued(await("etcd-member-w1-system:node:w1"), "w1", w1)

	post(request(t, "w2", "system:node:w2", w2))
	denied(await("etcd-member-w2-system:node:w2"), "NotAMaster")

	// w2's credentials, for w1's member.
	post(request(t, "w1", "system:node:w2", w1))
	denied(await("etcd-member-w1-system:node:w2"), "Subject")

	n, err := cs.CoreV1().Nodes().Get(ctx, "w2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels[masters.Label] = ""
	if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := request(t, "w2", "system:node:w2", w2)
	r.Name += "-2"
	post(r)
	issued(await(r.Name), "w2", w2)

	// A request of another signer is not touched.
	other := request(t, "w1", "system:node:w1", w1)
	other.Name, other.Spec.SignerName = "kubelet-serving", certificatesv1.KubeletServingSignerName
	post(other)
	time.Sleep(200 * time.Millisecond)
	if got, _ := api.Get(ctx, other.Name, metav1.GetOptions{}); len(got.Status.Conditions) > 0 || len(got.Status.Certificate) > 0 {
		t.Fatalf("another signer's request was touched: %+v", got.Status)
	}
}

// TestLeadSigningFails: a CA that cannot be read fails the request, with
// the cause, rather than leaving it pending.
func TestLeadSigningFails(t *testing.T) {
	cs := fake.NewClientset(node("w1", "10.0.0.21", true))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s := New(Config{EtcdCA: func() (string, string, error) { return "/nonexistent/ca.crt", "/nonexistent/ca.key", nil }})
	go func() { s.Lead(ctx, cs, nil); close(done) }()
	defer func() { cancel(); <-done }()
	r := request(t, "w1", "system:node:w1", netip.MustParseAddr("10.0.0.21"))
	if _, err := cs.CertificatesV1().CertificateSigningRequests().Create(ctx, r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := awaitFinished(t, cs, r.Name)
	for _, c := range got.Status.Conditions {
		if c.Type == certificatesv1.CertificateFailed {
			if c.Message == "" || len(got.Status.Certificate) > 0 {
				t.Fatalf("failed without a cause, or with a certificate: %+v", got.Status)
			}
			return
		}
	}
	t.Fatalf("not failed: %+v", got.Status)
}

// awaitFinished is the request once it is finished (10 s at most).
func awaitFinished(t *testing.T, cs *fake.Clientset, name string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := cs.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if finished(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no verdict: %+v", name, got.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLeadReadsTheNodeNow: a label the signer's watch has not delivered
// (here, never) still lets the node's request through, as each verdict
// reads the Node from the apiserver: a verdict is final, and one made on
// a cache that lags the label would deny a master its member.
func TestLeadReadsTheNodeNow(t *testing.T) {
	_, certFile, keyFile := etcdCA(t, t.TempDir())
	cs := fake.NewClientset(node("w1", "10.0.0.21", false))
	cs.PrependWatchReactor("nodes", func(k8stesting.Action) (bool, watch.Interface, error) { return true, watch.NewFake(), nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s := New(Config{Resync: 20 * time.Millisecond, EtcdCA: func() (string, string, error) { return certFile, keyFile, nil }})
	go func() { s.Lead(ctx, cs, nil); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(100 * time.Millisecond) // the informers have listed the unlabelled Node

	if _, err := cs.CoreV1().Nodes().Update(ctx, node("w1", "10.0.0.21", true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := request(t, "w1", "system:node:w1", netip.MustParseAddr("10.0.0.21"))
	if _, err := cs.CertificatesV1().CertificateSigningRequests().Create(ctx, r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := awaitFinished(t, cs, r.Name); len(got.Status.Certificate) == 0 {
		t.Fatalf("the labelled node's request was not issued: %+v", got.Status.Conditions)
	}
}

// identityRequest is a request of the apiserver's client signer for tmpl,
// by user, as the apiserver stores it.
func identityRequest(t *testing.T, name, user string, tmpl *x509.CertificateRequest) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: IdentitySignerName, Username: user, Groups: []string{"system:nodes", "system:authenticated"},
			Request:           pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageClientAuth},
			ExpirationSeconds: ptr.To(int32(MaxIdentityLife / time.Second))}}
}

// TestLeadIdentity: a labelled node's request for the checkpointer
// identity is approved and left to the controller-manager to sign (the
// leader writes no certificate); a worker's is denied; a person's request
// of the same signer, and a node's for another name, get no verdict.
func TestLeadIdentity(t *testing.T) {
	cs := fake.NewClientset(node("w1", "10.0.0.21", true), node("w2", "10.0.0.22", false))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s := New(Config{Resync: 20 * time.Millisecond, EtcdCA: func() (string, string, error) { return "", "", errors.New("no etcd CA is needed") }})
	go func() { s.Lead(ctx, cs, nil); close(done) }()
	defer func() { cancel(); <-done }()

	api := cs.CertificatesV1().CertificateSigningRequests()
	other := IdentityTemplate()
	other.Subject.CommonName = "jane"
	reqs := []*certificatesv1.CertificateSigningRequest{
		identityRequest(t, "w1", "system:node:w1", IdentityTemplate()),
		identityRequest(t, "w2", "system:node:w2", IdentityTemplate()),
		identityRequest(t, "admin", "kubernetes-admin", IdentityTemplate()),
		identityRequest(t, "w1-jane", "system:node:w1", other),
	}
	for _, r := range reqs {
		if _, err := api.Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	conditionOf := func(name string) (certificatesv1.RequestConditionType, string) {
		r, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Status.Certificate) > 0 {
			t.Fatalf("%s: the leader wrote a certificate of the controller-manager's signer", name)
		}
		if len(r.Status.Conditions) == 0 {
			return "", ""
		}
		c := r.Status.Conditions[len(r.Status.Conditions)-1]
		return c.Type, c.Reason
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		t1, _ := conditionOf("w1")
		t2, _ := conditionOf("w2")
		if t1 != "" && t2 != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no verdicts: w1 %q, w2 %q", t1, t2)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if typ, reason := conditionOf("w1"); typ != certificatesv1.CertificateApproved || reason != "CheckpointerOfMaster" {
		t.Errorf("the labelled node's request: %s %s; want Approved CheckpointerOfMaster", typ, reason)
	}
	if typ, reason := conditionOf("w2"); typ != certificatesv1.CertificateDenied || reason != "NotAMaster" {
		t.Errorf("the worker's request: %s %s; want Denied NotAMaster", typ, reason)
	}
	time.Sleep(200 * time.Millisecond) // ten rounds more
	for _, name := range []string{"admin", "w1-jane"} {
		if typ, reason := conditionOf(name); typ != "" {
			t.Errorf("%s: %s %s; want no verdict (not this signer's to decide)", name, typ, reason)
		}
	}
	if r, _ := api.Get(ctx, "w1", metav1.GetOptions{}); len(r.Status.Conditions) != 1 {
		t.Errorf("the approved request has %d conditions; want one approval", len(r.Status.Conditions))
	}
}
