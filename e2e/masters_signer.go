//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bootlet/bootlet/e2e/nodes"
	"github.com/bootlet/bootlet/masters/signer"
)

// nodeKubeletClient is a client with the node's own kubelet credentials
// (its /etc/kubernetes/kubelet.conf, file paths read under its root).
func nodeKubeletClient(t testing.TB, m nodes.Member) kubernetes.Interface {
	t.Helper()
	root := m.Node().Root
	cfg, err := clientcmd.LoadFromFile(filepath.Join(root, "etc/kubernetes/kubelet.conf"))
	if err != nil {
		t.Fatalf("%s's kubelet.conf: %v", m.Name, err)
	}
	under := func(p string) string {
		if p == "" {
			return ""
		}
		return filepath.Join(root, p)
	}
	for _, a := range cfg.AuthInfos {
		a.ClientCertificate, a.ClientKey = under(a.ClientCertificate), under(a.ClientKey)
	}
	for _, c := range cfg.Clusters {
		c.CertificateAuthority = under(c.CertificateAuthority)
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		t.Fatalf("%s's kubelet.conf: %v", m.Name, err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// checkEtcdMemberSigner posts, with the node's own kubelet credentials, a
// request for its etcd member's certificate (package masters/signer): an
// unlabelled node's is denied (NotAMaster); a labelled node's is issued,
// and verifies for the node's address, as server and as client, against
// the etcd CA on a master's disk.
func checkEtcdMemberSigner(t testing.TB, admin kubernetes.Interface, m, master nodes.Member, labelled bool) {
	t.Helper()
	ctx := context.Background()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, signer.Template(m.Name, []netip.Addr{m.Addr()}), key)
	if err != nil {
		t.Fatal(err)
	}
	req := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "etcd-member-" + m.Name + "-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: signer.SignerName, Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth, certificatesv1.UsageClientAuth}}}
	t0 := time.Now()
	created, err := nodeKubeletClient(t, m).CertificatesV1().CertificateSigningRequests().Create(ctx, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s's kubelet credentials cannot post a request for its etcd member's certificate: %v", m.Name, err)
	}
	defer func() {
		_ = admin.CertificatesV1().CertificateSigningRequests().Delete(ctx, created.Name, metav1.DeleteOptions{})
	}()
	var got *certificatesv1.CertificateSigningRequest
	Eventually(t, time.Minute, func() (bool, string) {
		r, err := admin.CertificatesV1().CertificateSigningRequests().Get(ctx, created.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = r
		if len(r.Status.Certificate) > 0 {
			return true, ""
		}
		for _, c := range r.Status.Conditions {
			if c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%s: no verdict yet: %+v", r.Name, r.Status.Conditions)
	})
	if !labelled {
		for _, c := range got.Status.Conditions {
			if c.Type == certificatesv1.CertificateDenied && c.Reason == "NotAMaster" && len(got.Status.Certificate) == 0 {
				t.Logf("%s, not labelled: its own request for an etcd member certificate denied after %s: %s", m.Name, time.Since(t0).Round(time.Millisecond), c.Message)
				return
			}
		}
		t.Fatalf("%s, not labelled: its request for an etcd member certificate is not denied NotAMaster: %+v", m.Name, got.Status)
	}
	blk, _ := pem.Decode(got.Status.Certificate)
	if blk == nil {
		t.Fatalf("%s, labelled: its request for an etcd member certificate is not issued: %+v", m.Name, got.Status.Conditions)
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	caFile := filepath.Join(master.Node().Root, "etc/kubernetes/pki/etcd/ca.crt")
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("%s: no certificate", caFile)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: m.Addr().String(), KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Fatalf("%s's issued etcd member certificate does not verify against %s for %s: %v", m.Name, caFile, m.Addr(), err)
		}
	}
	t.Logf("%s, labelled: its own request for an etcd member certificate issued after %s, CN %s, IPs %v, until %s; it verifies against the etcd CA",
		m.Name, time.Since(t0).Round(time.Millisecond), cert.Subject.CommonName, cert.IPAddresses, cert.NotAfter.Format(time.DateOnly))
}
