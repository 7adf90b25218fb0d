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
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate/csr"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	kubeletvalidation "k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	"k8s.io/kubernetes/pkg/kubelet/certificate/bootstrap"
	"k8s.io/kubernetes/pkg/kubelet/kubeletconfig/configfiles"
	utilfs "k8s.io/kubernetes/pkg/util/filesystem"
	"sigs.k8s.io/yaml"

	"github.com/bootlet/bootlet/csrapprover"
	"github.com/bootlet/bootlet/manifests"
)

// Private ports of TestWorkerJoinTLSBootstrap's control plane: none of
// ControlPlanePorts, so it runs next to a `make up` cluster or a bench.
const (
	joinAPIPort      = 36443
	joinEtcdClient   = 32379
	joinEtcdPeer     = 32380
	joinEtcdMetrics  = 32381
	joinCMSecurePort = 30257
)

// TestWorkerJoinTLSBootstrap proves a worker's join without a kubelet:
// `bootlet render`'s etcd, kube-apiserver and kube-controller-manager run as
// plain processes with the rendered flags (ports moved to private ones),
// the rendered join objects are created, `bootlet join print` and `bootlet
// join` give the worker its bootstrap kubeconfig, its kubelet configuration
// and the kubelet client CA (from kube-system/kubelet-config, which the
// token and nodes may read, anonymous users not), and the kubelet's own
// TLS bootstrap (pkg/kubelet/certificate/bootstrap.LoadClientCert) gets a
// client certificate that authenticates as system:node:NAME in
// system:nodes. A wrong CA hash, a wrong, unknown or expired token are
// refused and write nothing; the anonymous user reaches cluster-info and
// the health endpoints only; the token is in no log and no event.
func TestWorkerJoinTLSBootstrap(t *testing.T) {
	RequirePortsFree(t, []int{joinAPIPort, joinEtcdClient, joinEtcdPeer, joinEtcdMetrics, joinCMSecurePort})
	addr := AdvertiseAddress(t)
	dir := t.TempDir()
	assets := RenderControlPlane(t, filepath.Join(dir, "assets"), filepath.Join(dir, "etcd"), "join-master", addr,
		"--addons=", fmt.Sprintf("--api-server-port=%d", joinAPIPort))
	tok, err := manifests.ReadBootstrapToken(assets)
	if err != nil {
		t.Fatalf("render wrote no bootstrap token: %v", err)
	}
	secret := tok.Token.Secret // must show up in no log

	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	etcdURL := fmt.Sprintf("https://127.0.0.1:%d", joinEtcdClient)
	peerURL := fmt.Sprintf("https://127.0.0.1:%d", joinEtcdPeer)
	startRendered(t, assets, logs, manifests.Etcd, map[string]string{
		"listen-client-urls": etcdURL, "advertise-client-urls": etcdURL,
		"listen-peer-urls": peerURL, "initial-advertise-peer-urls": peerURL,
		"initial-cluster":     "join-master=" + peerURL,
		"listen-metrics-urls": fmt.Sprintf("http://127.0.0.1:%d", joinEtcdMetrics),
	})
	// The apiserver listens on the node address only (admin.conf, the
	// other kubeconfigs and cluster-info name it), on a private port.
	startRendered(t, assets, logs, manifests.KubeAPIServer, map[string]string{
		"bind-address": addr, "etcd-servers": etcdURL,
	})
	admin := AdminClient(t, assets)
	Eventually(t, 90*time.Second, func() (bool, string) {
		body, err := admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
		return err == nil && string(body) == "ok", fmt.Sprintf("kube-apiserver /readyz: %v %s (log: %s)", err, body, logTail(filepath.Join(logs, "kube-apiserver.log")))
	})
	startRendered(t, assets, logs, manifests.KubeControllerManager, map[string]string{
		"secure-port": fmt.Sprint(joinCMSecurePort),
	})
	run(t, Bin(t, "kubectl"), "--kubeconfig", filepath.Join(assets, "admin.conf"), "create",
		"-f", filepath.Join(assets, manifests.SelfHostedDir, manifests.JoinFile), "-f", filepath.Join(assets, manifests.SelfHostedDir, "rbac.yaml"))
	// What every master's daemon runs: render grants the token's group no
	// auto-approval.
	startCSRApprover(t, admin, assets)
	startEtcdMemberSigner(t, admin, assets)

	ctx := context.Background()
	Eventually(t, 60*time.Second, func() (bool, string) {
		cm, err := admin.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, ok := cm.Data[bootstrapapi.JWSSignatureKeyPrefix+tok.Token.ID]
		return ok, fmt.Sprintf("cluster-info has no signature of token %s yet (keys %v; controller-manager log: %s)", tok.Token.ID, keys(cm.Data), logTail(filepath.Join(logs, "kube-controller-manager.log")))
	})

	server := fmt.Sprintf("https://%s:%d", addr, joinAPIPort)
	t.Run("anonymous", func(t *testing.T) {
		ca, err := os.ReadFile(filepath.Join(assets, "pki", "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		anon := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		for _, c := range []struct {
			path, bearer string
			want         int
		}{
			{"/api/v1/namespaces/kube-public/configmaps/cluster-info", "", http.StatusOK},
			{"/readyz", "", http.StatusOK},
			{"/livez", "", http.StatusOK},
			{"/healthz", "", http.StatusOK},
			// Open to anonymous by RBAC (system:public-info-viewer), closed
			// by the authentication config.
			{"/version", "", http.StatusUnauthorized},
			{"/api/v1/namespaces/kube-public/configmaps", "", http.StatusUnauthorized},
			{"/api/v1/namespaces/kube-system/secrets", "", http.StatusUnauthorized},
			{"/readyz/etcd", "", http.StatusUnauthorized},
			// The token authenticates as system:bootstrap:ID, which may
			// list CSRs (system:node-bootstrapper) and nothing else.
			{"/apis/certificates.k8s.io/v1/certificatesigningrequests", tok.Token.String(), http.StatusOK},
			{"/api/v1/namespaces/kube-system/secrets", tok.Token.String(), http.StatusForbidden},
			// The cluster's kubelet configuration: the token (kubeadm's
			// kubeadm:kubelet-config Role) reads it, and no other
			// ConfigMap of kube-system; an anonymous request does not.
			{kubeletConfigPath, tok.Token.String(), http.StatusOK},
			{kubeletConfigPath, "", http.StatusUnauthorized},
			{"/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication", tok.Token.String(), http.StatusForbidden},
			{"/api/v1/namespaces/kube-system/configmaps/kube-root-ca.crt", tok.Token.String(), http.StatusForbidden},
			{"/api/v1/namespaces/kube-system/configmaps", tok.Token.String(), http.StatusForbidden},
			{"/apis/certificates.k8s.io/v1/certificatesigningrequests", tok.Token.ID + ".0000000000000000", http.StatusUnauthorized},
		} {
			req, _ := http.NewRequest(http.MethodGet, server+c.path, nil)
			if c.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+c.bearer)
			}
			resp, err := anon.Do(req)
			if err != nil {
				t.Fatalf("GET %s: %v", c.path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.want {
				t.Errorf("GET %s (token: %v): %d, want %d: %s", c.path, c.bearer != "", resp.StatusCode, c.want, body)
			}
		}
	})

	// The master's side.
	printed := strings.TrimSpace(run(t, Bin(t, "bootlet"), "join", "print", "--asset-dir", assets))
	endpoint, token, hashes := parseJoinCommand(t, printed)
	caCerts, err := certutil.CertsFromFile(filepath.Join(assets, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%s:%d", addr, joinAPIPort); endpoint != want || token != tok.Token.String() || !slices.Equal(hashes, []string{manifests.CACertHash(caCerts[0])}) {
		t.Fatalf("join print: endpoint %s token-is-rendered %v hashes %v; want %s, the rendered token, [%s]", endpoint, token == tok.Token.String(), hashes, want, manifests.CACertHash(caCerts[0]))
	}

	// Refusals: each fails with a clear error and writes nothing.
	otherCA, err := certutil.CertsFromFile(filepath.Join(assets, "pki", "front-proxy-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		t.Fatal(err)
	}
	expired, err := manifests.NewBootstrapToken(time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Secrets("kube-system").Create(ctx, manifests.BootstrapTokenSecret(expired), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, token, hash string
		want              string
	}{
		{"wrong CA hash", token, manifests.CACertHash(otherCA[0]), "none of the public keys"},
		{"malformed CA hash", token, "sha256:abc", "--discovery-token-ca-cert-hash"},
		{"wrong token secret", tok.Token.ID + ".0123456789abcdef", hashes[0], "failed to verify JWS signature"},
		{"unknown token", unknown, hashes[0], "could not find a JWS signature"},
		{"expired token", expired.Token.String(), hashes[0], "could not find a JWS signature"},
		{"malformed token", "abc.def", hashes[0], "--token"},
	} {
		t.Run("refused/"+c.name, func(t *testing.T) {
			out := filepath.Join(dir, "refused-"+strings.ReplaceAll(c.name, " ", "-"))
			cmd := exec.Command(Bin(t, "bootlet"), "join", endpoint, "--token", c.token, "--discovery-token-ca-cert-hash", c.hash,
				"--out", out, "--discovery-timeout", "6s")
			start := time.Now()
			b, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("join succeeded:\n%s", b)
			}
			if !strings.Contains(string(b), c.want) {
				t.Errorf("join failed without saying %q (%v):\n%s", c.want, err, b)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("a refused join left %s (%v)", out, err)
			}
			if strings.Contains(string(b), secret) {
				t.Errorf("join printed the token's secret:\n%s", b)
			}
			t.Logf("refused after %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(b)))
		})
	}
	// A cluster without the kubelet-config ConfigMap or its RoleBinding (an
	// older render's): the join says how to create them, and writes
	// nothing.
	t.Run("refused/no kubelet-config", func(t *testing.T) {
		caFile := filepath.Join(assets, "pki", "ca.crt")
		// The apiserver's RBAC authorizer sees a change through its
		// informers: wait until the token's request has the status the
		// join must meet.
		tokenGets := func(want int) {
			t.Helper()
			Eventually(t, 30*time.Second, func() (bool, string) {
				code := bearerStatus(t, server, caFile, token, kubeletConfigPath)
				return code == want, fmt.Sprintf("the token's GET of kube-system/kubelet-config: %d, want %d", code, want)
			})
		}
		for _, c := range []struct {
			name, want, created string
			status              int
			remove              func() error
		}{
			{"RoleBinding", "may not read ConfigMap kube-system/kubelet-config", "rolebinding.rbac.authorization.k8s.io/kubeadm:kubelet-config created", http.StatusForbidden, func() error {
				return admin.RbacV1().RoleBindings("kube-system").Delete(ctx, "kubeadm:kubelet-config", metav1.DeleteOptions{})
			}},
			{"ConfigMap", "has no ConfigMap kube-system/kubelet-config", "configmap/kubelet-config created", http.StatusNotFound, func() error {
				return admin.CoreV1().ConfigMaps("kube-system").Delete(ctx, manifests.KubeletConfigMap, metav1.DeleteOptions{})
			}},
		} {
			if err := c.remove(); err != nil {
				t.Fatal(err)
			}
			tokenGets(c.status)
			out := filepath.Join(dir, "refused-no-"+c.name)
			b, err := exec.Command(Bin(t, "bootlet"), "join", endpoint, "--token", token, "--discovery-token-ca-cert-hash", hashes[0],
				"--out", out, "--discovery-timeout", "20s").CombinedOutput()
			if err == nil {
				t.Fatalf("join without the %s succeeded:\n%s", c.name, b)
			}
			for _, w := range []string{c.want, "kubectl create -f ASSET_DIR/self-hosted/join.yaml"} {
				if !strings.Contains(string(b), w) {
					t.Errorf("join without the %s failed without saying %q (%v):\n%s", c.name, w, err, b)
				}
			}
			if strings.Contains(string(b), secret) {
				t.Errorf("join printed the token's secret:\n%s", b)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("a refused join left %s (%v)", out, err)
			}
			t.Logf("without the %s: %s", c.name, strings.TrimSpace(string(b)))
			// The fix the error gives: the missing object is created, the
			// others are refused as existing (so kubectl exits 1).
			b, err = exec.Command(Bin(t, "kubectl"), "--kubeconfig", filepath.Join(assets, "admin.conf"), "create",
				"-f", filepath.Join(assets, manifests.SelfHostedDir, manifests.JoinFile)).CombinedOutput()
			if !strings.Contains(string(b), c.created) || !strings.Contains(string(b), "AlreadyExists") {
				t.Fatalf("kubectl create -f join.yaml (%v) did not say %q and AlreadyExists:\n%s", err, c.created, b)
			}
			tokenGets(http.StatusOK)
		}
	})

	// The apiserver refuses the expired token too (the tokencleaner may
	// have deleted its Secret already: refused either way).
	if code := bearerStatus(t, server, filepath.Join(assets, "pki", "ca.crt"), expired.Token.String(), "/apis/certificates.k8s.io/v1/certificatesigningrequests"); code != http.StatusUnauthorized {
		t.Errorf("the expired token got %d, want 401", code)
	}

	// The worker's side.
	worker := filepath.Join(dir, "worker")
	const criSocket = "unix:///run/join-worker-1/containerd.sock"
	joinOut := run(t, Bin(t, "bootlet"), append(strings.Fields(strings.TrimPrefix(printed, "bootlet ")), "--out", worker, "--cri-socket", criSocket)...)
	if strings.Contains(joinOut, secret) {
		t.Errorf("join printed the token's secret:\n%s", joinOut)
	}
	t.Logf("bootlet join:\n%s", joinOut)
	requireWorkerKubeletConfig(t, assets, worker, criSocket, joinOut)
	bootstrapKubeconfig := filepath.Join(worker, manifests.BootstrapKubeletKubeconfig)
	fi, err := os.Stat(bootstrapKubeconfig)
	if err != nil {
		t.Fatalf("join wrote no %s: %v\n%s", bootstrapKubeconfig, err, joinOut)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %o, want 600", bootstrapKubeconfig, fi.Mode().Perm())
	}
	kc, err := clientcmd.LoadFromFile(bootstrapKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kctx := kc.Contexts[kc.CurrentContext]
	if kctx == nil || kc.Clusters[kctx.Cluster].Server != server || kc.AuthInfos[kctx.AuthInfo].Token != tok.Token.String() {
		t.Fatalf("%s: want server %s and the token: %+v", bootstrapKubeconfig, server, kc)
	}

	// The kubelet's TLS bootstrap, by the kubelet's code.
	const nodeName = "join-worker-1"
	kubeletKubeconfig := filepath.Join(worker, "kubelet.conf")
	certDir := filepath.Join(worker, "pki")

	// Before the kubelet has a certificate of its own, `join finish` keeps
	// the bootstrap kubeconfig: without kubelet.conf, and with a
	// kubelet.conf whose certificate (valid, a pair, named as a node) the
	// apiserver does not accept.
	finishRefused := func(why string, args ...string) {
		t.Helper()
		b, err := exec.Command(Bin(t, "bootlet"), append([]string{"join", "finish", "--out", worker, "--timeout", "0"}, args...)...).CombinedOutput()
		if err == nil || !strings.Contains(string(b), "kept "+bootstrapKubeconfig) || !strings.Contains(string(b), why) {
			t.Errorf("join finish (%v) did not keep %s saying %q:\n%s", err, bootstrapKubeconfig, why, b)
		}
		if _, err := os.Stat(bootstrapKubeconfig); err != nil {
			t.Fatalf("join finish removed %s before the kubelet had its certificate: %v", bootstrapKubeconfig, err)
		}
		t.Logf("join finish refused: %s", strings.TrimSpace(string(b)))
	}
	finishRefused("the kubelet has not written " + kubeletKubeconfig)
	finishRefused("the apiserver does not accept", "--kubeconfig", forgedKubeletKubeconfig(t, filepath.Join(dir, "forged"), server, filepath.Join(assets, "pki", "ca.crt"), nodeName))
	bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	if err := bootstrap.LoadClientCert(bctx, kubeletKubeconfig, bootstrapKubeconfig, certDir, types.NodeName(nodeName)); err != nil {
		t.Fatalf("the kubelet's TLS bootstrap: %v (controller-manager log: %s)", err, logTail(filepath.Join(logs, "kube-controller-manager.log")))
	}
	t.Logf("TLS bootstrap: client certificate in %s", time.Since(start).Round(time.Millisecond))
	node := clientFor(t, kubeletKubeconfig)
	requireNodeIdentity(t, node, nodeName)
	testTokenCannotTakeANode(t, admin, clientFor(t, bootstrapKubeconfig), node, "join-master", nodeName)

	// Once it has, `join finish` removes the bootstrap kubeconfig, and the
	// token is in no file of the worker.
	finishOut := run(t, Bin(t, "bootlet"), "join", "finish", "--out", worker, "--timeout", "30s")
	t.Logf("bootlet join finish: %s", strings.TrimSpace(finishOut))
	if _, err := os.Stat(bootstrapKubeconfig); !os.IsNotExist(err) {
		t.Errorf("%s is still there after join finish (%v):\n%s", bootstrapKubeconfig, err, finishOut)
	}
	if !strings.Contains(finishOut, "removed "+bootstrapKubeconfig) || !strings.Contains(finishOut, "system:node:"+nodeName) || strings.Contains(finishOut, secret) {
		t.Errorf("join finish's output does not say it removed %s for system:node:%s, or holds the secret:\n%s", bootstrapKubeconfig, nodeName, finishOut)
	}
	requireTokenGone(t, worker, secret)
	// The kubelet does without it: its kubeconfig is still valid, which is
	// all the kubelet looks at before it would read the bootstrap one.
	if err := bootstrap.LoadClientCert(bctx, kubeletKubeconfig, bootstrapKubeconfig, certDir, types.NodeName(nodeName)); err != nil {
		t.Errorf("the kubelet's start after join finish: %v", err)
	}
	requireNodeIdentity(t, clientFor(t, kubeletKubeconfig), nodeName)
	// A node reads the cluster's kubelet configuration (kubeadm's Role,
	// for system:nodes) and no other ConfigMap of kube-system.
	if _, err := node.CoreV1().ConfigMaps("kube-system").Get(ctx, manifests.KubeletConfigMap, metav1.GetOptions{}); err != nil {
		t.Errorf("the node cannot read kube-system/%s: %v", manifests.KubeletConfigMap, err)
	}
	if _, err := node.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the node reads kube-system/extension-apiserver-authentication: %v, want forbidden", err)
	}

	csrs, err := admin.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var boot *certificatesv1.CertificateSigningRequest
	for i := range csrs.Items {
		if csrs.Items[i].Spec.Username == "system:bootstrap:"+tok.Token.ID {
			boot = &csrs.Items[i]
		}
	}
	if boot == nil {
		t.Fatalf("no CSR of system:bootstrap:%s among %d", tok.Token.ID, len(csrs.Items))
	}
	if boot.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || !approvedBy(boot, csrapprover.ReasonApproved) || len(boot.Status.Certificate) == 0 {
		t.Errorf("bootstrap CSR %s: signer %s, conditions %+v, certificate %d bytes; want approved by bootlet's approver and signed by %s",
			boot.Name, boot.Spec.SignerName, boot.Status.Conditions, len(boot.Status.Certificate), certificatesv1.KubeAPIServerClientKubeletSignerName)
	}

	t.Run("renewal is auto-approved", func(t *testing.T) {
		// What the kubelet's certificate manager posts to rotate its
		// client certificate, as the node itself (selfnodeclient).
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
			Subject: pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
		}, key)
		if err != nil {
			t.Fatal(err)
		}
		pemReq := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
		name, uid, err := csr.RequestCertificateWithContext(ctx, node, pemReq, "", certificatesv1.KubeAPIServerClientKubeletSignerName, nil,
			[]certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}, key)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		certPEM, err := csr.WaitForCertificate(wctx, node, name, uid)
		if err != nil {
			t.Fatalf("renewal CSR %s: %v", name, err)
		}
		certs, err := certutil.ParseCertsPEM(certPEM)
		if err != nil || certs[0].Subject.CommonName != "system:node:"+nodeName {
			t.Fatalf("renewed certificate: %v %+v", err, certs)
		}
	})

	t.Run("created token", func(t *testing.T) {
		// --create-token: a new token in the cluster, as kubeadm token create.
		printed := strings.TrimSpace(run(t, Bin(t, "bootlet"), "join", "print", "--asset-dir", assets, "--create-token", "--ttl", "10m"))
		_, newToken, _ := parseJoinCommand(t, printed)
		if newToken == tok.Token.String() {
			t.Fatal("--create-token printed the rendered token")
		}
		s, err := admin.CoreV1().Secrets("kube-system").Get(ctx, "bootstrap-token-"+newToken[:6], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		exp, err := time.Parse(time.RFC3339, string(s.Data["expiration"]))
		if err != nil || exp.Before(time.Now().Add(9*time.Minute)) || exp.After(time.Now().Add(11*time.Minute)) {
			t.Errorf("created token expires %s (%v), want in 10m", s.Data["expiration"], err)
		}
		out := filepath.Join(dir, "worker2")
		run(t, Bin(t, "bootlet"), append(strings.Fields(strings.TrimPrefix(printed, "bootlet ")), "--out", out, "--discovery-timeout", "60s")...)
		bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		kubeconfig := filepath.Join(out, "kubelet.conf")
		if err := bootstrap.LoadClientCert(bctx, kubeconfig, filepath.Join(out, manifests.BootstrapKubeletKubeconfig), filepath.Join(out, "pki"), "join-worker-2"); err != nil {
			t.Fatalf("TLS bootstrap with the created token: %v", err)
		}
		requireNodeIdentity(t, clientFor(t, kubeconfig), "join-worker-2")
	})

	// The token's secret is in no process log and no event.
	for _, f := range []string{"etcd.log", "kube-apiserver.log", "kube-controller-manager.log"} {
		data, err := os.ReadFile(filepath.Join(logs, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), secret) {
			t.Errorf("%s holds the bootstrap token's secret", f)
		}
	}
	events, err := admin.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, secret) {
			t.Errorf("event %s/%s holds the token's secret", e.Namespace, e.Name)
		}
	}
}

