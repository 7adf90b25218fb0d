package manifests

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	apiserverapi "k8s.io/apiserver/pkg/apis/apiserver"
	apiserverinstall "k8s.io/apiserver/pkg/apis/apiserver/install"
	apiservervalidation "k8s.io/apiserver/pkg/apis/apiserver/validation"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	bootstraptokenv1 "k8s.io/kubernetes/cmd/kubeadm/app/apis/bootstraptoken/v1"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"
	"k8s.io/kubernetes/cmd/kubeadm/app/componentconfigs"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
	"k8s.io/kubernetes/cmd/kubeadm/app/phases/bootstraptoken/clusterinfo"
	nodephase "k8s.io/kubernetes/cmd/kubeadm/app/phases/bootstraptoken/node"
	kubeletphase "k8s.io/kubernetes/cmd/kubeadm/app/phases/kubelet"
	kubeadmutil "k8s.io/kubernetes/cmd/kubeadm/app/util"
	kubeconfigutil "k8s.io/kubernetes/cmd/kubeadm/app/util/kubeconfig"
	"k8s.io/kubernetes/cmd/kubeadm/app/util/pubkeypin"
)

var tokenPattern = bootstraputil.BootstrapTokenRegexp

// TestNewBootstrapToken: kubeadm's format, render's group and usages, and
// a Secret the apiserver's bootstrap authenticator and kubeadm read back.
func TestNewBootstrapToken(t *testing.T) {
	exp := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		tok, err := NewBootstrapToken(exp.Add(500 * time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		s := tok.Token.String()
		if !tokenPattern.MatchString(s) {
			t.Fatalf("token %q does not match %s", s, bootstrapapi.BootstrapTokenPattern)
		}
		if seen[s] {
			t.Fatalf("token %q generated twice", s)
		}
		seen[s] = true
		sec := BootstrapTokenSecret(tok)
		for _, c := range []struct{ what, got, want string }{
			{"name", sec.Name, "bootstrap-token-" + tok.Token.ID},
			{"namespace", sec.Namespace, "kube-system"},
			{"type", string(sec.Type), "bootstrap.kubernetes.io/token"},
			{"kind", sec.Kind, "Secret"},
			{"token-id", string(sec.Data["token-id"]), tok.Token.ID},
			{"token-secret", string(sec.Data["token-secret"]), tok.Token.Secret},
			{"usage-bootstrap-authentication", string(sec.Data["usage-bootstrap-authentication"]), "true"},
			{"usage-bootstrap-signing", string(sec.Data["usage-bootstrap-signing"]), "true"},
			{"auth-extra-groups", string(sec.Data["auth-extra-groups"]), "system:bootstrappers:bootlet:default-node-token"},
			// Truncated to the second: RFC 3339 in the Secret has no more.
			{"expiration", string(sec.Data["expiration"]), "2026-11-28T08:00:00Z"},
		} {
			if c.got != c.want {
				t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
			}
		}
		back, err := bootstraptokenv1.BootstrapTokenFromSecret(sec)
		if err != nil {
			t.Fatal(err)
		}
		if back.Token.String() != s || !back.Expires.Equal(tok.Expires) || tokenUsable(back, time.Hour, exp.Add(-time.Hour)) != "" {
			t.Errorf("read back %+v, want %+v", back, tok)
		}
	}
}

func TestTokenUsable(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	ttl := 24 * time.Hour
	good := func() *bootstraptokenv1.BootstrapToken {
		tok, err := NewBootstrapToken(now.Add(ttl))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	for _, c := range []struct {
		name   string
		change func(*bootstraptokenv1.BootstrapToken)
		want   string // substring of the reason; "" keeps it
	}{
		{"fresh", func(*bootstraptokenv1.BootstrapToken) {}, ""},
		{"a tenth and a minute left", func(b *bootstraptokenv1.BootstrapToken) { b.Expires.Time = now.Add(ttl/10 + time.Minute) }, ""},
		{"less than a tenth left", func(b *bootstraptokenv1.BootstrapToken) { b.Expires.Time = now.Add(ttl/10 - time.Minute) }, "expires at"},
		{"expired", func(b *bootstraptokenv1.BootstrapToken) { b.Expires.Time = now.Add(-time.Minute) }, "expires at"},
		{"no expiry", func(b *bootstraptokenv1.BootstrapToken) { b.Expires = nil }, "never expires"},
		{"kubeadm's group", func(b *bootstraptokenv1.BootstrapToken) {
			b.Groups = []string{kubeadmconstants.NodeBootstrapTokenAuthGroup}
		}, "has groups"},
		{"a second group", func(b *bootstraptokenv1.BootstrapToken) { b.Groups = append(b.Groups, "system:masters") }, "has groups"},
		{"authentication only", func(b *bootstraptokenv1.BootstrapToken) { b.Usages = []string{"authentication"} }, "has usages"},
		{"usages twice", func(b *bootstraptokenv1.BootstrapToken) { b.Usages = []string{"signing", "authentication", "signing"} }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tok := good()
			c.change(tok)
			got := tokenUsable(tok, ttl, now)
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("tokenUsable: %q, want %q", got, c.want)
			}
		})
	}
}

