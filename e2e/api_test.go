//go:build e2e

package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// TestInformerSeesPodLifecycle: a client-go shared informer (list + watch,
// over the TCP listener with the minted kubeconfig) sees a pod's add, its
// status updates, and its deletion.
func TestInformerSeesPodLifecycle(t *testing.T) {
	c := StartContainerd(t)
	b := StartBootlet(t, c, "--listen", "127.0.0.1:0")
	k := newKubectlEnv(t, b)
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	record := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s)
	}
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o interface{}) { record("ADD " + o.(*v1.Pod).Name) },
		UpdateFunc: func(_, o interface{}) {
			p := o.(*v1.Pod)
			record("UPDATE " + p.Name + " " + string(p.Status.Phase))
		},
		DeleteFunc: func(o interface{}) {
			if p, ok := o.(*v1.Pod); ok {
				record("DELETE " + p.Name)
			}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer never synced")
	}
	b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: inf}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - {name: main, image: docker.io/library/busybox:1.36, command: ["sleep", "3600"]}
`)
	b.WaitPod(t, "default", "inf", 60*time.Second, "Running", Running)
	if err := b.Client.CoreV1().Pods("default").Delete(context.Background(), "inf", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 60*time.Second, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		all := strings.Join(seen, "\n")
		return strings.Contains(all, "ADD inf") && strings.Contains(all, "UPDATE inf Running") && strings.Contains(all, "DELETE inf"), all
	})
	// The lister agrees with the API.
	if _, err := factory.Core().V1().Pods().Lister().Pods("default").Get("inf"); err == nil {
		t.Fatal("lister still has the deleted pod")
	}
}

// TestTCPRequiresClientCert: the TCP listener refuses clients without a
// certificate and with one from another CA; the socket is 0600; minting
// credentials is not served over TCP.
func TestTCPRequiresClientCert(t *testing.T) {
	c := StartContainerd(t)
	b := StartBootlet(t, c, "--listen", "127.0.0.1:0")
	k := newKubectlEnv(t, b)
	cfg, err := clientcmd.LoadFromFile(k.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cluster := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cluster.CertificateAuthorityData) {
		t.Fatal("kubeconfig has no CA data")
	}
	get := func(certs []tls.Certificate, path string) (*http.Response, error) {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
		return client.Get(cluster.Server + path)
	}
	if resp, err := get(nil, "/api/v1/pods"); err == nil {
		resp.Body.Close()
		t.Fatalf("no client certificate: got %d, want a refused handshake", resp.StatusCode)
	}
	// A certificate from another CA.
	otherCAKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, otherCAKey.Public(), otherCAKey)
	otherCA, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "bootlet-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	leafDER, _ := x509.CreateCertificate(rand.Reader, leafTmpl, otherCA, key.Public(), otherCAKey)
	if resp, err := get([]tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}}, "/api/v1/pods"); err == nil {
		resp.Body.Close()
		t.Fatalf("certificate from another CA: got %d, want a refused handshake", resp.StatusCode)
	}
	// The minted certificate works, but not for minting more over TCP.
	auth := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	good, err := tls.X509KeyPair(auth.ClientCertificateData, auth.ClientKeyData)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := get([]tls.Certificate{good}, "/api/v1/pods")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("minted certificate: %v %v", err, resp)
	}
	resp.Body.Close()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{good}}}}
	resp, err = client.Post(cluster.Server+"/bootlet/v1/kubeconfig", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/bootlet/v1/kubeconfig over TCP: %d, want 404", resp.StatusCode)
	}
	fi, err := os.Stat(b.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %o, want 0600", fi.Mode().Perm())
	}
	// The PKI is reused across restarts: the old kubeconfig still works.
	b.Stop()
	b.Start(t)
	out, err := b.CLI(t, "kubeconfig")
	if err != nil {
		t.Fatal(err, out)
	}
	cfg2, err := clientcmd.Load([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg2.Clusters[cfg2.Contexts[cfg2.CurrentContext].Cluster].CertificateAuthorityData) != string(cluster.CertificateAuthorityData) {
		t.Fatal("the CA changed across a restart")
	}
	// Metrics and health over the socket.
	if _, err := b.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	body, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil || !strings.Contains(string(body), "bootlet_api_request_duration_seconds") || !strings.Contains(string(body), `bootlet_pods{phase="Running"}`) {
		t.Fatalf("/metrics: %v\n%.2000s", err, body)
	}
	if body, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/healthz").DoRaw(context.Background()); err != nil || string(body) != "ok" {
		t.Fatalf("/healthz: %v %s", err, body)
	}
}
