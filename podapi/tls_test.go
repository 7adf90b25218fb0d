package podapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"math/big"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/bootlet/bootlet/podapi/apitls"
)

// TestServingCertificateReloaded: a renewed serving certificate is served
// by the running listener without a restart, for the same key and names,
// and the old one until then.
func TestServingCertificateReloaded(t *testing.T) {
	s, _, _ := newTestServer(t)
	dir := filepath.Join(t.TempDir(), "pki")
	pki, err := apitls.LoadOrCreatePKI(apitls.PKIOptions{Dir: dir, NodeName: "node1", Hosts: []string{"127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !pki.OwnServing || pki.ServingCertFile != filepath.Join(dir, "apiserver.crt") {
		t.Fatalf("own serving certificate not recorded: %v %q", pki.OwnServing, pki.ServingCertFile)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ServeTLSListener(ctx, l, pki) }()
	go pki.WatchServing(ctx, 20*time.Millisecond)

	certPEM, keyPEM, err := pki.MintClientCert("u", []string{"system:masters"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pki.ServingCAPEM)
	served := func() *x509.Certificate {
		t.Helper()
		c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert}, ServerName: "127.0.0.1"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0]
	}
	first := served()

	old, renewed, err := apitls.RenewServingCert(dir)
	if err != nil {
		t.Fatal(err)
	}
	if old.SerialNumber.Cmp(first.SerialNumber) != 0 || renewed.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatalf("renewal: old serial %s, new %s, served %s", old.SerialNumber, renewed.SerialNumber, first.SerialNumber)
	}
	if !slices.Equal(old.DNSNames, renewed.DNSNames) || len(old.IPAddresses) != len(renewed.IPAddresses) ||
		string(old.RawSubjectPublicKeyInfo) != string(renewed.RawSubjectPublicKeyInfo) || !renewed.NotAfter.After(old.NotAfter.Add(-time.Minute)) {
		t.Errorf("the renewed certificate is not the old one's names and key with a fresh validity: %v %v -> %v %v", old.DNSNames, old.NotAfter, renewed.DNSNames, renewed.NotAfter)
	}
	var got *big.Int
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if got = served().SerialNumber; got.Cmp(renewed.SerialNumber) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got.Cmp(renewed.SerialNumber) != 0 {
		t.Fatalf("the listener still serves serial %s, want the renewed %s", got, renewed.SerialNumber)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
