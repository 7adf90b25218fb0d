package manifests

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"
	bootstraptokenv1 "k8s.io/kubernetes/cmd/kubeadm/app/apis/bootstraptoken/v1"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
	kubeconfigutil "k8s.io/kubernetes/cmd/kubeadm/app/util/kubeconfig"
	"k8s.io/kubernetes/cmd/kubeadm/app/util/pubkeypin"
	"sigs.k8s.io/yaml"

	btypes "github.com/bootlet/bootlet/types"
)

// Workers join by kubeadm's TLS bootstrap (docs/cluster.md, "Workers join"):
// a bootstrap token lets a new kubelet post a CSR for its client
// certificate, the controller-manager approves and signs it, and the
// kube-public cluster-info ConfigMap, signed with the token by the
// bootstrapsigner, tells the worker which CA to trust.
const (
	// JoinFile is the self-hosted/ file of the objects the join needs: the
	// bootstrap token Secret, cluster-info, the kubelet-config ConfigMap,
	// and their RBAC.
	JoinFile = "join.yaml"
	// BootstrapKubeletKubeconfig is kubeadm's bootstrap-kubelet.conf: the
	// kubeconfig a worker's kubelet starts with (--bootstrap-kubeconfig),
	// the rendered token its only credential.
	BootstrapKubeletKubeconfig = kubeadmconstants.KubeletBootstrapKubeConfigFileName
	// AuthenticationConfigFile is the apiserver's --authentication-config:
	// anonymous requests only to the health endpoints and cluster-info.
	AuthenticationConfigFile = "authentication-config.yaml"
	// NodeBootstrapTokenGroup is the extra group of render's bootstrap
	// tokens, the one the TLS-bootstrap bindings name: kubeadm's
	// system:bootstrappers:kubeadm:default-node-token with bootlet's name,
	// so a token made for something else (every token is in
	// system:bootstrappers) cannot post node CSRs.
	NodeBootstrapTokenGroup = btypes.NodeBootstrapTokenGroup
	// BootstrapTokenUser is the user name of the token in the bootstrap
	// kubeconfig (kubeadm's; the apiserver names the token's user
	// system:bootstrap:ID whatever the kubeconfig says).
	BootstrapTokenUser = "tls-bootstrap-token-user"
	// DefaultBootstrapTokenTTL is the lifetime of render's token, shorter
	// than kubeadm's 24h: it is for the first workers, which join minutes
	// after the control plane is up (the harness's within 5 minutes of
	// render), and 2h leaves room for a bring-up by hand. Later workers
	// get a token of their own (`bootlet join print --create-token`).
	DefaultBootstrapTokenTTL = 2 * time.Hour
	// MaxBootstrapTokenTTL bounds every token bootlet makes: kubeadm's
	// default lifetime, the longest kubeadm hands out unasked. Anyone
	// holding a token can join a node under any name until it expires,
	// and a new one takes seconds to make, so nothing needs longer.
	MaxBootstrapTokenTTL = bootstraptokenv1.DefaultTokenDuration
	// bootstrapTokenExpiration is the extension of the bootstrap
	// kubeconfig's user that records its token's expiration (RFC 3339), so
	// that a render which lost join.yaml keeps the token only until then,
	// never longer. Clients ignore kubeconfig extensions.
	bootstrapTokenExpiration = "bootlet.dev/bootstrap-token-expiration"
	// bootstrapTokenDescription is the Secret's description.
	bootstrapTokenDescription = "bootlet render: a worker's kubelet TLS bootstrap (bootlet join)"
	// clusterInfoRBACName is kubeadm's Role and RoleBinding that let
	// anonymous users get cluster-info.
	clusterInfoRBACName = "kubeadm:bootstrap-signer-clusterinfo"
	// clusterInfoPath is the one API path anonymous users may read
	// besides the health endpoints.
	clusterInfoPath = "/api/v1/namespaces/" + metav1.NamespacePublic + "/configmaps/" + bootstrapapi.ConfigMapClusterInfo
)

// The token's usages, as kubeadm names them (the Secret's keys are
// usage-bootstrap-NAME: bootstrapapi.KnownTokenUsages).
const (
	usageAuthentication = "authentication"
	usageSigning        = "signing"
)

// AnonymousPaths are the only paths the rendered apiserver authenticates
// anonymous requests for (AuthenticationConfigFile): the kubelet's probes
// of the apiserver pod (/livez, /readyz; /healthz for older callers) and
// cluster-info. Any other request without credentials is a 401 before
// authorization; RBAC's system:public-info-viewer would otherwise also let
// anonymous users read /version.
var AnonymousPaths = []string{"/healthz", "/livez", "/readyz", clusterInfoPath}

