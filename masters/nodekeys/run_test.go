package nodekeys

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/keyutil"

	"github.com/bootlet/bootlet/masters"
	"github.com/bootlet/bootlet/masters/signer"
	btypes "github.com/bootlet/bootlet/types"
)

// apiserverFor is a fake apiserver whose requests come from
// system:node:name, as the real one stamps them from the credentials.
func apiserverFor(name string, objs ...runtime.Object) *fake.Clientset {
	cs := fake.NewClientset(objs...)
	n := 0
	cs.PrependReactor("create", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*certificatesv1.CertificateSigningRequest)
		r.Spec.Username, r.Spec.Groups = "system:node:"+name, []string{"system:nodes", "system:authenticated"}
		if r.Name == "" {
			n++
			r.Name = r.GenerateName + string(rune('a'+n))
		}
		return false, nil, nil
	})
	// The fake's list and watch ignore field selectors; client-go's
	// WaitForCertificate selects its request by name, and a node posts
	// two (its member's, its identity's).
	gvr := certificatesv1.SchemeGroupVersion.WithResource("certificatesigningrequests")
	byName := func(sel fields.Selector, obj runtime.Object) bool {
		m, err := meta.Accessor(obj)
		return err == nil && sel.Matches(fields.Set{"metadata.name": m.GetName()})
	}
	cs.PrependReactor("list", "certificatesigningrequests", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel := a.(k8stesting.ListAction).GetListRestrictions().Fields
		if sel == nil || sel.Empty() {
			return false, nil, nil
		}
		obj, err := cs.Tracker().List(gvr, certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest"), "")
		if err != nil {
			return true, nil, err
		}
		l := obj.(*certificatesv1.CertificateSigningRequestList)
		l.Items = slices.DeleteFunc(l.Items, func(r certificatesv1.CertificateSigningRequest) bool { return !byName(sel, &r) })
		return true, l, nil
	})
	// The fake's watch also starts at now, not at the list's version: a
	// request posted or signed between the two would never reach the
	// signer's informer or the waiter. So every watch first replays what
	// matches.
	cs.PrependWatchReactor("certificatesigningrequests", func(a k8stesting.Action) (bool, watch.Interface, error) {
		sel := a.(k8stesting.WatchAction).GetWatchRestrictions().Fields
		if sel == nil {
			sel = fields.Everything()
		}
		w, err := cs.Tracker().Watch(gvr, "")
		if err != nil {
			return true, nil, err
		}
		obj, err := cs.Tracker().List(gvr, certificatesv1.SchemeGroupVersion.WithKind("CertificateSigningRequest"), "")
		if err != nil {
			w.Stop()
			return true, nil, err
		}
		ch := make(chan watch.Event)
		proxy := watch.NewProxyWatcher(ch)
		go func() {
			defer w.Stop()
			send := func(e watch.Event) bool {
				if !byName(sel, e.Object) {
					return true
				}
				select {
				case ch <- e:
					return true
				case <-proxy.StopChan():
					return false
				}
			}
			for i := range obj.(*certificatesv1.CertificateSigningRequestList).Items {
				if !send(watch.Event{Type: watch.Modified, Object: &obj.(*certificatesv1.CertificateSigningRequestList).Items[i]}) {
					return
				}
			}
			for {
				select {
				case e, ok := <-w.ResultChan():
					if !ok || !send(e) {
						return
					}
				case <-proxy.StopChan():
					return
				}
			}
		}()
		return true, proxy, nil
	})
	return cs
}

func nodeObj(name, ip string, labelled bool) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}, {Type: v1.NodeHostName, Address: name}}}}
	if labelled {
		n.Labels[masters.Label] = ""
	}
	return n
}

