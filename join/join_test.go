package join

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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bootlet/bootlet/manifests"
)

const testHash = "sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"

func TestJoinFlagsValidate(t *testing.T) {
	good := func() Options {
		return Options{Endpoint: "192.0.2.10:6443", Token: "abcdef.0123456789abcdef", CACertHashes: []string{testHash}, Out: "/etc/kubernetes", Timeout: time.Minute,
			CRISocket: "unix:///run/containerd/containerd.sock"}
	}
	for _, c := range []struct {
		name   string
		change func(*Options)
		want   string // substring of the error; "" accepts
	}{
		{"good", func(*Options) {}, ""},
		{"a DNS endpoint", func(f *Options) { f.Endpoint = "api.example:6443" }, ""},
		{"an IPv6 endpoint", func(f *Options) { f.Endpoint = "[2001:db8::1]:6443" }, ""},
		{"two hashes", func(f *Options) {
			f.CACertHashes = append(f.CACertHashes, strings.ToUpper(testHash[:7])+testHash[7:])
		}, ""},
		{"a URL endpoint", func(f *Options) { f.Endpoint = "https://192.0.2.10:6443" }, "want HOST:PORT"},
		{"no port", func(f *Options) { f.Endpoint = "192.0.2.10" }, "want HOST:PORT"},
		{"no host", func(f *Options) { f.Endpoint = ":6443" }, "want HOST:PORT"},
		{"no token", func(f *Options) { f.Token = "" }, "--token"},
		{"upper-case token", func(f *Options) { f.Token = "ABCDEF.0123456789abcdef" }, "--token"},
		{"short secret", func(f *Options) { f.Token = "abcdef.0123456789" }, "--token"},
		{"no hash", func(f *Options) { f.CACertHashes = nil }, "--discovery-token-ca-cert-hash is required"},
		{"short hash", func(f *Options) { f.CACertHashes = []string{"sha256:abcd"} }, "expected a 32 byte SHA-256 hash"},
		{"no format", func(f *Options) { f.CACertHashes = []string{testHash[7:]} }, "invalid hash"},
		{"md5", func(f *Options) { f.CACertHashes = []string{"md5:" + testHash[7:]} }, "unknown hash format"},
		{"no out", func(f *Options) { f.Out = "" }, "--out"},
		{"no timeout", func(f *Options) { f.Timeout = 0 }, "--discovery-timeout"},
		{"a relative out", func(f *Options) { f.Out = "worker" }, ""},
		{"a pod logs dir", func(f *Options) { f.PodLogsDir = "/var/log/worker-pods" }, ""},
		{"no CRI socket", func(f *Options) { f.CRISocket = "" }, "--cri-socket"},
		{"a TCP CRI endpoint", func(f *Options) { f.CRISocket = "tcp://127.0.0.1:1234" }, "--cri-socket"},
		{"a CRI socket path without unix://", func(f *Options) { f.CRISocket = "/run/containerd/containerd.sock" }, "--cri-socket"},
		{"a relative CRI socket", func(f *Options) { f.CRISocket = "unix://run/containerd.sock" }, "--cri-socket"},
		{"a relative pod logs dir", func(f *Options) { f.PodLogsDir = "logs" }, "--pod-logs-dir"},
		{"no static pod path", func(f *Options) { f.StaticPodPath = "" }, ""},
		{"a relative static pod path", func(f *Options) { f.StaticPodPath = "manifests" }, "--kubelet-static-pod-path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := good()
			c.change(&f)
			err := f.Validate()
			if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
				t.Fatalf("validate: %v, want %q", err, c.want)
			}
			// A bad token is never echoed: it may be a real one mistyped.
			if err != nil && f.Token != "" && strings.Contains(err.Error(), f.Token) {
				t.Errorf("the error repeats the Token: %v", err)
			}
		})
	}
}

// TestJoinConfiguration: kubeadm's token discovery with the CA pinned, and
// the same token for the TLS bootstrap.
func TestJoinConfiguration(t *testing.T) {
	f := Options{Endpoint: "192.0.2.10:6443", Token: "abcdef.0123456789abcdef", CACertHashes: []string{testHash}, Out: "/x", Timeout: 42 * time.Second}
	jc := f.joinConfiguration()
	bt := jc.Discovery.BootstrapToken
	if bt == nil || bt.Token != f.Token || bt.APIServerEndpoint != f.Endpoint || len(bt.CACertHashes) != 1 || bt.CACertHashes[0] != testHash ||
		bt.UnsafeSkipCAVerification || jc.Discovery.TLSBootstrapToken != f.Token || jc.Discovery.File != nil ||
		jc.Timeouts == nil || jc.Timeouts.Discovery.Duration != 42*time.Second {
		t.Errorf("join configuration %+v, token discovery %+v", jc, bt)
	}
}

