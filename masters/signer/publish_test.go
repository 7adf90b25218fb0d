package signer

import (
	"context"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/bootlet/bootlet/credmirror"
)

// The leader publishes the CA it signs with as a credential Secret beside
// render's, writes only when it differs, and follows a CA that changed.
func TestPublishEtcdCA(t *testing.T) {
	anchor := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: anchorSecret, Namespace: metav1.NamespaceSystem}, Data: map[string][]byte{"ca.crt": []byte("x")}}
	if err := credmirror.Annotate(anchor, credmirror.Target{Dir: "/var/lib/bootlet/assets/credentials/kube-apiserver", Items: []v1.KeyToPath{{Key: "ca.crt", Path: "pki/ca.crt"}}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, certFile, keyFile := etcdCA(t, dir)
	s := New(Config{EtcdCA: func() (string, string, error) { return certFile, keyFile, nil }})
	ctx := context.Background()

	cs := fake.NewClientset()
	if _, err := s.publishEtcdCA(ctx, cs); err == nil {
		t.Error("published without the apiserver's credential Secret to find the mirror's directory")
	}
	cs = fake.NewClientset(anchor)
	for i, wantWrite := range []bool{true, false} {
		wrote, err := s.publishEtcdCA(ctx, cs)
		if err != nil || wrote != wantWrite {
			t.Fatalf("call %d: wrote %v, %v; want %v, nil", i, wrote, err, wantWrite)
		}
	}
	got, err := cs.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, EtcdCASecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	target, ok, err := credmirror.TargetOf(got)
	if err != nil || !ok || target.Dir != "/var/lib/bootlet/assets/credentials/"+EtcdCASecretName || len(target.Items) != 2 {
		t.Errorf("mirror target %+v (%v, %v), want both files under credentials/%s", target, ok, err, EtcdCASecretName)
	}
	cert, _ := os.ReadFile(certFile)
	if string(got.Data[EtcdCACertKey]) != string(cert) || len(got.Data[EtcdCAKeyKey]) == 0 {
		t.Error("the Secret does not hold the CA's files")
	}

	// A rotated CA is published again.
	_, certFile2, keyFile2 := etcdCA(t, t.TempDir())
	s2 := New(Config{EtcdCA: func() (string, string, error) { return certFile2, keyFile2, nil }})
	if wrote, err := s2.publishEtcdCA(ctx, cs); err != nil || !wrote {
		t.Fatalf("a changed CA: wrote %v, %v; want an update", wrote, err)
	}
	got, _ = cs.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, EtcdCASecretName, metav1.GetOptions{})
	cert2, _ := os.ReadFile(certFile2)
	if string(got.Data[EtcdCACertKey]) != string(cert2) {
		t.Error("the Secret still holds the old CA")
	}
}