// writeCA writes ca and its key where the signer reads them.
func writeCA(t *testing.T, dir string, ca *x509.Certificate, key any) (string, string) {
	t.Helper()
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	c, k := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := os.WriteFile(c, encode(ca), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return c, k
}

// TestRoundWithSigner: a labelled node's round asks the masters' signer
// (the real one, on a fake apiserver), and writes a pair that loads as a
// TLS key pair and verifies with the CA it wrote beside it; the next
// round asks nothing. An unlabelled node's request is never posted.
func TestRoundWithSigner(t *testing.T) {
	ca, caKey := testCA(t, "etcd-ca")
	caCert, caKeyFile := writeCA(t, t.TempDir(), ca, caKey)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	cs := apiserverFor("w1", nodeObj("w1", "10.0.0.21", true), nodeObj("w2", "10.0.0.22", false))
	done := make(chan struct{})
	go func() {
		defer close(done)
		signer.New(signer.Config{Resync: 50 * time.Millisecond, EtcdCA: func() (string, string, error) { return caCert, caKeyFile, nil }}).Lead(ctx, cs, nil)
	}()
	defer func() { cancel(); <-done }()

	clusterCA := runControllerManager(t, ctx, cs)
	dir := filepath.Join(t.TempDir(), "pki", "etcd")
	idPath := filepath.Join(t.TempDir(), "bootlet-checkpointer.conf")
	k := New(Config{NodeName: "w1", Dir: dir, Wait: 10 * time.Second, IdentityKubeconfig: idPath, Cluster: testCluster})
	if err := k.Round(ctx, cs); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"server", "peer"} {
		pair, err := tls.LoadX509KeyPair(filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"))
		if err != nil {
			t.Fatalf("%s's pair: %v", name, err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if leaf.Subject.CommonName != "w1" || len(pair.Certificate) != 1 {
			t.Errorf("%s.crt: CN %q, %d certificates; want w1's alone", name, leaf.Subject.CommonName, len(pair.Certificate))
		}
		if fi, err := os.Stat(filepath.Join(dir, name+".key")); err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s.key: mode %v; want 0600", name, fi.Mode())
		}
	}
	got, err := Read(dir)
	if err != nil || got == nil || !got.CA.Equal(ca) {
		t.Fatalf("Read = %+v, %v; want the pair and the etcd CA", got, err)
	}
	if d := Decide(Facts{Node: "w1", Labelled: true, Addresses: signer.NodeAddresses(nodeObj("w1", "10.0.0.21", true)), Pair: got, Now: time.Now()}); d.Ask {
		t.Errorf("after the round, Decide = %+v; want nothing to ask", d)
	}
	checkIdentity(t, idPath, clusterCA)
	before := csrCount(t, cs)
	if err := k.Round(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if after := csrCount(t, cs); after != before {
		t.Errorf("a second round posted %d requests; want none", after-before)
	}

	w2 := New(Config{NodeName: "w2", Dir: filepath.Join(t.TempDir(), "etcd"), IdentityKubeconfig: filepath.Join(t.TempDir(), "id.conf"), Cluster: testCluster})
	if err := w2.Round(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if after := csrCount(t, cs); after != before {
		t.Errorf("an unlabelled node posted %d requests; want none", after-before)
	}
}

// TestRoundDenied: a request the signer denies (the label taken away
// between the node's read and the signer's) is an error naming the
// denial, nothing is written, and the next try waits for the backoff.
func TestRoundDenied(t *testing.T) {
	cs := apiserverFor("w1", nodeObj("w1", "10.0.0.21", true))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// The signer's verdict on whatever w1 posts.
		for ctx.Err() == nil {
			l, _ := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
			for _, r := range l.Items {
				if len(r.Status.Conditions) == 0 {
					r.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateDenied, Status: v1.ConditionTrue, Reason: "NotAMaster", Message: "node w1 is not labelled"}}
					_, _ = cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, r.Name, &r, metav1.UpdateOptions{})
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	now := t0
	dir := t.TempDir()
	k := New(Config{NodeName: "w1", Dir: dir, Wait: 10 * time.Second, Backoff: time.Minute, Now: func() time.Time { return now }, IdentityKubeconfig: "-"})
	err := k.Round(ctx, cs)
	if err == nil || !strings.Contains(err.Error(), "NotAMaster") {
		t.Fatalf("Round = %v; want the denial's reason", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a denied request wrote %v", entries)
	}
	posted := csrCount(t, cs)
	now = now.Add(30 * time.Second)
	if err := k.Round(ctx, cs); err != nil || csrCount(t, cs) != posted {
		t.Errorf("within the backoff: Round = %v, %d requests posted; want nil and none", err, csrCount(t, cs)-posted)
	}
	now = now.Add(31 * time.Second)
	if err := k.Round(ctx, cs); err == nil || csrCount(t, cs) != posted+1 {
		t.Errorf("after the backoff: Round = %v, %d requests posted; want the denial again and one", err, csrCount(t, cs)-posted)
	}
}

func TestSplit(t *testing.T) {
	ca, caKey := testCA(t, "etcd-ca")
	other, _ := testCA(t, "another-ca")
	leaf := leafOf(t, ca, caKey, "w1", nil, t0, time.Hour)
	cases := []struct {
		name     string
		chain    []byte
		onDisk   *x509.Certificate
		wantErr  string
		wantRoot *x509.Certificate
	}{
		{"the CA after the leaf", append(encode(leaf), encode(ca)...), nil, "", ca},
		{"another CA first", append(append(encode(leaf), encode(other)...), encode(ca)...), nil, "", ca},
		{"no CA, the disk's", encode(leaf), ca, "", ca},
		{"no CA anywhere", encode(leaf), other, "holds no CA", nil},
		{"not PEM", []byte("garbage"), nil, "the signer's answer", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, c, err := Split(tc.chain, tc.onDisk)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Split = %v; want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !l.Equal(leaf) || !c.Equal(tc.wantRoot) {
				t.Errorf("Split: the leaf or the CA is not the one sent")
			}
		})
	}
}

func csrCount(t *testing.T, cs *fake.Clientset) int {
	t.Helper()
	l, err := cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return len(l.Items)
}

// runSigner runs the masters' signer on cs with a CA until the test ends;
// skew moves its clock.
func runSigner(t *testing.T, cs *fake.Clientset, skew time.Duration) *x509.Certificate {
	t.Helper()
	ca, caKey := testCA(t, "etcd-ca")
	caCert, caKeyFile := writeCA(t, t.TempDir(), ca, caKey)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		signer.New(signer.Config{Resync: 50 * time.Millisecond, Now: func() time.Time { return time.Now().Add(skew) },
			EtcdCA: func() (string, string, error) { return caCert, caKeyFile, nil }}).Lead(ctx, cs, nil)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ca
}

// TestRoundClockBehind: a node whose clock is 10 minutes behind the
// signer's (which backdates by 5) writes a certificate it reads as not
// yet valid; the round says so, and the next rounds wait for the backoff
// instead of asking again each time.
func TestRoundClockBehind(t *testing.T) {
	cs := apiserverFor("w1", nodeObj("w1", "10.0.0.21", true))
	runSigner(t, cs, 10*time.Minute)
	now := time.Now()
	k := New(Config{NodeName: "w1", Dir: t.TempDir(), Wait: 10 * time.Second, Backoff: time.Minute, Now: func() time.Time { return now }, IdentityKubeconfig: "-"})
	err := k.Round(context.Background(), cs)
	if err == nil || !strings.Contains(err.Error(), "clock") {
		t.Fatalf("Round = %v; want the written certificate refused, naming the clock", err)
	}
	posted := csrCount(t, cs)
	for range 3 {
		now = now.Add(10 * time.Second)
		_ = k.Round(context.Background(), cs)
	}
	if got := csrCount(t, cs); got != posted {
		t.Errorf("%d more requests within the backoff; want none", got-posted)
	}
}

// TestRoundNoSigner: a request nobody answers times out; the backoff
// counts from the timeout, so the next round does not post another.
func TestRoundNoSigner(t *testing.T) {
	cs := apiserverFor("w1", nodeObj("w1", "10.0.0.21", true))
	// A Wait longer than the Backoff, on the real clock: counted from
	// the round's start, the backoff would be over when the wait ends.
	k := New(Config{NodeName: "w1", Dir: t.TempDir(), Wait: 300 * time.Millisecond, Backoff: 200 * time.Millisecond, IdentityKubeconfig: "-"})
	if err := k.Round(context.Background(), cs); err == nil {
		t.Fatal("Round with no signer succeeded")
	}
	if err := k.Round(context.Background(), cs); err != nil || csrCount(t, cs) != 1 {
		t.Errorf("the round right after the timeout: %v, %d requests; want no second one", err, csrCount(t, cs))
	}
}

// TestReadIncomplete: a pair a member could not use reads as an error, so
// the node asks again: a key missing or not the certificate's, a peer
// certificate that is not the server's.
func TestReadIncomplete(t *testing.T) {
	ca, caKey := testCA(t, "etcd-ca")
	write := func(t *testing.T) string {
		dir := t.TempDir()
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		leaf := leafWithKey(t, ca, caKey, key)
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := Write(dir, encode(leaf), encode(ca), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	if p, err := Read(write(t)); err != nil || p == nil || !p.CA.Equal(ca) {
		t.Fatalf("Read of a whole pair = %+v, %v", p, err)
	}
	other := write(t)
	cases := map[string]func(dir string){
		"server.key gone":    func(dir string) { os.Remove(filepath.Join(dir, "server.key")) },
		"peer.key gone":      func(dir string) { os.Remove(filepath.Join(dir, "peer.key")) },
		"another key":        func(dir string) { copyFile(t, filepath.Join(other, "server.key"), filepath.Join(dir, "server.key")) },
		"peer.crt another's": func(dir string) { copyFile(t, filepath.Join(other, "peer.crt"), filepath.Join(dir, "peer.crt")) },
		"peer pair another's": func(dir string) {
			copyFile(t, filepath.Join(other, "peer.crt"), filepath.Join(dir, "peer.crt"))
			copyFile(t, filepath.Join(other, "peer.key"), filepath.Join(dir, "peer.key"))
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			dir := write(t)
			spoil(dir)
			if p, err := Read(dir); err == nil {
				t.Errorf("Read = %+v, nil; want an error", p)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// leafWithKey is a member certificate of ca for key, valid now.
func leafWithKey(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, key *ecdsa.PrivateKey) *x509.Certificate {
	t.Helper()
	return leafFor(t, ca, caKey, key, "w1", nil, time.Now().Add(-time.Hour), 2*time.Hour)
}

func TestForKey(t *testing.T) {
	ca, caKey := testCA(t, "etcd-ca")
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err := forKey(leafWithKey(t, ca, caKey, key), key); err != nil {
		t.Errorf("its own key: %v", err)
	}
	if err := forKey(leafWithKey(t, ca, caKey, other), key); err == nil {
		t.Error("another key's certificate accepted")
	}
	if err := forKey(ca, caKey); err == nil {
		t.Error("a CA accepted as the member's certificate")
	}
}

// testCluster is the API the identity's kubeconfig names in tests.
func testCluster() (string, []byte, error) {
	return "https://10.0.0.1:6443", []byte("the cluster CA's PEM"), nil
}

// runControllerManager signs the approved requests of the apiserver's
// client signer with a cluster CA, as the controller-manager's
// csrsigning controller does, until ctx ends; it returns the CA.
func runControllerManager(t *testing.T, ctx context.Context, cs *fake.Clientset) *x509.Certificate {
	t.Helper()
	ca, caKey := testCA(t, "kubernetes")
	go func() {
		api := cs.CertificatesV1().CertificateSigningRequests()
		for ctx.Err() == nil {
			l, _ := api.List(ctx, metav1.ListOptions{})
			for _, r := range l.Items {
				if r.Spec.SignerName != signer.IdentitySignerName || len(r.Status.Certificate) > 0 || len(r.Status.Conditions) == 0 ||
					r.Status.Conditions[0].Type != certificatesv1.CertificateApproved {
					continue
				}
				blk, _ := pem.Decode(r.Spec.Request)
				req, err := x509.ParseCertificateRequest(blk.Bytes)
				if err != nil {
					t.Error(err)
					return
				}
				life := time.Duration(*r.Spec.ExpirationSeconds) * time.Second
				tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: req.Subject, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(life),
					KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
				der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, req.PublicKey, caKey)
				if err != nil {
					t.Error(err)
					return
				}
				r.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
				_, _ = api.UpdateStatus(ctx, &r, metav1.UpdateOptions{})
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return ca
}

// checkIdentity: the kubeconfig at path is the checkpointer's, signed by
// ca, with the key beside it, for the month the keeper asked, naming
// testCluster's server and CA, mode 0600.
func checkIdentity(t *testing.T, path string, ca *x509.Certificate) {
	t.Helper()
	cert, err := ReadIdentity(path)
	if err != nil || cert == nil {
		t.Fatalf("ReadIdentity = %v, %v; want the identity", cert, err)
	}
	if err := cert.CheckSignatureFrom(ca); err != nil || cert.Subject.CommonName != btypes.CheckpointerUser {
		t.Errorf("the identity: CN %q, signature %v; want %s's, by the cluster CA", cert.Subject.CommonName, err, btypes.CheckpointerUser)
	}
	if life := time.Until(cert.NotAfter); life < IdentityLife-time.Hour || life > IdentityLife {
		t.Errorf("the identity lives %s more; want about %s", life, IdentityLife)
	}
	server, caPEM, err := ClusterOf(path)
	if wantServer, wantCA, _ := testCluster(); err != nil || server != wantServer || string(caPEM) != string(wantCA) {
		t.Errorf("ClusterOf = %q, %q, %v; want testCluster's", server, caPEM, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the identity's kubeconfig: %v, %v; want mode 0600", fi, err)
	}
	if d := DecideIdentity(IdentityFacts{Labelled: true, Cert: cert, Now: time.Now()}); d.Ask {
		t.Errorf("after the round, DecideIdentity = %+v; want nothing to ask", d)
	}
}
