package autorenew

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/bootlet/bootlet/podapi/apitls"
)

// writeCert writes a certificate valid until notAfter (a CA when isCA) to
// path.
func writeCert(t *testing.T, path string, isCA bool, notAfter time.Time) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: filepath.Base(path)},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter, IsCA: isCA, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := certutil.EncodeCertificates(&x509.Certificate{Raw: der})
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestControllerCheck: what expires within the threshold is renewed (the
// serving certificate in place, the asset dir's by certs renew), with one
// event; a failed certs renew is a warning and runs again at the next
// check even when nothing expires any more.
func TestControllerCheck(t *testing.T) {
	now := time.Now()
	root := t.TempDir()
	pki, err := apitls.LoadOrCreatePKI(apitls.PKIOptions{Dir: filepath.Join(root, "pki"), NodeName: "n1", Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	assets := t.TempDir()
	writeCert(t, filepath.Join(assets, "pki", "ca.crt"), true, now.Add(24*time.Hour))
	writeCert(t, filepath.Join(assets, "pki", "etcd", "server.crt"), false, now.Add(24*time.Hour))
	writeCert(t, filepath.Join(assets, "pki", "apiserver.crt"), false, now.Add(100*24*time.Hour))

	type event struct{ typ, reason, msg string }
	var events []event
	var calls [][]string
	toolsErr := errors.New("apiserver down")
	r := New(Config{Before: 30 * 24 * time.Hour, NodeName: "n1", RootDir: root, PKI: pki,
		AssetDir: assets, Kubeconfig: filepath.Join(assets, "admin.conf"),
		Event: func(node, typ, reason, msg string) { events = append(events, event{typ, reason, msg}) },
		Tools: func(_ context.Context, args ...string) ([]byte, error) {
			calls = append(calls, args)
			return []byte("renewed etcd/server\n"), toolsErr
		}})

	// Nothing but etcd/server within 30 days; certs renew fails.
	if r.Check(context.Background(), now) {
		t.Fatal("check succeeded with certs renew failing")
	}
	if len(calls) != 1 || !slices.Contains(calls[0], "--expiring-within") || !slices.Contains(calls[0], "720h0m0s") || !slices.Contains(calls[0], assets) {
		t.Fatalf("certs renew called with %v", calls)
	}
	if len(events) != 1 || events[0].reason != "CertificateRenewalFailed" || !strings.Contains(events[0].msg, "etcd/server") {
		t.Fatalf("events %+v", events)
	}
	// The retry runs certs renew although nothing expires now (the files
	// were renewed, the Secrets maybe not).
	toolsErr = nil
	if !r.Check(context.Background(), now.Add(-365*24*time.Hour)) {
		t.Fatal("the retry failed")
	}
	if len(calls) != 2 || r.pending {
		t.Fatalf("no retry of certs renew: %v pending %v", calls, r.pending)
	}
	// A threshold beyond the serving certificate's year renews it in place.
	before := pki.ServingCertificate()
	r.cfg.Before = 400 * 24 * time.Hour
	events = nil
	if !r.Check(context.Background(), now) {
		t.Fatal("check failed")
	}
	if len(events) != 1 || events[0].reason != "CertificatesRenewed" || !strings.Contains(events[0].msg, "bootlet-serving") || !strings.Contains(events[0].msg, "apiserver") {
		t.Fatalf("events %+v", events)
	}
	certs, err := certutil.CertsFromFile(filepath.Join(root, "pki", "apiserver.crt"))
	if err != nil {
		t.Fatal(err)
	}
	old, _ := x509.ParseCertificate(before.Certificate[0])
	if certs[0].SerialNumber.Cmp(old.SerialNumber) == 0 {
		t.Error("the serving certificate file was not renewed")
	}
	// expiringLeaves: the leaves before the deadline, by their names under pki/.
	if got, _ := ExpiringLeaves(filepath.Join(assets, "pki"), now); len(got) != 0 {
		t.Errorf("expiring now: %v", got)
	}
	if got, _ := ExpiringLeaves(filepath.Join(assets, "pki"), now.Add(200*24*time.Hour)); !slices.Equal(got, []string{"apiserver", "etcd/server"}) {
		t.Errorf("expiring within 200 days: %v (CAs are left out)", got)
	}
}
