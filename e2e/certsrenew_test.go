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
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"

	"github.com/bootlet/bootlet/certificates"
	"github.com/bootlet/bootlet/credmirror"
	"github.com/bootlet/bootlet/manifests"
)

// TestCertsRenew is the online renewal of certificates on a self-hosted
// master with
// a kubelet (as TestLifecycle's steps 1 to 4 set it up, with the daemon's
// TCP listener on): `bootlet-tools certs renew all` under the 50 ms
// keep-alive probe client renews every leaf in every copy (files,
// kubeconfigs, the Secrets in the apiserver, the checkpoint, the
// apiserver's and the daemon's served certificates: the daemon keeps its
// PID; its checkpointer reconnects with the renewed kubeconfig), rolls
// the controller-manager and the scheduler, and fails no
// request; check-expiration then finds no differing copy. Then the
// automatic renewal: the daemon restarted with --cert-renew-before beyond
// every validity renews everything at start and records a
// CertificatesRenewed event. Last, the kubelet's client certificate
// rotation: its configuration turns it on, and a CSR of the node's own
// client certificate is approved and signed by the controller-manager.
func TestCertsRenew(t *testing.T) {
	ctx := context.Background()
	start := time.Now()
	rc := startRenewCluster(t)
	k, b, assets, admin, listen, adminClient := rc.k, rc.b, rc.assets, rc.admin, rc.listen, rc.adminClient
	setup := time.Since(start)

	// Before.
	adminCfg, err := clientcmd.BuildConfigFromFlags("", admin)
	if err != nil {
		t.Fatal(err)
	}
	daemonCA := filepath.Join(b.Dir, "pki", "ca.crt")
	before := leafSerials(t, assets)
	apiBefore, daemonBefore := apiServedSerial(t, adminCfg), daemonServedSerial(t, listen, daemonCA)
	if apiBefore != before[manifests.APIServer] {
		t.Fatalf("the apiserver serves serial %s, pki/apiserver.crt is %s", apiBefore, before[manifests.APIServer])
	}
	pid := b.cmd.Process.Pid
	rolledBefore := map[string]map[types.UID]bool{}
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		rolledBefore[name] = podUIDs(t, adminClient, name)
	}

	// The renewal, under the keep-alive probe client.
	probe := StartProber(t, "keep-alive during certs renew", admin, true)
	renewStart := time.Now()
	cmd := exec.Command(Bin(t, "bootlet-tools"), "certs", "renew", "all", "--asset-dir", assets, "--root-dir", b.Dir, "--timeout", "4m")
	out, err := cmd.CombinedOutput()
	renewTook := time.Since(renewStart)
	t.Logf("bootlet-tools certs renew all (%s):\n%s", renewTook.Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("certs renew all: %v", err)
	}
	time.Sleep(3 * time.Second)
	res := probe.Stop()
	if res.Requests < 100 || res.Failed != 0 {
		t.Errorf("the keep-alive probe client saw %d failed requests of %d during the renewal%s", res.Failed, res.Requests, failuresSuffix(res))
	}

	// Every copy is new.
	after := leafSerials(t, assets)
	for name, s := range before {
		if after[name] == s {
			t.Errorf("pki/%s.crt: serial %s not renewed", name, s)
		}
	}
	if got := apiServedSerial(t, adminCfg); got != after[manifests.APIServer] {
		t.Errorf("the apiserver serves serial %s after the renewal, want %s", got, after[manifests.APIServer])
	}
	daemonFile, err := certutil.CertsFromFile(filepath.Join(b.Dir, "pki", "apiserver.crt"))
	if err != nil {
		t.Fatal(err)
	}
	daemonWant := daemonFile[0].SerialNumber.String()
	if daemonWant == daemonBefore {
		t.Errorf("the daemon's serving certificate file was not renewed (serial %s)", daemonWant)
	}
	Eventually(t, 10*time.Second, func() (bool, string) {
		got := daemonServedSerial(t, listen, daemonCA)
		return got == daemonWant, fmt.Sprintf("the daemon's listener serves serial %s, want the renewed %s", got, daemonWant)
	})
	if b.cmd.Process.Pid != pid || b.cmd.ProcessState != nil {
		t.Errorf("the daemon restarted: PID %d, was %d (%v)", b.cmd.Process.Pid, pid, b.cmd.ProcessState)
	}
	// The daemon's checkpointer uses the renewed bootlet-checkpointer.conf.
	Eventually(t, 30*time.Second, func() (bool, string) {
		log, _ := os.ReadFile(b.LogPath())
		return strings.Contains(string(log), "Checkpointer kubeconfig changed; reconnecting"), "the daemon's checkpointer did not reconnect with the renewed kubeconfig"
	})
	s, err := adminClient.CoreV1().Secrets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := pemSerial(t, s.Data["apiserver.crt"]); got != after[manifests.APIServer] {
		t.Errorf("the apiserver's Secret holds apiserver.crt serial %s, want %s", got, after[manifests.APIServer])
	}
	// The pods' copy on this master's disk follows the Secret; the
	// checkpoint carries no copy of the keys (it mounts the same directory).
	tgt, ok, err := credmirror.TargetOf(s)
	if err != nil || !ok {
		t.Fatalf("secret kube-apiserver has no mirror target: %v", err)
	}
	if mirrored, err := credmirror.Read(tgt); err != nil {
		t.Errorf("this master's mirror of kube-apiserver: %v", err)
	} else if got := pemSerial(t, mirrored["apiserver.crt"]); got != after[manifests.APIServer] {
		t.Errorf("the mirror %s holds apiserver.crt serial %s, want %s", tgt.Dir, got, after[manifests.APIServer])
	}
	ck := StoredCheckpoint(t, b, "kube-system", "kube-apiserver")
	for _, cs := range ck.Secrets {
		if cs.Name == "kube-apiserver" {
			t.Errorf("the checkpoint of kube-system/kube-apiserver carries its credential Secret")
		}
	}
	assertCredentialsOffTheAPI(t, adminClient, kubeletConfOf(assets))
	for _, name := range []string{"kube-controller-manager", "kube-scheduler"} {
		d, err := adminClient.AppsV1().Deployments("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] == "" || d.Status.ReadyReplicas != *d.Spec.Replicas || d.Status.UpdatedReplicas != *d.Spec.Replicas {
			t.Errorf("deployment %s not restarted and rolled out: %v %+v", name, d.Spec.Template.Annotations, d.Status)
		}
		for uid := range podUIDs(t, adminClient, name) {
			if rolledBefore[name][uid] {
				t.Errorf("%s pod %s from before the renewal is still there", name, uid)
			}
		}
	}
	stdout, stderr, err := certsCheck(t, "--asset-dir", assets, "--root-dir", b.Dir, "--kubeconfig", admin, "-o", "json")
	if err != nil {
		t.Errorf("check-expiration after the renewal: %v\n%s", err, stderr)
	}
	var report certsReport
	if err := json.Unmarshal([]byte(stdout), &report); err != nil {
		t.Fatalf("check-expiration -o json: %v\n%s", err, stdout)
	}
	for _, row := range append(report.Certificates, report.CertificateAuthorities...) {
		if row.DiffersFrom != "" {
			t.Errorf("after the renewal %s (%s) differs from %s", row.Where, row.Name, row.DiffersFrom)
		}
	}
	if !strings.Contains(stdout, "(apiserver)") || !strings.Contains(stdout, `"mirror `) {
		t.Errorf("check-expiration did not read the apiserver's Secrets and this master's mirror:\n%s%s", stdout, stderr)
	}
	t.Logf("RENEW certs_renew_seconds=%.1f probe_requests=%d probe_failed=%d leaves=%d", renewTook.Seconds(), res.Requests, res.Failed, len(after))
	if t.Failed() {
		t.FailNow()
	}

	// The automatic renewal: a threshold beyond every leaf's validity
	// renews them all at the daemon's start.
	b.Args = append(b.Args, "--cert-renew-before", "9000h")
	b.Stop()
	autoStart := time.Now()
	b.Start(t)
	autoProbe := StartProber(t, "keep-alive during the automatic renewal", admin, true)
	var ev []v1.Event
	Eventually(t, 5*time.Minute, func() (bool, string) {
		ev = nodeEvents(t, b, "CertificatesRenewed")
		if warn := nodeEvents(t, b, "CertificateRenewalFailed"); len(warn) > 0 {
			return false, "CertificateRenewalFailed:" + eventsString(warn)
		}
		return len(ev) > 0, "no CertificatesRenewed event yet:\n" + tail(b.Log(), 3000)
	})
	autoTook := time.Since(autoStart)
	time.Sleep(3 * time.Second)
	autoRes := autoProbe.Stop()
	t.Logf("automatic renewal: CertificatesRenewed %s after the daemon's start: %s", autoTook.Round(time.Millisecond), ev[0].Message)
	auto := leafSerials(t, assets)
	for name, s := range after {
		if auto[name] == s {
			t.Errorf("pki/%s.crt: serial %s not renewed automatically", name, s)
		}
	}
	if !strings.Contains(ev[0].Message, "bootlet-serving") || !strings.Contains(ev[0].Message, "etcd/server") {
		t.Errorf("the event does not name what was renewed: %s", ev[0].Message)
	}
	if got := apiServedSerial(t, adminCfg); got != auto[manifests.APIServer] {
		t.Errorf("the apiserver serves serial %s after the automatic renewal, want %s", got, auto[manifests.APIServer])
	}
	if autoRes.Failed != 0 {
		t.Errorf("the keep-alive probe client saw %d failed requests of %d during the automatic renewal%s", autoRes.Failed, autoRes.Requests, failuresSuffix(autoRes))
	}

	// The kubelet rotates its client certificate through CSRs.
	kubeletLog, _ := os.ReadFile(k.LogPath())
	// client-go's certificate manager, at the kubelet's -v=2.
	if !strings.Contains(string(kubeletLog), "Certificate rotation deadline determined") {
		t.Errorf("the kubelet's log shows no client certificate rotation (rotateCertificates)")
	}
	if _, err := os.Stat(filepath.Join(k.RootDir, "pki", "kubelet-client-current.pem")); err != nil {
		t.Errorf("the kubelet's certificate store was not seeded from kubelet.conf: %v", err)
	}
	csrStart := time.Now()
	nodeCSRSigned(t, filepath.Join(assets, manifests.KubeletKubeconfig), k.NodeName)
	t.Logf("AUTO certs_auto_renew_seconds=%.1f probe_requests=%d probe_failed=%d; node CSR approved and signed in %s; setup %s, total %s",
		autoTook.Seconds(), autoRes.Requests, autoRes.Failed, time.Since(csrStart).Round(time.Millisecond), setup.Round(time.Second), time.Since(start).Round(time.Second))
}