// requireTokenGone: no file under dir holds the token's secret.
func requireTokenGone(t *testing.T, dir, secret string) {
	t.Helper()
	n := 0
	if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		n++
		if data, err := os.ReadFile(p); err != nil {
			return err
		} else if strings.Contains(string(data), secret) {
			t.Errorf("%s still holds the bootstrap token", p)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("the token is in none of the %d files under %s", n, dir)
}

// forgedKubeletKubeconfig writes dir/kubelet.conf for the apiserver at
// server (its CA caFile) with a client certificate the cluster never
// signed: self-signed, valid now, a pair, named system:node:NAME in
// system:nodes. The apiserver refuses it.
func forgedKubeletKubeconfig(t *testing.T, dir, server, caFile, node string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		ClientKeyData:         pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "c"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kubelet.conf")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubeletConfigPath is the cluster's kubelet configuration, kubeadm's
// kube-system/kubelet-config.
const kubeletConfigPath = "/api/v1/namespaces/kube-system/configmaps/" + manifests.KubeletConfigMap

// requireWorkerKubeletConfig: `bootlet join` wrote the worker's kubelet
// configuration and the kubelet client CA (0644); the kubelet's own loader
// and validation take the configuration; it trusts, for the kubelet API,
// the CA that signed the apiserver's kubelet client and not the cluster
// CA, uses the node's CRI socket, has the cluster's settings, and none of
// the master's own (its static pod path); the output says what was
// written and the kubelet's command line.
func requireWorkerKubeletConfig(t *testing.T, assets, worker, criSocket, joinOut string) {
	t.Helper()
	configPath := filepath.Join(worker, manifests.KubeletConfigFile)
	caPath := filepath.Join(worker, "pki", "kubelet-client-ca.crt")
	for _, p := range []string{configPath, caPath} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("join wrote no %s: %v\n%s", p, err, joinOut)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %o, want 644", p, fi.Mode().Perm())
		}
	}
	loader, err := configfiles.NewFsLoader(&utilfs.DefaultFs{}, configPath)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := loader.Load(context.Background())
	if err != nil {
		t.Fatalf("the kubelet cannot load %s: %v", configPath, err)
	}
	if err := kubeletvalidation.ValidateKubeletConfiguration(kc, utilfeature.DefaultFeatureGate); err != nil {
		t.Fatalf("the kubelet refuses %s: %v", configPath, err)
	}
	master, err := manifests.DecodeKubeletConfiguration(readFile(t, filepath.Join(assets, manifests.KubeletConfigFile)))
	if err != nil {
		t.Fatal(err)
	}
	if kc.Authentication.X509.ClientCAFile != caPath || kc.ContainerRuntimeEndpoint != criSocket || kc.StaticPodPath != manifests.DefaultKubeletStaticPodPath ||
		kc.Authentication.Anonymous.Enabled || !kc.Authentication.Webhook.Enabled || kc.Authorization.Mode != "Webhook" || !kc.RotateCertificates ||
		kc.ClusterDomain != master.ClusterDomain || !slices.Equal(kc.ClusterDNS, master.ClusterDNS) || kc.CgroupDriver != master.CgroupDriver {
		t.Errorf("the worker's kubelet configuration:\n%s", readFile(t, configPath))
	}
	cas, err := certutil.CertsFromFile(caPath)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := certutil.CertsFromFile(filepath.Join(assets, "pki", "kubelet-client-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cas) != len(rendered) || !cas[0].Equal(rendered[0]) {
		t.Errorf("%s is not the rendered kubelet client CA", caPath)
	}
	// The apiserver's client certificate for the kubelet API verifies
	// against it; nothing the cluster CA signs does.
	client, err := certutil.CertsFromFile(filepath.Join(assets, "pki", "apiserver-kubelet-client.crt"))
	if err != nil {
		t.Fatal(err)
	}
	clusterCA, err := certutil.CertsFromFile(filepath.Join(assets, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	verify := func(ca []*x509.Certificate) error {
		pool := x509.NewCertPool()
		for _, c := range ca {
			pool.AddCert(c)
		}
		_, err := client[0].Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err
	}
	if err := verify(cas); err != nil {
		t.Errorf("the apiserver's kubelet client does not verify against the worker's %s: %v", caPath, err)
	}
	if verify(clusterCA) == nil {
		t.Error("the apiserver's kubelet client verifies against the cluster CA: the worker's clientCAFile must be the kubelet client CA")
	}
	for _, w := range []string{"wrote " + caPath, "wrote " + configPath, "wrote " + filepath.Join(worker, manifests.BootstrapKubeletKubeconfig),
		"kubelet --config=" + configPath + " --bootstrap-kubeconfig=" + filepath.Join(worker, manifests.BootstrapKubeletKubeconfig),
		"bootlet join finish --out " + worker} {
		if !strings.Contains(joinOut, w) {
			t.Errorf("join's output does not say %q:\n%s", w, joinOut)
		}
	}
}

// startRendered runs the rendered bootstrap pod component as a plain
// process: its container command, with /etc/kubernetes mapped to assets
// and the flags of set replaced (or added), its env, its log in logs. It is
// killed at the end of the test, or earlier by the stop it returns.
func startRendered(t *testing.T, assets, logs, component string, set map[string]string) (stop func()) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(assets, manifests.BootstrapManifestsDir, component+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pod v1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		t.Fatal(err)
	}
	ctr := pod.Spec.Containers[0]
	args := renderedArgs(ctr.Command[1:], assets, set)
	logPath := filepath.Join(logs, component+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Bin(t, component), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = os.Environ()
	for _, e := range ctr.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
			logf.Close()
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("%s log tail:\n%s", component, logTail(logPath))
		}
	})
	t.Logf("started %s (pid %d): %s", component, cmd.Process.Pid, strings.Join(args, " "))
	return stop
}