func TestJoinCommandLine(t *testing.T) {
	for _, c := range []struct {
		hashes []string
		want   string
	}{
		{[]string{testHash}, "bootlet join 192.0.2.10:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash " + testHash},
		{[]string{testHash, "sha256:ff"}, "bootlet join 192.0.2.10:6443 --token abcdef.0123456789abcdef --discovery-token-ca-cert-hash " + testHash + " --discovery-token-ca-cert-hash sha256:ff"},
	} {
		if got := joinCommandLine("192.0.2.10:6443", "abcdef.0123456789abcdef", c.hashes); got != c.want {
			t.Errorf("joinCommandLine: %q, want %q", got, c.want)
		}
	}
}

func TestAPIEndpoint(t *testing.T) {
	for _, c := range []struct{ server, want, err string }{
		{"https://192.0.2.10:6443", "192.0.2.10:6443", ""},
		{"https://api.example", "api.example:443", ""},
		{"https://[2001:db8::1]:6443", "[2001:db8::1]:6443", ""},
		{"http://192.0.2.10:6443", "", "want https://"},
		{"192.0.2.10:6443", "", "want https://"},
		{"https://:6443", "", "want https://"},
	} {
		got, err := apiEndpoint(c.server)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("apiEndpoint(%q) = %q, %v; want %q, %q", c.server, got, err, c.want, c.err)
		}
	}
}

// testKubeletCert writes a kubelet-client-current.pem as the kubelet does
// (certificate and key in one file) under dir, valid from notBefore to
// notAfter, and kubelet.conf naming it; with otherKey, the key is not the
// certificate's.
func testKubeletCert(t *testing.T, dir string, notBefore, notAfter time.Time, otherKey bool) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "system:node:w1", Organization: []string{"system:nodes"}},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if otherKey {
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pemPath := filepath.Join(dir, "pki", "kubelet-client-current.pem")
	if err := os.MkdirAll(filepath.Dir(pemPath), 0o755); err != nil {
		t.Fatal(err)
	}
	data := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})...)
	if err := os.WriteFile(pemPath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return writeTestKubeconfig(t, dir, &clientcmdapi.AuthInfo{ClientCertificate: pemPath, ClientKey: pemPath})
}