// renewCluster is the self-hosted master TestCertsRenew and
// TestCertsRotateCA work on.
type renewCluster struct {
	c                           *Containerd
	k                           *Kubelet
	b                           *Bootlet
	assets, admin, listen, etcd string
	adminClient                 *kubernetes.Clientset
}

// startRenewCluster is TestLifecycle's steps 1 to 4 (first boot, the
// kubelet's adoption, the pivot, the apiserver's checkpoint stored), the
// daemon also listening on TCP.
func startRenewCluster(t *testing.T) *renewCluster {
	t.Helper()
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)
	ctx := context.Background()
	start := time.Now()

	c, k, assets := StartControlPlaneNode(t)
	// The kubelet's Secret volumes and its root outlive it as mounts: once
	// it and the daemon stopped, unmount them, before the instance
	// directory is removed.
	t.Cleanup(func() {
		k.Stop()
		unmountUnder(k.RootDir) // poddirs_test.go
		_ = syscall.Unmount(k.RootDir, syscall.MNT_DETACH)
	})
	admin := filepath.Join(assets, manifests.AdminKubeconfig)
	listen := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	b := StartBootlet(t, c,
		"--kubelet-healthz-url", fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort),
		"--kubelet-static-pod-path", k.ManifestDir,
		"--kubelet-root-dir", k.RootDir,
		"--pivot-kubeconfig", admin,
		"--self-hosted-assets", filepath.Join(assets, "self-hosted"),
		"--checkpointer-kubeconfig", filepath.Join(assets, manifests.CheckpointerKubeconfig),
		"--checkpointer-withdraw-after", lifecycleWithdrawAfter.String(),
		"--manifests-dir", filepath.Join(assets, "bootstrap-manifests"),
		"--listen", listen)
	reportCheckpointerAtCleanup(t, b, k)
	adminClient := AdminClient(t, assets)
	waitAPIReadyz(t, adminClient, 5*time.Minute)
	uids := WaitControlPlaneReady(t, b)
	AdoptControlPlane(t, b, c, k, uids)
	WaitBootstrapWithdrawn(t, b, adminClient, pivoted)
	waitSelfHosted(t, adminClient, b, k.NodeName, time.Time{}, true, "", 3*time.Minute)
	ds, err := adminClient.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitCheckpoint(t, b, adminClient, k.NodeName, containerImage(&ds.Spec.Template.Spec, "kube-apiserver"), 2*time.Minute)
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("self-hosted master with a checkpointed apiserver after %s", time.Since(start).Round(time.Millisecond))
	return &renewCluster{c: c, k: k, b: b, assets: assets, admin: admin, listen: listen, etcd: filepath.Join(c.Dir, "etcd"), adminClient: adminClient}
}