// renderedArgs maps the container's /etc/kubernetes to assets in every
// flag value and replaces the flags of set, in place, adding those the
// command lacks (sorted, so the command line is the same every run).
func renderedArgs(args []string, assets string, set map[string]string) []string {
	out := make([]string, 0, len(args)+len(set))
	done := map[string]bool{}
	for _, a := range args {
		name, val, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok {
			out = append(out, a)
			continue
		}
		if v, ok := set[name]; ok {
			val, done[name] = v, true
		} else if val == "/etc/kubernetes" || strings.HasPrefix(val, "/etc/kubernetes/") {
			val = assets + strings.TrimPrefix(val, "/etc/kubernetes")
		}
		out = append(out, "--"+name+"="+val)
	}
	var extra []string
	for name := range set {
		if !done[name] {
			extra = append(extra, name)
		}
	}
	slices.Sort(extra)
	for _, name := range extra {
		out = append(out, "--"+name+"="+set[name])
	}
	return out
}

// parseJoinCommand splits `bootlet join print`'s line into the endpoint,
// the token and the CA hashes.
func parseJoinCommand(t *testing.T, line string) (endpoint, token string, hashes []string) {
	t.Helper()
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "bootlet" || f[1] != "join" {
		t.Fatalf("join print printed %q, want `bootlet join ENDPOINT ...`", line)
	}
	endpoint = f[2]
	for i := 3; i+1 < len(f); i += 2 {
		switch f[i] {
		case "--token":
			token = f[i+1]
		case "--discovery-token-ca-cert-hash":
			hashes = append(hashes, f[i+1])
		default:
			t.Fatalf("join print printed an unknown flag %s", f[i])
		}
	}
	if !bootstraputil.IsValidBootstrapToken(token) || len(hashes) == 0 {
		t.Fatalf("join print printed no token or no hash: %d fields", len(f))
	}
	return endpoint, token, hashes
}

