package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/keyutil"

	"github.com/bootlet/bootlet/credmirror"
	"github.com/bootlet/bootlet/masters/nodekeys"
	btypes "github.com/bootlet/bootlet/types"
)

func TestDecideCandidacy(t *testing.T) {
	whole := candidacyFacts{Identity: true, LeaderLabelled: true}
	for _, tc := range []struct {
		name   string
		f      func(f *candidacyFacts)
		want   bool
		whyHas []string
	}{
		{"a whole master", func(*candidacyFacts) {}, true, nil},
		{"a worker", func(f *candidacyFacts) {
			*f = candidacyFacts{Member: "no member", ClusterCA: "forbidden", EtcdCA: "forbidden"}
		}, false,
			[]string{"no checkpointer identity", "lacks", "no etcd member", "cluster CA", "etcd CA"}},
		{"a learner", func(f *candidacyFacts) { f.LeaderLabelled = false }, false, []string{"does not vote yet"}},
		{"demoted: its member set aside", func(f *candidacyFacts) { f.Member = "no etcd member pod" }, false, []string{"no etcd member"}},
		{"the etcd CA not published", func(f *candidacyFacts) { f.EtcdCA = "not found" }, false, []string{"etcd CA is not mirrored: not found"}},
		{"the cluster CA not mirrored yet", func(f *candidacyFacts) { f.ClusterCA = "not mirrored yet" }, false, []string{"cluster CA"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := whole
			tc.f(&f)
			got, why := decideCandidacy(f)
			if got != tc.want {
				t.Errorf("candidate = %v (%s), want %v", got, why, tc.want)
			}
			for _, w := range tc.whyHas {
				if !strings.Contains(why, w) {
					t.Errorf("why %q lacks %q", why, w)
				}
			}
		})
	}
}

// The identity a promoted master makes is the masters' controller's, in
// system:masters, signed by the cluster CA, for the server its
// checkpointer identity names.
func TestWriteControllerIdentity(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kubernetes"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour * 24 * 365), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	ca := caPair{cert: filepath.Join(dir, "ca.crt"), key: filepath.Join(dir, "ca.key")}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM, _ := keyutil.MarshalPrivateKeyToPEM(key)
	if err := os.WriteFile(ca.cert, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca.key, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	like := filepath.Join(dir, "bootlet-checkpointer.conf")
	if err := nodekeys.WriteIdentity(like, "https://172.30.90.10:6443", caPEM, []byte("c"), []byte("k")); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(dir, controllerKubeconfigName)
	if err := writeControllerIdentity(path, like, ca, time.Hour); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the identity's file: %v, mode %v; want 0600", err, st.Mode())
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	if cl := kc.Clusters[ctx.Cluster]; cl.Server != "https://172.30.90.10:6443" || string(cl.CertificateAuthorityData) != string(caPEM) {
		t.Errorf("cluster %+v, want the checkpointer identity's server and CA", cl)
	}
	blk, _ := pem.Decode(kc.AuthInfos[ctx.AuthInfo].ClientCertificateData)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != btypes.MastersControllerUser || !slices.Equal(cert.Subject.Organization, []string{"system:masters"}) {
		t.Errorf("subject %q, want CN=%s, O=system:masters", cert.Subject.String(), btypes.MastersControllerUser)
	}
	if err := cert.CheckSignatureFrom(mustParse(t, der)); err != nil {
		t.Errorf("not signed by the cluster CA: %v", err)
	}
	if life := time.Until(cert.NotAfter); life > time.Hour || life < 50*time.Minute {
		t.Errorf("the identity lives %s more, want about an hour", life)
	}

	// No CA key mirrored: nothing written.
	os.Remove(path)
	if err := writeControllerIdentity(path, like, caPair{cert: ca.cert, key: filepath.Join(dir, "absent")}, time.Hour); err == nil {
		t.Error("an identity made without the CA's key")
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a file written without the CA's key")
	}
}

func mustParse(t *testing.T, der []byte) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Where the mirror put a CA, and why not: a Secret not there, or not
// mirrored yet, is a reason; an API read that failed is an error, of which
// the candidacy makes no fact.
func TestMirroredPair(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bootlet-etcd-ca")
	secret := &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootlet-etcd-ca", Namespace: metav1.NamespaceSystem}}
	if err := credmirror.Annotate(secret, credmirror.Target{Dir: dir, Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}, {Key: "ca.key", Path: "ca.key"}}}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	get := func(cs *fake.Clientset) (caPair, string, error) {
		return mirroredPair(ctx, cs, "bootlet-etcd-ca", "ca.crt", "ca.key")
	}

	if _, why, err := get(fake.NewClientset()); err != nil || !strings.Contains(why, "no Secret") {
		t.Errorf("no Secret: why %q, err %v; want a reason", why, err)
	}
	if _, why, err := get(fake.NewClientset(secret)); err != nil || !strings.Contains(why, "not mirrored yet") {
		t.Errorf("files not there: why %q, err %v; want a reason", why, err)
	}
	failing := fake.NewClientset(secret)
	failing.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("the apiserver is leaving")
	})
	if _, why, err := get(failing); err == nil || why != "" {
		t.Errorf("an API error: why %q, err %v; want the error alone", why, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "ca.key"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p, why, err := get(fake.NewClientset(secret))
	if err != nil || why != "" || p.cert != filepath.Join(dir, "ca.crt") || p.key != filepath.Join(dir, "ca.key") {
		t.Errorf("mirrored: %+v, why %q, err %v", p, why, err)
	}
}