// TestCACertHash: kubeadm's --discovery-token-ca-cert-hash format, which
// kubeadm's pin set accepts for this CA and refuses for another.
func TestCACertHash(t *testing.T) {
	dir := rendered(t)
	load := func(base string) *x509.Certificate {
		certs, err := certutil.CertsFromFile(filepath.Join(dir, PKIDir, base+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		return certs[0]
	}
	ca, other := load(CA), load(FrontProxyCA)
	h := CACertHash(ca)
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(h) {
		t.Fatalf("hash %q is not sha256:<64 hex>", h)
	}
	for _, c := range []struct {
		name  string
		pins  []string
		certs []*x509.Certificate
		ok    bool
	}{
		{"the CA", []string{h}, []*x509.Certificate{ca}, true},
		{"upper case", []string{"SHA256:" + strings.ToUpper(strings.TrimPrefix(h, "sha256:"))}, []*x509.Certificate{ca}, true},
		{"another CA", []string{h}, []*x509.Certificate{other}, false},
		{"a bundle holding it", []string{h}, []*x509.Certificate{other, ca}, true},
		{"another CA's pin", []string{CACertHash(other)}, []*x509.Certificate{ca}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			set := pubkeypin.NewSet()
			if err := set.Allow(c.pins...); err != nil {
				t.Fatal(err)
			}
			if err := set.CheckAny(c.certs); (err == nil) != c.ok {
				t.Errorf("CheckAny: %v, want ok=%v", err, c.ok)
			}
		})
	}
}

// TestJoinObjectsAreKubeadms: cluster-info, its anonymous RBAC, the TLS
// bootstrap bindings, and the kubelet-config ConfigMap with its Role and
// RoleBinding are what kubeadm's own phases create (run against a fake
// clientset, the kubelet phase with render's KubeletConfiguration), but for
// the token group, which is bootlet's, and the ConfigMap's second key.
func TestJoinObjectsAreKubeadms(t *testing.T) {
	dir := rendered(t)
	tok, err := ReadBootstrapToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.LoadFromFile(filepath.Join(dir, AdminKubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	objs := readJoinObjects(t, dir)
	if s := findObject[*v1.Secret](t, objs, "kube-system", "bootstrap-token-"+tok.Token.ID); s.Type != bootstrapapi.SecretTypeBootstrapToken {
		t.Errorf("token Secret of type %s", s.Type)
	}

	kube := fake.NewClientset()
	if err := clusterinfo.CreateBootstrapConfigMapIfNotExists(kube, admin); err != nil {
		t.Fatal(err)
	}
	if err := clusterinfo.CreateClusterInfoRBACRules(kube); err != nil {
		t.Fatal(err)
	}
	if err := nodephase.AllowBootstrapTokensToPostCSRs(kube); err != nil {
		t.Fatal(err)
	}
	if err := nodephase.AutoApproveNodeBootstrapTokens(kube); err != nil {
		t.Fatal(err)
	}
	// kubeadm init's kubelet phase, given render's KubeletConfiguration as
	// the user's: the ConfigMap and its Role and RoleBinding.
	kubeletCM := findObject[*v1.ConfigMap](t, objs, "kube-system", KubeletConfigMap)
	clusterCfg := &kubeadmapi.ClusterConfiguration{}
	docs, err := kubeadmutil.SplitConfigDocuments([]byte(kubeletCM.Data[KubeletConfigMapKey]))
	if err != nil {
		t.Fatal(err)
	}
	if err := componentconfigs.FetchFromDocumentMap(clusterCfg, docs); err != nil {
		t.Fatal(err)
	}
	if err := kubeletphase.CreateConfigMap(clusterCfg, kube); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := map[string]runtime.Object{}
	cms, err := kube.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range cms.Items {
		cm := &cms.Items[i]
		if cm.Name == KubeletConfigMap {
			// bootlet's second key, the kubelet API's client CA
			// (TestKubeletConfigMap checks it).
			cm.Data[KubeletConfigMapClientCAKey] = kubeletCM.Data[KubeletConfigMapClientCAKey]
		}
		want[objectKey("ConfigMap", cm)] = cm
	}
	roles, err := kube.RbacV1().Roles("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range roles.Items {
		want[objectKey("Role", &roles.Items[i])] = &roles.Items[i]
	}
	rbs, err := kube.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rbs.Items {
		rb := &rbs.Items[i]
		for j := range rb.Subjects {
			if rb.Subjects[j].Name == kubeadmconstants.NodeBootstrapTokenAuthGroup {
				rb.Subjects[j].Name = NodeBootstrapTokenGroup
			}
		}
		want[objectKey("RoleBinding", rb)] = rb
	}
	crbs, err := kube.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range crbs.Items {
		crb := &crbs.Items[i]
		if crb.Subjects[0].Name != kubeadmconstants.NodeBootstrapTokenAuthGroup {
			t.Fatalf("kubeadm bound %s to %v", crb.Name, crb.Subjects)
		}
		crb.Subjects[0].Name = NodeBootstrapTokenGroup
		if crb.Name == kubeadmconstants.NodeAutoApproveBootstrapClusterRoleBinding {
			// bootlet's approver (package csrapprover) decides the
			// token's requests: kubeadm's auto-approval would give a
			// token holder any node's name, a master's included.
			continue
		}
		want[objectKey("ClusterRoleBinding", crb)] = crb
	}

	var kinds []string
	for _, o := range objs {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		o = o.DeepCopyObject()
		o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{}) // compared without TypeMeta
		switch v := o.(type) {
		case *v1.Secret:
			kinds = append(kinds, kind)
			continue
		case *rbacv1.ClusterRoleBinding:
			v.Subjects[0].APIGroup = "" // as below
		case *rbacv1.RoleBinding:
			// kubeadm leaves the subjects' apiGroup empty; the apiserver
			// defaults it to rbac.authorization.k8s.io for a User or Group.
			for i := range v.Subjects {
				v.Subjects[i].APIGroup = ""
			}
		}
		kinds = append(kinds, kind)
		key := objectKey(kind, o.(metav1.Object))
		if w, ok := want[key].(metav1.Object); ok {
			w.SetManagedFields(nil) // the fake clientset's
			want[key].GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		}
		if !apiequality.Semantic.DeepEqual(want[key], o) {
			t.Errorf("%s differs from kubeadm's:\nkubeadm: %+v\nrender:  %+v", key, want[key], o)
		}
		delete(want, key)
	}
	for k := range want {
		t.Errorf("kubeadm makes %s, render does not", k)
	}
	if !slices.Contains(kinds, "Secret") {
		t.Errorf("no token Secret in %v", kinds)
	}
}

// TestRenderJoinAssets: join.yaml holds the token, bootstrap-kubelet.conf
// carries it with the CA, a re-render keeps it, and one close to its
// expiry is replaced; rbac.yaml keeps the renewals' binding.
func TestRenderJoinAssets(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	cfg := testConfig()
	if err := render(cfg, dir, now, t.Logf); err != nil {
		t.Fatal(err)
	}
	tok, err := ReadBootstrapToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !tok.Expires.Time.Equal(now.Add(DefaultBootstrapTokenTTL)) {
		t.Errorf("expires %s, want render time + %s", tok.Expires, DefaultBootstrapTokenTTL)
	}
	kc, err := clientcmd.LoadFromFile(filepath.Join(dir, BootstrapKubeletKubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, PKIDir, CA+".crt"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	if ctx == nil || kc.AuthInfos[ctx.AuthInfo].Token != tok.Token.String() || kc.Clusters[ctx.Cluster].Server != cfg.APIServerURL() ||
		string(kc.Clusters[ctx.Cluster].CertificateAuthorityData) != string(caPEM) || len(kc.AuthInfos[ctx.AuthInfo].ClientCertificateData) != 0 {
		t.Errorf("bootstrap-kubelet.conf does not hold the token, the server and the CA: %+v", kc)
	}
	rbac, err := os.ReadFile(filepath.Join(dir, SelfHostedDir, "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rbac), kubeadmconstants.NodeSelfCSRAutoApprovalClusterRoleName) {
		t.Errorf("rbac.yaml lost the renewals' binding to %s", kubeadmconstants.NodeSelfCSRAutoApprovalClusterRoleName)
	}

	kcBefore, err := os.ReadFile(filepath.Join(dir, BootstrapKubeletKubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		at         time.Duration
		lostJoinYA bool // self-hosted/join.yaml removed, the kubeconfigs kept (bootlet recover)
		keep       bool
	}{
		{"an hour later", time.Hour, false, true},
		{"with a tenth of its life left", DefaultBootstrapTokenTTL * 9 / 10, false, false},
		{"expired", DefaultBootstrapTokenTTL + time.Minute, false, false},
		{"join.yaml lost, bootstrap-kubelet.conf kept: its token", time.Hour, true, true},
		{"join.yaml lost, its token in the last tenth", DefaultBootstrapTokenTTL * 9 / 10, true, false},
		{"join.yaml lost, its token expired", DefaultBootstrapTokenTTL + time.Minute, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := t.TempDir()
			copyTree(t, dir, d)
			if c.lostJoinYA {
				if err := os.Remove(filepath.Join(d, SelfHostedDir, JoinFile)); err != nil {
					t.Fatal(err)
				}
			}
			if err := render(cfg, d, now.Add(c.at), t.Logf); err != nil {
				t.Fatal(err)
			}
			again, err := ReadBootstrapToken(d)
			if err != nil {
				t.Fatal(err)
			}
			if kept := again.Token.String() == tok.Token.String(); kept != c.keep {
				t.Errorf("token kept: %v, want %v", kept, c.keep)
			}
			// A kept token keeps its expiration; a new one has the TTL
			// from this render. A render never extends a token.
			want := now.Add(c.at + DefaultBootstrapTokenTTL)
			if c.keep {
				want = tok.Expires.Time
			}
			if !again.Expires.Time.Equal(want) {
				t.Errorf("join.yaml's token expires %s, want %s", again.Expires, want)
			}
			kt, err := bootstrapKubeconfigToken(d)
			if err != nil {
				t.Fatal(err)
			}
			if kt.Token.String() != again.Token.String() || kt.Expires == nil || !kt.Expires.Time.Equal(again.Expires.Time) {
				t.Errorf("bootstrap-kubelet.conf holds another token or expiration than join.yaml: %s %v", kt.Token.ID, kt.Expires)
			}
			if c.keep {
				if after, _ := os.ReadFile(filepath.Join(d, BootstrapKubeletKubeconfig)); string(after) != string(kcBefore) {
					t.Errorf("the token was kept but bootstrap-kubelet.conf changed")
				}
			}
		})
	}
}

// TestExpiredTokenStaysExpiredAfterRecovery: a recovery (bootlet recover
// keeps pki/ and the kubeconfigs, join.yaml is lost) after the rendered
// token expired renders a different token, and the old one is in no file
// of the asset dir: it is not revived with a new expiration.
func TestExpiredTokenStaysExpiredAfterRecovery(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	cfg := testConfig()
	if err := render(cfg, dir, now, t.Logf); err != nil {
		t.Fatal(err)
	}
	old, err := ReadBootstrapToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, SelfHostedDir)); err != nil {
		t.Fatal(err)
	}
	later := old.Expires.Add(time.Minute)
	if err := render(cfg, dir, later, t.Logf); err != nil {
		t.Fatal(err)
	}
	tok, err := ReadBootstrapToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Token.ID == old.Token.ID || tok.Token.Secret == old.Token.Secret {
		t.Fatalf("render after the recovery kept the expired token %s (now expiring %s)", old.Token.ID, tok.Expires)
	}
	if !tok.Expires.Time.Equal(later.Add(DefaultBootstrapTokenTTL)) {
		t.Errorf("the new token expires %s, want %s", tok.Expires, later.Add(DefaultBootstrapTokenTTL))
	}
	if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(data), old.Token.Secret) {
			t.Errorf("%s still holds the expired token", p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestBootstrapKubeconfigWithoutExpiration: a bootstrap-kubelet.conf of an
// older render records no expiration; with join.yaml lost, its token's
// expiration is unknown, so render makes a new token rather than keep it
// for another TTL.
func TestBootstrapKubeconfigWithoutExpiration(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	cfg := testConfig()
	if err := render(cfg, dir, now, t.Logf); err != nil {
		t.Fatal(err)
	}
	old, err := ReadBootstrapToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, PKIDir, CA+".crt"))
	if err != nil {
		t.Fatal(err)
	}
	older, err := clientcmd.Write(*kubeconfigutil.CreateWithToken(cfg.APIServerURL(), clusterName, BootstrapTokenUser, caPEM, old.Token.String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, BootstrapKubeletKubeconfig), older, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, SelfHostedDir, JoinFile)); err != nil {
		t.Fatal(err)
	}
	if err := render(cfg, dir, now.Add(time.Minute), t.Logf); err != nil {
		t.Fatal(err)
	}
	tok, err := ReadBootstrapToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Token.String() == old.Token.String() {
		t.Errorf("render kept token %s of unknown expiration, now expiring %s", old.Token.ID, tok.Expires)
	}
}

// TestBootstrapTokenTTLBound: render's --bootstrap-token-ttl must be
// positive and at most MaxBootstrapTokenTTL; the error names the flag and
// the bound.
func TestBootstrapTokenTTLBound(t *testing.T) {
	if DefaultBootstrapTokenTTL >= bootstraptokenv1.DefaultTokenDuration || MaxBootstrapTokenTTL != 24*time.Hour {
		t.Errorf("default TTL %s, bound %s: want the default under kubeadm's 24h, the bound 24h", DefaultBootstrapTokenTTL, MaxBootstrapTokenTTL)
	}
	for _, c := range []struct {
		ttl  time.Duration
		want string // substring of the error; "" accepts
	}{
		{DefaultBootstrapTokenTTL, ""},
		{time.Minute, ""},
		{24 * time.Hour, ""},
		{24*time.Hour + time.Second, "--bootstrap-token-ttl: Invalid value: \"24h0m1s\": must be at most 24h0m0s"},
		{1000 * time.Hour, "must be at most 24h0m0s"},
		{0, "--bootstrap-token-ttl: Invalid value: \"0s\": must be positive"},
		{-time.Hour, "must be positive"},
	} {
		c2 := testConfig()
		c2.BootstrapTokenTTL = c.ttl
		got := c2.Validate().ToAggregate()
		if (got == nil) != (c.want == "") || got != nil && !strings.Contains(got.Error(), c.want) {
			t.Errorf("--bootstrap-token-ttl %s: %v, want %q", c.ttl, got, c.want)
		}
		if why := ValidateBootstrapTokenTTL(c.ttl); (why == "") != (c.want == "") {
			t.Errorf("ValidateBootstrapTokenTTL(%s) = %q", c.ttl, why)
		}
	}
	// Render refuses it before writing anything.
	dir := filepath.Join(t.TempDir(), "assets")
	c2 := testConfig()
	c2.BootstrapTokenTTL = 48 * time.Hour
	if err := render(c2, dir, time.Now(), t.Logf); err == nil || !strings.Contains(err.Error(), "--bootstrap-token-ttl") {
		t.Errorf("render with a 48h token: %v, want refused naming --bootstrap-token-ttl", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a refused render wrote %s (%v)", dir, err)
	}
}

// TestAuthenticationConfig: the apiserver's own decoder and validator take
// the rendered file; anonymous is on only for the health endpoints and
// cluster-info; both apiserver incarnations read it, and --anonymous-auth
// (which the apiserver refuses next to it) is not set.
func TestAuthenticationConfig(t *testing.T) {
	dir := rendered(t)
	data, err := os.ReadFile(filepath.Join(dir, AuthenticationConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	apiserverinstall.Install(scheme)
	obj, _, err := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("the apiserver cannot decode %s: %v", AuthenticationConfigFile, err)
	}
	ac, ok := obj.(*apiserverapi.AuthenticationConfiguration)
	if !ok {
		t.Fatalf("decoded a %T", obj)
	}
	if errs := apiservervalidation.ValidateAuthenticationConfiguration(nil, ac, nil); len(errs) > 0 {
		t.Fatalf("the apiserver refuses it: %v", errs)
	}
	var paths []string
	for _, c := range ac.Anonymous.Conditions {
		paths = append(paths, c.Path)
	}
	want := []string{"/healthz", "/livez", "/readyz", "/api/v1/namespaces/kube-public/configmaps/cluster-info"}
	if !ac.Anonymous.Enabled || !slices.Equal(paths, want) || len(ac.JWT) != 0 {
		t.Errorf("anonymous %+v, jwt %d; want enabled for exactly %v", ac.Anonymous, len(ac.JWT), want)
	}

	pod := readPod(t, filepath.Join(dir, BootstrapManifestsDir, KubeAPIServer+".yaml"))
	cmd := pod.Spec.Containers[0].Command
	if !slices.Contains(cmd, "--authentication-config=/etc/kubernetes/authentication-config.yaml") || !slices.Contains(cmd, "--enable-bootstrap-token-auth=true") {
		t.Errorf("bootstrap apiserver command %v", cmd)
	}
	for _, a := range cmd {
		if strings.HasPrefix(a, "--anonymous-auth") {
			t.Errorf("bootstrap apiserver sets %s next to --authentication-config", a)
		}
	}
	mounted := false
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Path == filepath.Join(dir, AuthenticationConfigFile) {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("the bootstrap apiserver does not mount %s", filepath.Join(dir, AuthenticationConfigFile))
	}
	cm := readPod(t, filepath.Join(dir, BootstrapManifestsDir, KubeControllerManager+".yaml")).Spec.Containers[0].Command
	for _, want := range []string{"--controllers=*,bootstrapsigner,tokencleaner", "--cluster-signing-key-file=/etc/kubernetes/pki/ca.key", "--cluster-signing-cert-file=/etc/kubernetes/pki/ca-signing.crt"} {
		if !slices.Contains(cm, want) {
			t.Errorf("controller-manager lacks %s: %v", want, cm)
		}
	}

	secrets := selfHostedSecrets(t, dir)
	for _, s := range secrets {
		if s.Name == KubeAPIServer && string(s.Data[AuthenticationConfigFile]) != string(data) {
			t.Errorf("the self-hosted apiserver's Secret does not carry %s", AuthenticationConfigFile)
		}
	}
}

func readPod(t *testing.T, path string) *v1.Pod {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := decodeObjects(f)
	if err != nil || len(objs) != 1 {
		t.Fatalf("%s: %v (%d objects) %s", path, err, len(objs), data)
	}
	return objs[0].(*v1.Pod)
}

// objectKey names an object in the comparisons with kubeadm's.
func objectKey(kind string, o metav1.Object) string {
	if o.GetNamespace() == "" {
		return kind + " " + o.GetName()
	}
	return kind + " " + o.GetNamespace() + "/" + o.GetName()
}

// findObject is the object of type T named namespace/name among objs.
func findObject[T interface {
	runtime.Object
	metav1.Object
}](t *testing.T, objs []runtime.Object, namespace, name string) T {
	t.Helper()
	for _, o := range objs {
		if v, ok := o.(T); ok && v.GetNamespace() == namespace && v.GetName() == name {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T %s/%s among %d objects", zero, namespace, name, len(objs))
	return zero
}

// readJoinObjects are the objects of dir's self-hosted/join.yaml.
func readJoinObjects(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, SelfHostedDir, JoinFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := decodeObjects(f)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