func clientFor(t testing.TB, kubeconfig string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// requireNodeIdentity: the apiserver authenticates cs as the node.
func requireNodeIdentity(t *testing.T, cs *kubernetes.Clientset, node string) {
	t.Helper()
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview with the kubelet's certificate: %v", err)
	}
	u := r.Status.UserInfo
	if u.Username != "system:node:"+node || !slices.Contains(u.Groups, "system:nodes") {
		t.Fatalf("the kubelet's certificate authenticates as %q in %v, want system:node:%s in system:nodes", u.Username, u.Groups, node)
	}
	t.Logf("the kubelet's certificate authenticates as %s in %v", u.Username, u.Groups)
}

func approvedBy(c *certificatesv1.CertificateSigningRequest, reason string) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved && cond.Status == v1.ConditionTrue && cond.Reason == reason {
			return true
		}
	}
	return false
}

// bearerStatus is the status of a GET of path with token as bearer.
func bearerStatus(t *testing.T, server, caFile, token, path string) int {
	t.Helper()
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, _ := http.NewRequest(http.MethodGet, server+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// logTail is the last 2 KiB of a log file.
func logTail(path string) string {
	data, _ := os.ReadFile(path)
	if len(data) > 2048 {
		data = data[len(data)-2048:]
	}
	return string(data)
}
