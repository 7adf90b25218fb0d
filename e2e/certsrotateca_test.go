//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"

	"github.com/bootlet/bootlet/manifests"
)

// TestCertsRotateCA runs docs/operations.md's CA rotation procedure once,
// for the cluster CA, on a self-hosted master with a kubelet, exactly as
// written: a new CA from a scratch render; phase A trusts both (old
// first, the old CA still signs), phase B lets the new CA sign (new
// first: render re-issues what the cluster CA signs), phase C drops the
// old CA after the kubelet's client certificate is the new CA's. Each
// phase is `bootlet render` with the original flags, `bootlet certs renew
// --expiring-within 1s` to push the Secrets, and a restart of the kubelet
// and the daemon (their kubeconfigs' CA data). Two keep-alive probe
// clients (every 50 ms) must see no failed request: one with the phase's
// new admin.conf through each push, one with the admin.conf from before
// the phase through the whole phase. The controller-manager signs CSRs
// with pki/ca-signing.crt (one certificate; it refuses a bundle), so it
// runs through every phase and signs with the new CA from phase B on. At
// the end every leaf the cluster CA signs, and a new node CSR, chains to
// the new CA only, the apiserver serves and accepts the new CA only (the
// original admin.conf is refused), the kubelet keeps its lease with a new-CA
// client certificate, check-expiration finds no differing copy (the
// daemon's checkpoint included), and the control plane is still
// self-hosted.
func TestCertsRotateCA(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	rc := startRenewCluster(t)
	k, b, assets := rc.k, rc.b, rc.assets
	pkiDir := filepath.Join(assets, manifests.PKIDir)
	caCrt, caKey := filepath.Join(pkiDir, "ca.crt"), filepath.Join(pkiDir, "ca.key")
	oldCA, oldAdmin := readFile(t, caCrt), readFile(t, rc.admin)

	// The new CA: a scratch render's.
	scratch := RenderControlPlane(t, filepath.Join(t.TempDir(), "assets"), filepath.Join(t.TempDir(), "etcd"), k.NodeName, AdvertiseAddress(t))
	newCA, newKey := readFile(t, filepath.Join(scratch, "pki", "ca.crt")), readFile(t, filepath.Join(scratch, "pki", "ca.key"))

	render := func() { RenderControlPlane(t, assets, rc.etcd, k.NodeName, AdvertiseAddress(t)) }
	push := func(phase string) {
		t.Helper()
		probe := StartProber(t, "keep-alive during phase "+phase, rc.admin, true)
		began := time.Now()
		out, err := exec.Command(Bin(t, "bootlet-tools"), "certs", "renew", "--expiring-within", "1s",
			"--asset-dir", assets, "--root-dir", b.Dir, "--timeout", "4m").CombinedOutput()
		t.Logf("phase %s: certs renew --expiring-within 1s (%s):\n%s", phase, time.Since(began).Round(time.Millisecond), out)
		if err != nil {
			t.Fatalf("phase %s: certs renew: %v", phase, err)
		}
		time.Sleep(2 * time.Second)
		res := probe.Stop()
		t.Logf("phase %s: the keep-alive probe client with the phase's new admin.conf, through certs renew: %d failed of %d requests", phase, res.Failed, res.Requests)
		if res.Requests < 20 || res.Failed != 0 {
			t.Errorf("phase %s: the keep-alive probe client saw %d failed requests of %d%s", phase, res.Failed, res.Requests, failuresSuffix(res))
		}
	}
	// A client that keeps the credentials it had before a phase (the
	// previous phase's admin.conf) is served throughout the phase: render,
	// the push, and the restarts of the kubelet and the daemon.
	startPhase := func(phase string) func() {
		t.Helper()
		probe := StartProber(t, "keep-alive with the previous admin.conf through phase "+phase, rc.admin, true)
		began := time.Now()
		return func() {
			t.Helper()
			res := probe.Stop()
			t.Logf("phase %s took %s; the keep-alive probe client with the admin.conf from before it: %d failed of %d requests", phase, time.Since(began).Round(time.Millisecond), res.Failed, res.Requests)
			if res.Requests < 20 || res.Failed != 0 {
				t.Errorf("phase %s: the probe client with the previous admin.conf saw %d failed requests of %d%s", phase, res.Failed, res.Requests, failuresSuffix(res))
			}
		}
	}
	restartClients := func(phase string) {
		t.Helper()
		began := time.Now()
		k.Stop()
		k.Start(t)
		b.Stop()
		b.Start(t)
		admin := AdminClient(t, assets)
		waitAPIReadyz(t, admin, 2*time.Minute)
		waitLeaseRenewed(t, admin, k.NodeName, began)
		t.Logf("phase %s: the kubelet and the daemon restarted, the kubelet renewed its lease, %s", phase, time.Since(began).Round(time.Millisecond))
	}

	// Phase A: trust both, the old CA still signs.
	endA := startPhase("A")
	writeFile(t, caCrt, append(append([]byte{}, oldCA...), newCA...), 0o644)
	render()
	if got := readFile(t, caCrt); string(got) != string(oldCA)+string(newCA) {
		t.Fatalf("render did not keep the bundle old+new in pki/ca.crt:\n%s", got)
	}
	push("A")
	s, err := rc.adminClient.CoreV1().Secrets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Data["ca.crt"]) != string(oldCA)+string(newCA) {
		t.Fatalf("phase A: the apiserver's Secret does not hold the bundle as ca.crt")
	}
	restartClients("A")
	endA()

	// Phase B: the new CA signs.
	endB := startPhase("B")
	writeFile(t, caCrt, append(append([]byte{}, newCA...), oldCA...), 0o644)
	writeFile(t, caKey, newKey, 0o600)
	render()
	push("B")
	newPool := x509.NewCertPool()
	newPool.AppendCertsFromPEM(newCA)
	cfg, err := clientcmd.BuildConfigFromFlags("", rc.admin)
	if err != nil {
		t.Fatal(err)
	}
	served := servedCert(t, cfg)
	if _, err := served.Verify(x509.VerifyOptions{Roots: newPool}); err != nil {
		t.Errorf("phase B: the apiserver's served certificate does not chain to the new CA: %v", err)
	}
	restartClients("B")
	endB()
	// The controller-manager's CSR signer (pki/ca-signing.crt, the new CA
	// alone now) signs with the new CA.
	if err := verifiesOnly(nodeCSRSigned(t, filepath.Join(assets, manifests.KubeletKubeconfig), k.NodeName), newPool, oldCA); err != nil {
		t.Errorf("phase B: a node CSR: %v", err)
	}

	// Phase C: drop the old CA, once the kubelet's client certificate is
	// the new CA's (seeded again from kubelet.conf).
	endC := startPhase("C")
	matches, _ := filepath.Glob(filepath.Join(k.RootDir, "pki", "kubelet-client-*.pem"))
	for _, m := range matches {
		if err := os.Remove(m); err != nil {
			t.Fatal(err)
		}
	}
	restartClients("C, the kubelet's certificate store emptied")
	kc, err := certutil.CertsFromFile(filepath.Join(k.RootDir, "pki", "kubelet-client-current.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if err := verifiesOnly(kc[0], newPool, oldCA); err != nil {
		t.Fatalf("phase C: the kubelet's client certificate: %v", err)
	}
	writeFile(t, caCrt, newCA, 0o644)
	render()
	push("C")
	restartClients("C")
	endC()

	// The old CA is gone everywhere: a client certificate it signed is
	// refused.
	oldCfg, err := clientcmd.RESTConfigFromKubeConfig(oldAdmin)
	if err != nil {
		t.Fatal(err)
	}
	oldCfg.TLSClientConfig.CAData, oldCfg.Timeout = newCA, 5*time.Second
	old, err := kubernetes.NewForConfig(oldCfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("the old CA's admin certificate is not refused: %v", err)
	}
	stdout, stderr, err := certsCheck(t, "--asset-dir", assets, "--root-dir", b.Dir, "--kubeconfig", rc.admin)
	if err != nil || strings.Contains(stdout, "differs from") {
		t.Errorf("check-expiration after the CA rotation: %v\n%s%s", err, stdout, stderr)
	}
	// Every leaf under pki/ that the cluster CA signs chains to the new CA
	// and none to the old; the new admin.conf works (AdminClient reads it).
	for _, base := range []string{manifests.APIServer, manifests.AdminClient, manifests.ControllerMgrClient,
		manifests.SchedulerClient, manifests.KubeletClient, manifests.CheckpointerClient} {
		cs, err := certutil.CertsFromFile(filepath.Join(pkiDir, base+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		if err := verifiesOnly(cs[0], newPool, oldCA); err != nil {
			t.Errorf("pki/%s.crt: %v", base, err)
		}
	}
	for _, f := range []string{"ca.crt", "ca-signing.crt"} {
		if got := readFile(t, filepath.Join(pkiDir, f)); string(got) != string(newCA) {
			t.Errorf("pki/%s is not the new CA alone", f)
		}
	}
	// The controller-manager signs with the new CA alone, the control plane
	// is self-hosted with Ready pods, and this master's mirror of the
	// apiserver's Secret holds the last one (certs renew waited for it;
	// check-expiration found no copy that differs).
	if err := verifiesOnly(nodeCSRSigned(t, filepath.Join(assets, manifests.KubeletKubeconfig), k.NodeName), newPool, oldCA); err != nil {
		t.Errorf("a node CSR after the rotation: %v", err)
	}
	if !strings.Contains(stdout, "mirror "+manifests.CredentialDir(assets, manifests.KubeAPIServer)) {
		t.Errorf("check-expiration lists no mirror copy of the apiserver's Secret:\n%s", stdout)
	}
	waitSelfHosted(t, AdminClient(t, assets), b, k.NodeName, time.Time{}, true, "", 3*time.Minute)
	t.Logf("CAROTATION total %s", time.Since(start).Round(time.Second))
}

// verifiesOnly says why cert does not chain to pool, or chains to the
// old CA (the PEM oldCA) as well.
func verifiesOnly(cert *x509.Certificate, pool *x509.CertPool, oldCA []byte) error {
	usages := []x509.ExtKeyUsage{x509.ExtKeyUsageAny}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: usages}); err != nil {
		return fmt.Errorf("%s (serial %s) does not chain to the new CA: %w", cert.Subject, cert.SerialNumber, err)
	}
	old := x509.NewCertPool()
	old.AppendCertsFromPEM(oldCA)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: old, KeyUsages: usages}); err == nil {
		return fmt.Errorf("%s (serial %s) chains to the old CA", cert.Subject, cert.SerialNumber)
	}
	return nil
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFile(t *testing.T, path string, data []byte, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, perm); err != nil {
		t.Fatal(err)
	}
}

// servedCert is the certificate the apiserver of cfg serves, verified as
// its clients verify it.
func servedCert(t *testing.T, cfg *rest.Config) *x509.Certificate {
	t.Helper()
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return servedCertAt(t, strings.TrimPrefix(cfg.Host, "https://"), tlsCfg)
}

// waitLeaseRenewed waits until the node's kubelet renewed its Lease after
// since: it reached the apiserver with its client certificate.
func waitLeaseRenewed(t *testing.T, c *kubernetes.Clientset, node string, since time.Time) {
	t.Helper()
	Eventually(t, time.Minute, func() (bool, string) {
		l, err := c.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.RenewTime == nil {
			return false, "the lease has no renewTime"
		}
		return l.Spec.RenewTime.After(since), fmt.Sprintf("the kubelet's lease was last renewed %s, before %s", l.Spec.RenewTime, since)
	})
}
