package node

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
)

// TestKubeconfigClientCert: the router's probes present the client
// certificate the kubeconfig holds now, and the last good one while the
// file is not a valid kubeconfig.
func TestKubeconfigClientCert(t *testing.T) {
	path := filepath.Join(t.TempDir(), "admin.conf")
	write := func(host string) tls.Certificate {
		t.Helper()
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:6443"}
		cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: certPEM, ClientKeyData: keyPEM}
		cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
		cfg.CurrentContext = "c"
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	initial := write("a")
	get := kubeconfigClientCert(path, initial)
	same := func(a *tls.Certificate, b tls.Certificate) bool {
		return string(a.Certificate[0]) == string(b.Certificate[0])
	}
	if c, _ := get(nil); !same(c, initial) {
		t.Fatal("not the kubeconfig's certificate")
	}
	renewed := write("b")
	if c, _ := get(nil); !same(c, renewed) {
		t.Fatal("the renewed certificate is not presented")
	}
	if err := os.WriteFile(path, []byte("not: [a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, _ := get(nil); !same(c, renewed) {
		t.Fatal("a broken kubeconfig lost the last good certificate")
	}
}