// writeTestKubeconfig writes dir/kubelet.conf with user u.
func writeTestKubeconfig(t *testing.T, dir string, u *clientcmdapi.AuthInfo) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["default-cluster"] = &clientcmdapi.Cluster{Server: "https://192.0.2.10:6443", CertificateAuthorityData: []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")}
	cfg.AuthInfos["default-auth"] = u
	cfg.Contexts["default-context"] = &clientcmdapi.Context{Cluster: "default-cluster", AuthInfo: "default-auth"}
	cfg.CurrentContext = "default-context"
	path := filepath.Join(dir, "kubelet.conf")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestFinishJoin: bootstrap-kubelet.conf goes only once kubelet.conf names
// a certificate and key of the kubelet's own that are a pair, valid now,
// and that the apiserver authenticates as a node; in every other case it
// stays, and the error says why.
func TestFinishJoin(t *testing.T) {
	now := time.Now()
	node := func(context.Context, *rest.Config) (authenticationv1.UserInfo, error) {
		return authenticationv1.UserInfo{Username: "system:node:w1", Groups: []string{"system:nodes", "system:authenticated"}}, nil
	}
	for _, c := range []struct {
		name   string
		setup  func(t *testing.T, dir string)
		review UserReviewer
		want   string // substring of the error; "" removes the file
	}{
		{"the kubelet's certificate", func(t *testing.T, dir string) {
			testKubeletCert(t, dir, now.Add(-time.Minute), now.Add(time.Hour), false)
		}, node, ""},
		{"no kubelet.conf yet", func(*testing.T, string) {}, node, "the kubelet has not written"},
		{"kubelet.conf with a token", func(t *testing.T, dir string) {
			writeTestKubeconfig(t, dir, &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"})
		}, node, "names no client certificate and key"},
		{"its certificate file missing", func(t *testing.T, dir string) {
			writeTestKubeconfig(t, dir, &clientcmdapi.AuthInfo{ClientCertificate: filepath.Join(dir, "pki", "none.pem"), ClientKey: filepath.Join(dir, "pki", "none.pem")})
		}, node, "none.pem"},
		{"an expired certificate", func(t *testing.T, dir string) {
			testKubeletCert(t, dir, now.Add(-2*time.Hour), now.Add(-time.Hour), false)
		}, node, "expired at"},
		{"a certificate not valid yet", func(t *testing.T, dir string) {
			testKubeletCert(t, dir, now.Add(time.Hour), now.Add(2*time.Hour), false)
		}, node, "is not valid before"},
		{"a key that is not the certificate's", func(t *testing.T, dir string) {
			testKubeletCert(t, dir, now.Add(-time.Minute), now.Add(time.Hour), true)
		}, node, "private key does not match public key"},
		{"refused by the apiserver", func(t *testing.T, dir string) {
			testKubeletCert(t, dir, now.Add(-time.Minute), now.Add(time.Hour), false)
		}, func(context.Context, *rest.Config) (authenticationv1.UserInfo, error) {
			return authenticationv1.UserInfo{}, errors.New("Unauthorized")
		}, "the apiserver does not accept"},
		{"not a node", func(t *testing.T, dir string) {
			testKubeletCert(t, dir, now.Add(-time.Minute), now.Add(time.Hour), false)
		}, func(context.Context, *rest.Config) (authenticationv1.UserInfo, error) {
			return authenticationv1.UserInfo{Username: "system:bootstrap:abcdef", Groups: []string{"system:bootstrappers"}}, nil
		}, "not as a node"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			bootstrap := filepath.Join(dir, manifests.BootstrapKubeletKubeconfig)
			if err := os.WriteFile(bootstrap, []byte("token: abcdef.0123456789abcdef\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			c.setup(t, dir)
			var out bytes.Buffer
			err := Finish(context.Background(), &out, dir, filepath.Join(dir, "kubelet.conf"), 0, time.Millisecond, c.review)
			_, statErr := os.Stat(bootstrap)
			if c.want == "" {
				if err != nil || !os.IsNotExist(statErr) || !strings.Contains(out.String(), "removed "+bootstrap) {
					t.Fatalf("finish: %v, %s still there: %v\n%s", err, bootstrap, statErr == nil, out.String())
				}
				// Again: nothing left to do, and no error.
				out.Reset()
				if err := Finish(context.Background(), &out, dir, filepath.Join(dir, "kubelet.conf"), 0, time.Millisecond, c.review); err != nil || !strings.Contains(out.String(), "gone already") {
					t.Errorf("finish again: %v\n%s", err, out.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "kept "+bootstrap) {
				t.Errorf("finish: %v, want kept and %q\n%s", err, c.want, out.String())
			}
			if statErr != nil {
				t.Errorf("finish removed %s: %v", bootstrap, statErr)
			}
		})
	}
}

// TestFinishJoinWaits: finish waits for the kubelet's TLS bootstrap, and
// removes the file once the certificate is there.
func TestFinishJoinWaits(t *testing.T) {
	dir := t.TempDir()
	bootstrap := filepath.Join(dir, manifests.BootstrapKubeletKubeconfig)
	if err := os.WriteFile(bootstrap, []byte("token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The kubelet writes its kubeconfig after its certificate, by a rename.
	staged := testKubeletCert(t, t.TempDir(), time.Now().Add(-time.Minute), time.Now().Add(time.Hour), false)
	done := make(chan error)
	go func() {
		time.Sleep(100 * time.Millisecond)
		done <- os.Rename(staged, filepath.Join(dir, "kubelet.conf"))
	}()
	var out bytes.Buffer
	err := Finish(context.Background(), &out, dir, filepath.Join(dir, "kubelet.conf"), 10*time.Second, 10*time.Millisecond,
		func(context.Context, *rest.Config) (authenticationv1.UserInfo, error) {
			return authenticationv1.UserInfo{Username: "system:node:w1", Groups: []string{"system:nodes"}}, nil
		})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err != nil || !strings.Contains(out.String(), "waiting for the kubelet's TLS bootstrap: the kubelet has not written") {
		t.Fatalf("finish: %v\n%s", err, out.String())
	}
	if _, err := os.Stat(bootstrap); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", bootstrap, err)
	}
}