// leafSerials are the serials of the leaf certificates under ASSETS/pki,
// by name (apiserver, etcd/server, kubeconfig/admin, ...).
func leafSerials(t *testing.T, assets string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, c := range pkiCerts(t, assets) { // certs_test.go
		if !c.IsCA {
			out[name] = c.SerialNumber.String()
		}
	}
	if len(out) != len(certificates.RenewableCerts()) {
		t.Fatalf("%d leaves under %s, want %d", len(out), filepath.Join(assets, "pki"), len(certificates.RenewableCerts()))
	}
	return out
}

func pemSerial(t *testing.T, data []byte) string {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0].SerialNumber.String()
}

// apiServedSerial is the serial the apiserver of cfg serves, verified as
// its clients verify it.
func apiServedSerial(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return servedSerialAt(t, strings.TrimPrefix(cfg.Host, "https://"), tlsCfg)
}

// daemonServedSerial is the serial bootlet's TCP listener serves, verified
// with its CA. The listener wants a client certificate, but a TLS 1.3
// client has the server's before it sends its own.
func daemonServedSerial(t *testing.T, addr, caFile string) string {
	t.Helper()
	pool, err := certutil.NewPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ := net.SplitHostPort(addr)
	return servedSerialAt(t, addr, &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS13})
}