// NewBootstrapToken is a new token, kubeadm's format ([a-z0-9]{6}.[a-z0-9]{16},
// from crypto/rand), that expires at expires.
func NewBootstrapToken(expires time.Time) (*bootstraptokenv1.BootstrapToken, error) {
	s, err := bootstraputil.GenerateBootstrapToken()
	if err != nil {
		return nil, err
	}
	tok, err := bootstraptokenv1.NewBootstrapTokenString(s)
	if err != nil {
		return nil, err
	}
	return bootstrapToken(tok, expires), nil
}

// bootstrapToken is render's bootstrap token of tok, expiring at expires.
func bootstrapToken(tok *bootstraptokenv1.BootstrapTokenString, expires time.Time) *bootstraptokenv1.BootstrapToken {
	return &bootstraptokenv1.BootstrapToken{
		Token:       tok,
		Description: bootstrapTokenDescription,
		Expires:     &metav1.Time{Time: expires.UTC().Truncate(time.Second)},
		// Authentication lets the kubelet post its CSR; signing lets the
		// bootstrapsigner sign cluster-info with it, which is how a worker
		// knows cluster-info is this cluster's.
		Usages: []string{usageAuthentication, usageSigning},
		Groups: []string{NodeBootstrapTokenGroup},
	}
}

// BootstrapTokenSecret is kubeadm's Secret of t (kube-system/bootstrap-token-ID,
// type bootstrap.kubernetes.io/token).
func BootstrapTokenSecret(t *bootstraptokenv1.BootstrapToken) *v1.Secret {
	s := bootstraptokenv1.BootstrapTokenToSecret(t)
	s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
	return s
}

// tokenUsable says why a rendered token cannot be kept ("" if it can): it
// must be render's (its group and usages), and have at least a tenth of
// ttl left, as certMismatch keeps certificates.
func tokenUsable(t *bootstraptokenv1.BootstrapToken, ttl time.Duration, now time.Time) string {
	if t.Expires == nil {
		return "never expires"
	}
	if len(t.Groups) != 1 || t.Groups[0] != NodeBootstrapTokenGroup {
		return fmt.Sprintf("has groups %v", t.Groups)
	}
	usages := map[string]bool{}
	for _, u := range t.Usages {
		usages[u] = true
	}
	if len(usages) != 2 || !usages[usageAuthentication] || !usages[usageSigning] {
		return fmt.Sprintf("has usages %v", t.Usages)
	}
	if !now.Before(t.Expires.Add(-ttl / 10)) {
		return fmt.Sprintf("expires at %s", t.Expires.UTC().Format(time.RFC3339))
	}
	return ""
}

// ValidateBootstrapTokenTTL says why ttl cannot be a bootstrap token's
// lifetime ("" if it can): positive (a token that never expires would let
// anyone who ever saw it join nodes for ever) and at most
// MaxBootstrapTokenTTL.
func ValidateBootstrapTokenTTL(ttl time.Duration) string {
	switch {
	case ttl <= 0:
		return "must be positive"
	case ttl > MaxBootstrapTokenTTL:
		return fmt.Sprintf("must be at most %s: a bootstrap token joins any node until it expires; make a new one for later workers (`bootlet join print --create-token`)", MaxBootstrapTokenTTL)
	}
	return ""
}

// loadOrCreateBootstrapToken is the token of dir/self-hosted/join.yaml
// while tokenUsable keeps it, else a new one valid for ttl from now. A kept
// token keeps its expiration: a render never extends a token. The token is
// a secret: only its ID is ever logged.
func loadOrCreateBootstrapToken(dir string, ttl time.Duration, now time.Time, logf func(string, ...any)) (*bootstraptokenv1.BootstrapToken, error) {
	path := filepath.Join(dir, SelfHostedDir, JoinFile)
	t, err := ReadBootstrapToken(dir)
	switch {
	case err == nil:
		why := tokenUsable(t, ttl, now)
		if why == "" {
			return t, nil
		}
		logf("[bootstrap-token] replacing token %s of %s: it %s", t.Token.ID, path, why)
	case errors.Is(err, os.ErrNotExist):
		// join.yaml lost, the kubeconfigs kept (as `bootlet recover` keeps
		// a node's identity): the token of bootstrap-kubelet.conf is the
		// one the cluster (a restored snapshot) knows. It is kept, so no
		// second token Secret appears beside it, only with the expiration
		// the kubeconfig records, the Secret's: a token that expired
		// before a recovery stays expired. Without a record (an older
		// render's file) its expiration is unknown, and it is replaced.
		if kt, kerr := bootstrapKubeconfigToken(dir); kerr == nil {
			why := "has no recorded expiration"
			if kt.Expires != nil {
				why = tokenUsable(kt, ttl, now)
			}
			if why == "" {
				logf("[bootstrap-token] %s is missing: keeping token %s of %s, expires %s", path, kt.Token.ID, BootstrapKubeletKubeconfig, kt.Expires.UTC().Format(time.RFC3339))
				return kt, nil
			}
			logf("[bootstrap-token] %s is missing and token %s of %s %s: replacing it", path, kt.Token.ID, BootstrapKubeletKubeconfig, why)
		}
	default:
		// A file that does not parse is replaced: the token is not a key
		// anyone else holds a certificate of, only a credential to renew.
		logf("[bootstrap-token] replacing the token of %s: %v", path, err)
	}
	t, err = NewBootstrapToken(now.Add(ttl))
	if err != nil {
		return nil, err
	}
	logf("[bootstrap-token] generated token %s, expires %s", t.Token.ID, t.Expires.UTC().Format(time.RFC3339))
	return t, nil
}

