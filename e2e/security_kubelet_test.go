//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/manifests"
)

// TestSecurityKubeletAPI: the kubelet's API, which runs and execs into any
// pod, answers no one it should not. With the real control plane and the
// real kubelet, configured as make up's (render's generator):
// the kubelet's API refuses anonymous requests and every certificate the
// cluster CA signs (the controller-manager's here; the scheduler's and
// CSR-approved ones alike), on /pods and on /exec. A certificate of the
// kubelet client CA for a user RBAC does not bind is authenticated but
// refused (the apiserver authorizes, not AlwaysAllow). The apiserver's own
// kubelet client gets in, so `kubectl logs` through the apiserver works.
func TestSecurityKubeletAPI(t *testing.T) {
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)
	ctx := context.Background()

	c := StartContainerd(t)
	ImportControlPlaneImages(t, c)
	k := NewKubelet(t, c)
	t.Cleanup(k.Stop)
	assets := RenderControlPlane(t, filepath.Join(c.Dir, "assets"), filepath.Join(c.Dir, "etcd"), k.NodeName, AdvertiseAddress(t))
	admin := filepath.Join(assets, "admin.conf")
	k.UseAPIServer(t, filepath.Join(assets, "kubelet.conf"))
	// The pivot creates self-hosted/rbac.yaml (kubeadm's
	// kubeadm:apiserver-kubelet-client binding) as soon as the apiserver
	// answers: before the kubelet starts.
	b := StartBootlet(t, c,
		"--kubelet-healthz-url", fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort),
		"--kubelet-static-pod-path", k.ManifestDir,
		"--kubelet-root-dir", k.RootDir,
		"--pivot-kubeconfig", admin,
		"--self-hosted-assets", filepath.Join(assets, "self-hosted"),
		"--checkpointer-kubelet-pods-url=")
	t.Cleanup(func() {
		if t.Failed() {
			dumpControlPlane(t, b)
			t.Logf("--- kubelet log tail:\n%s", tail(k.Log(), 4000))
		}
	})
	if out, err := b.CLI(t, "apply", "-f", filepath.Join(assets, "bootstrap-manifests")); err != nil {
		t.Fatalf("bootlet apply: %v\n%s", err, out)
	}
	adminClient := AdminClient(t, assets)
	waitAPIReadyz(t, adminClient, 5*time.Minute)
	uids := WaitControlPlaneReady(t, b)
	Eventually(t, time.Minute, func() (bool, string) {
		_, err := adminClient.RbacV1().ClusterRoleBindings().Get(ctx, "kubeadm:apiserver-kubelet-client", metav1.GetOptions{})
		return err == nil, fmt.Sprintf("the apiserver's kubelet client binding: %v", err)
	})
	AdoptControlPlane(t, b, c, k, uids) // reads /pods with the apiserver's kubelet client
	if t.Failed() {
		t.FailNow()
	}

	etcdPod := "etcd-" + k.NodeName
	base := fmt.Sprintf("https://127.0.0.1:%d", k.Port)
	pki := filepath.Join(assets, manifests.PKIDir)
	clusterSigned := certClient(t, filepath.Join(pki, manifests.ControllerMgrClient+".crt"), filepath.Join(pki, manifests.ControllerMgrClient+".key"))
	intruderCert, intruderKey := issueKubeletClient(t, pki, "intruder")
	intruder := certClient(t, intruderCert, intruderKey)
	requests := []struct {
		name, method, path string
	}{
		{"/pods", http.MethodGet, "/pods"},
		{"/exec into etcd", http.MethodPost, "/exec/kube-system/" + etcdPod + "/etcd?command=ls&output=1&error=1"},
		{"/run in etcd", http.MethodPost, "/run/kube-system/" + etcdPod + "/etcd?cmd=ls"},
		{"/configz", http.MethodGet, "/configz"},
	}
	clients := []struct {
		name   string
		client *http.Client
		want   []int
	}{
		{"anonymous", certClient(t, "", ""), []int{http.StatusUnauthorized}},
		{"the controller-manager's certificate (cluster CA)", clusterSigned, []int{http.StatusUnauthorized}},
		{"a kubelet-client-CA certificate RBAC does not bind", intruder, []int{http.StatusForbidden}},
	}
	for _, cl := range clients {
		for _, r := range requests {
			code, body, err := kubeletRequest(ctx, cl.client, r.method, base+r.path)
			if err != nil {
				// The kubelet requests a client certificate without
				// verifying it in the handshake; a TLS error is a failure
				// of the test, not a refusal to count.
				t.Errorf("%s, %s: %v", cl.name, r.name, err)
				continue
			}
			ok := false
			for _, w := range cl.want {
				ok = ok || code == w
			}
			if !ok {
				t.Errorf("%s, %s: %d %s, want %v", cl.name, r.name, code, tail(body, 300), cl.want)
			} else {
				t.Logf("%s, %s: %d %s", cl.name, r.name, code, strings.TrimSpace(tail(body, 100)))
			}
		}
	}
	// The healthz stays open on 127.0.0.1 only (plain HTTP, no data).
	if code, _, err := kubeletRequest(ctx, &http.Client{Timeout: 5 * time.Second}, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort)); err != nil || code != http.StatusOK {
		t.Errorf("healthz: %d %v", code, err)
	}

	// kubectl logs through the apiserver: the apiserver reaches the kubelet
	// at the node's InternalIP with its kubelet client, authorized by RBAC.
	mirror := etcdPod
	Eventually(t, time.Minute, func() (bool, string) {
		data, err := adminClient.CoreV1().Pods("kube-system").GetLogs(mirror, &v1.PodLogOptions{Container: "etcd", TailLines: ptr.To[int64](5)}).DoRaw(ctx)
		return err == nil && len(data) > 0, fmt.Sprintf("logs of %s through the apiserver: %v %s", mirror, err, tail(string(data), 300))
	})
	out := run(t, Bin(t, "kubectl"), "--kubeconfig", admin, "-n", "kube-system", "logs", mirror, "-c", "etcd", "--tail=3")
	if strings.TrimSpace(out) == "" {
		t.Errorf("kubectl logs %s printed nothing", mirror)
	}
}

// certClient is an HTTPS client for the kubelet's API presenting the
// certificate at cert and key ("": none, an anonymous client).
func certClient(t testing.TB, cert, key string) *http.Client {
	t.Helper()
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the kubelet's self-signed serving cert on 127.0.0.1
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// issueKubeletClient signs a client certificate for user with render's
// kubelet client CA and returns its files.
func issueKubeletClient(t testing.TB, pki, user string) (string, string) {
	t.Helper()
	caData, err := os.ReadFile(filepath.Join(pki, manifests.KubeletClientCA+".crt"))
	if err != nil {
		t.Fatal(err)
	}
	cas, err := certutil.ParseCertsPEM(caData)
	if err != nil {
		t.Fatal(err)
	}
	caKey, err := keyutil.PrivateKeyFromFile(filepath.Join(pki, manifests.KubeletClientCA+".key"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: user},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, cas[0], key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := certutil.EncodeCertificates(parsed)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, keyFile := filepath.Join(dir, "intruder.crt"), filepath.Join(dir, "intruder.key")
	if err := os.WriteFile(cert, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, keyFile
}

// kubeletRequest sends one request and returns the status and body.
func kubeletRequest(ctx context.Context, c *http.Client, method, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(body), nil
}