func servedSerialAt(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	return servedCertAt(t, addr, cfg).SerialNumber.String()
}

// servedCertAt is the certificate a TLS handshake with addr gets.
func servedCertAt(t *testing.T, addr string, cfg *tls.Config) *x509.Certificate {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// podUIDs are the UIDs of a self-hosted component's pods.
func podUIDs(t *testing.T, c *kubernetes.Clientset, component string) map[types.UID]bool {
	t.Helper()
	l, err := c.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app=" + component})
	if err != nil {
		t.Fatal(err)
	}
	out := map[types.UID]bool{}
	for _, p := range l.Items {
		out[p.UID] = true
	}
	return out
}

// nodeCSRSigned asks, as the node (kubelet.conf), for a new client
// certificate of its own as the kubelet's rotation does, and waits until
// the controller-manager approved (kubeadm's node-autoapprove binding) and
// signed it (--cluster-signing-*) with the cluster CA.
func nodeCSRSigned(t *testing.T, kubeletConf, node string) *x509.Certificate {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeletConf)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	req, err := certutil.MakeCSR(key, &pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	name, uid, err := csr.RequestCertificateWithContext(context.Background(), c, req, "", certificatesv1.KubeAPIServerClientKubeletSignerName, nil,
		[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, key)
	if err != nil {
		t.Fatalf("the node's CSR: %v", err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data, err := csr.WaitForCertificate(wctx, c, name, uid)
	if err != nil {
		t.Fatalf("the node's CSR %s was not approved and signed: %v", name, err)
	}
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil {
		t.Fatal(err)
	}
	if certs[0].Subject.CommonName != "system:node:"+node || certs[0].Issuer.CommonName != "kubernetes" {
		t.Errorf("the node's CSR got %s issued by %s", certs[0].Subject, certs[0].Issuer)
	}
	return certs[0]
}