// bootstrapKubeconfigToken is render's bootstrap token of dir's
// bootstrap-kubelet.conf, with the expiration the file records (Expires
// nil when it records none).
func bootstrapKubeconfigToken(dir string) (*bootstraptokenv1.BootstrapToken, error) {
	cfg, err := clientcmd.LoadFromFile(filepath.Join(dir, BootstrapKubeletKubeconfig))
	if err != nil {
		return nil, err
	}
	for _, a := range cfg.AuthInfos {
		if a.Token == "" {
			continue
		}
		tok, err := bootstraptokenv1.NewBootstrapTokenString(a.Token)
		if err != nil {
			return nil, err
		}
		t := bootstrapToken(tok, time.Time{})
		t.Expires = nil
		if ext, ok := a.Extensions[bootstrapTokenExpiration].(*runtime.Unknown); ok {
			var exp string
			if err := json.Unmarshal(ext.Raw, &exp); err != nil {
				return nil, fmt.Errorf("%s: extension %s: %w", BootstrapKubeletKubeconfig, bootstrapTokenExpiration, err)
			}
			at, err := time.Parse(time.RFC3339, exp)
			if err != nil {
				return nil, fmt.Errorf("%s: extension %s: %w", BootstrapKubeletKubeconfig, bootstrapTokenExpiration, err)
			}
			t.Expires = &metav1.Time{Time: at}
		}
		return t, nil
	}
	return nil, fmt.Errorf("%s holds no token", BootstrapKubeletKubeconfig)
}

// ReadBootstrapToken is the bootstrap token of ASSETS/self-hosted/join.yaml
// (an os.ErrNotExist error when there is none).
func ReadBootstrapToken(assetDir string) (*bootstraptokenv1.BootstrapToken, error) {
	path := filepath.Join(assetDir, SelfHostedDir, JoinFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	objs, err := decodeObjects(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, o := range objs {
		if s, ok := o.(*v1.Secret); ok && s.Type == bootstrapapi.SecretTypeBootstrapToken {
			t, err := bootstraptokenv1.BootstrapTokenFromSecret(s)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return t, nil
		}
	}
	return nil, fmt.Errorf("%s holds no bootstrap token Secret: %w", path, os.ErrNotExist)
}

// CACertHash is kubeadm's --discovery-token-ca-cert-hash of ca: sha256:HEX
// of its SubjectPublicKeyInfo.
func CACertHash(ca *x509.Certificate) string {
	return pubkeypin.Hash(ca)
}

// clusterInfoConfigMap is kubeadm's kube-public/cluster-info: a kubeconfig
// with one unnamed cluster, the server and the CA bundle (ca.crt, so both
// CAs during a rotation), and no credentials. The bootstrapsigner adds a
// jws-kubeconfig-ID signature for each signing token.
func clusterInfoConfigMap(server string, caPEM []byte) (*v1.ConfigMap, error) {
	data, err := clientcmd.Write(clientcmdapi.Config{Clusters: map[string]*clientcmdapi.Cluster{
		"": {Server: server, CertificateAuthorityData: caPEM},
	}})
	if err != nil {
		return nil, err
	}
	return &v1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: bootstrapapi.ConfigMapClusterInfo, Namespace: metav1.NamespacePublic},
		Data:       map[string]string{bootstrapapi.KubeConfigKey: string(data)},
	}, nil
}

// joinObjects are the objects of JoinFile: the token's Secret, cluster-info
// and its anonymous read access (kubeadm's Role and RoleBinding), and
// kubeadm's binding that lets the token's group post CSRs
// (system:node-bootstrapper). Not kubeadm's auto-approval
// (...:nodeclient): the controller-manager would approve a token's
// request for any node name, a master's included; bootlet's approver
// (package csrapprover) decides them instead. The renewals' binding
// (...:selfnodeclient for system:nodes) is rbac.yaml's
// (nodeCertRotationBinding).
func joinObjects(t *bootstraptokenv1.BootstrapToken, server string, caPEM []byte) ([]runtime.Object, error) {
	cm, err := clusterInfoConfigMap(server, caPEM)
	if err != nil {
		return nil, err
	}
	group := rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: NodeBootstrapTokenGroup}
	return []runtime.Object{
		BootstrapTokenSecret(t),
		cm,
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: clusterInfoRBACName, Namespace: metav1.NamespacePublic},
			Rules: []rbacv1.PolicyRule{{
				Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"},
				ResourceNames: []string{bootstrapapi.ConfigMapClusterInfo},
			}},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: clusterInfoRBACName, Namespace: metav1.NamespacePublic},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: clusterInfoRBACName},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user.Anonymous}},
		},
		clusterRoleBinding(kubeadmconstants.NodeKubeletBootstrap, kubeadmconstants.NodeBootstrapperClusterRoleName, group),
	}, nil
}

// bootstrapKubeconfig is kubeadm join's TLS-bootstrap kubeconfig: cluster
// "kubernetes" at server with the CA bundle, user tls-bootstrap-token-user
// with t's token, and t's expiration in the user's extension
// bootstrapTokenExpiration.
func bootstrapKubeconfig(server string, caPEM []byte, t *bootstraptokenv1.BootstrapToken) ([]byte, error) {
	cfg := kubeconfigutil.CreateWithToken(server, clusterName, BootstrapTokenUser, caPEM, t.Token.String())
	if t.Expires != nil {
		exp, err := json.Marshal(t.Expires.UTC().Format(time.RFC3339))
		if err != nil {
			return nil, err
		}
		cfg.AuthInfos[BootstrapTokenUser].Extensions = map[string]runtime.Object{bootstrapTokenExpiration: &runtime.Unknown{Raw: exp}}
	}
	return clientcmd.Write(*cfg)
}

// authenticationConfig is AuthenticationConfigFile's content: no JWT
// authenticators, anonymous only for AnonymousPaths (the apiserver's
// AnonymousAuthConfigurableEndpoints, GA and locked on since v1.34).
func authenticationConfig() ([]byte, error) {
	conds := make([]apiserverv1.AnonymousAuthCondition, 0, len(AnonymousPaths))
	for _, p := range AnonymousPaths {
		conds = append(conds, apiserverv1.AnonymousAuthCondition{Path: p})
	}
	return yaml.Marshal(&apiserverv1.AuthenticationConfiguration{
		TypeMeta:  metav1.TypeMeta{APIVersion: apiserverv1.SchemeGroupVersion.String(), Kind: "AuthenticationConfiguration"},
		JWT:       []apiserverv1.JWTAuthenticator{},
		Anonymous: &apiserverv1.AnonymousAuthConfig{Enabled: true, Conditions: conds},
	})
}

// writeJoinAssets writes AuthenticationConfigFile and the worker's
// bootstrap-kubelet.conf, and returns JoinFile's objects: joinObjects and
// the kubelet-config ConfigMap with its RBAC (kubeletConfigObjects).
func writeJoinAssets(c Config, dir string, pki *PKI, now time.Time, logf func(string, ...any)) ([]runtime.Object, error) {
	authn, err := authenticationConfig()
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, AuthenticationConfigFile), authn, 0o600); err != nil {
		return nil, err
	}
	t, err := loadOrCreateBootstrapToken(dir, c.BootstrapTokenTTL, now, logf)
	if err != nil {
		return nil, err
	}
	caPEM := pki.Pairs[CA].CertPEM
	if _, err := certutil.ParseCertsPEM(caPEM); err != nil {
		return nil, fmt.Errorf("%s.crt: %w", CA, err)
	}
	kc, err := bootstrapKubeconfig(c.APIServerURL(), caPEM, t)
	if err != nil {
		return nil, err
	}
	// 0600: the token is its credential.
	if err := writeFile(filepath.Join(dir, BootstrapKubeletKubeconfig), kc, 0o600); err != nil {
		return nil, err
	}
	objs, err := joinObjects(t, c.APIServerURL(), caPEM)
	if err != nil {
		return nil, err
	}
	kubeletObjs, err := kubeletConfigObjects(c, pki.Pairs[KubeletClientCA].CertPEM)
	if err != nil {
		return nil, err
	}
	return append(objs, kubeletObjs...), nil
}
