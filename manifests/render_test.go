package manifests

import (
	"bufio"
	"bytes"
	"crypto/x509"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	clientsetscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/apis/apps"
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	api "k8s.io/kubernetes/pkg/apis/core"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/apis/policy"
	policyvalidation "k8s.io/kubernetes/pkg/apis/policy/validation"
	"k8s.io/kubernetes/pkg/apis/rbac"
	rbacvalidation "k8s.io/kubernetes/pkg/apis/rbac/validation"

	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	_ "k8s.io/kubernetes/pkg/apis/rbac/install"

	"github.com/bootlet/bootlet/credmirror"
	"github.com/bootlet/bootlet/podapi"
	btypes "github.com/bootlet/bootlet/types"
)

var (
	renderOnce sync.Once
	renderDir  string
	renderErr  error
)

// rendered renders testConfig once per test binary (key generation is the
// slow part) and returns the directory. Tests must not modify it.
func rendered(t *testing.T) string {
	t.Helper()
	renderOnce.Do(func() {
		renderDir, renderErr = os.MkdirTemp("", "bootlet-render-")
		if renderErr == nil {
			renderErr = Render(testConfig(), renderDir)
		}
	})
	if renderErr != nil {
		t.Fatal(renderErr)
	}
	return renderDir
}

// readTree is every regular file under dir, by relative path.
func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		out[rel] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// selfHostedSecrets are the kube-system Secrets of dir's self-hosted/*.yaml.
func selfHostedSecrets(t *testing.T, dir string) []*v1.Secret {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, SelfHostedDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*v1.Secret
	for _, f := range files {
		r, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeObjects(r)
		r.Close()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			if s, ok := o.(*v1.Secret); ok && s.Namespace == "kube-system" {
				out = append(out, s)
			}
		}
	}
	return out
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	for rel, data := range readTree(t, src) {
		fi, err := os.Stat(filepath.Join(src, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, rel), data, fi.Mode()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRenderLayoutAndModes(t *testing.T) {
	dir := rendered(t)
	want := []string{
		"admin.conf", "controller-manager.conf", "kubelet.conf", "scheduler.conf",
		"bootstrap-manifests/etcd.yaml", "bootstrap-manifests/kube-apiserver.yaml",
		"bootstrap-manifests/kube-controller-manager.yaml", "bootstrap-manifests/kube-scheduler.yaml",
		"self-hosted/kube-apiserver.yaml", "self-hosted/kube-controller-manager.yaml",
		"self-hosted/kube-scheduler.yaml", "self-hosted/rbac.yaml",
		"self-hosted/addon-flannel.yaml", "self-hosted/addon-kube-proxy.yaml", "self-hosted/addon-coredns.yaml",
		"pki/sa.key", "pki/sa.pub", "kubelet-config.yaml",
		BootstrapKubeletKubeconfig, AuthenticationConfigFile, AdmissionConfigFile, "self-hosted/" + JoinFile,
		CheckpointerKubeconfig, "self-hosted/" + CheckpointerRBACFile, "self-hosted/" + ClusterVersionFile, "self-hosted/" + UpgradeAgentRBACFile, "self-hosted/" + NodeGuardPolicyFile, "pki/" + CASigning + ".crt", "pki/" + CheckpointerClient + ".crt", "pki/" + CheckpointerClient + ".key",
	}
	for _, base := range []string{"ca", "kubelet-client-ca", "apiserver", "apiserver-kubelet-client", "front-proxy-ca", "front-proxy-client",
		"etcd/ca", "etcd/server", "etcd/peer", "etcd/healthcheck-client", "apiserver-etcd-client",
		"kubeconfig/admin", "kubeconfig/controller-manager", "kubeconfig/scheduler", "kubeconfig/kubelet"} {
		want = append(want, "pki/"+base+".crt", "pki/"+base+".key")
	}
	tree := readTree(t, dir)
	var got []string
	for rel := range tree {
		got = append(got, rel)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("files:\n%v\nwant:\n%v", got, want)
	}
	for rel := range tree {
		fi, err := os.Stat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		wantMode := os.FileMode(0o600)
		if strings.HasSuffix(rel, ".crt") || rel == KubeletConfigFile {
			wantMode = 0o644
		}
		if fi.Mode().Perm() != wantMode {
			t.Errorf("%s: mode %o, want %o", rel, fi.Mode().Perm(), wantMode)
		}
	}
}

// TestRenderDeterministic: rendering again changes no byte; rendering into a
// second directory seeded with only the first one's pki/ gives the same
// kubeconfigs and self-hosted objects, and the same bootstrap manifests once
// the asset directory (which their hostPaths name) is substituted.
func TestRenderDeterministic(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, rendered(t), dir)
	// The copy's bootstrap manifests still name the original directory.
	if err := Render(testConfig(), dir); err != nil {
		t.Fatal(err)
	}
	before := readTree(t, dir)
	mtimes := map[string]time.Time{}
	for rel := range before {
		fi, _ := os.Stat(filepath.Join(dir, rel))
		mtimes[rel] = fi.ModTime()
	}
	if err := Render(testConfig(), dir); err != nil {
		t.Fatal(err)
	}
	after := readTree(t, dir)
	for rel, data := range before {
		if !bytes.Equal(after[rel], data) {
			t.Errorf("%s changed on re-render", rel)
		}
		if fi, _ := os.Stat(filepath.Join(dir, rel)); !fi.ModTime().Equal(mtimes[rel]) {
			t.Errorf("%s rewritten on re-render", rel)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d files after re-render, %d before", len(after), len(before))
	}

	second := t.TempDir()
	copyTree(t, filepath.Join(dir, PKIDir), filepath.Join(second, PKIDir))
	// The bootstrap token is kept as the keys are, in the file of its Secret.
	join, err := os.ReadFile(filepath.Join(dir, SelfHostedDir, JoinFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(second, SelfHostedDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(second, SelfHostedDir, JoinFile), join, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Render(testConfig(), second); err != nil {
		t.Fatal(err)
	}
	other := readTree(t, second)
	for rel, data := range before {
		got := other[rel]
		// These name the asset directory (hostPaths, the credential
		// directories, the kubelet's client CA).
		if strings.HasPrefix(rel, BootstrapManifestsDir+"/") || strings.HasPrefix(rel, SelfHostedDir+"/") || rel == KubeletConfigFile {
			got = bytes.ReplaceAll(got, []byte(second), []byte(dir))
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s differs when rendered from the same pki/", rel)
		}
	}
}

// TestRenderKeepsKeysAndReissuesOnChange: a changed SAN or lifetime re-issues
// only the affected certificates, for the same keys.
func TestRenderKeepsKeysAndReissuesOnChange(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, rendered(t), dir)
	before := readTree(t, dir)

	c := testConfig()
	c.ClusterDomain = "example.org" // only the apiserver certificate names it
	if err := Render(c, dir); err != nil {
		t.Fatal(err)
	}
	after := readTree(t, dir)
	for rel, data := range before {
		changed := !bytes.Equal(after[rel], data)
		if strings.HasSuffix(rel, ".key") && changed {
			t.Errorf("key %s replaced", rel)
		}
		if strings.HasSuffix(rel, ".crt") && changed != (rel == "pki/apiserver.crt") {
			t.Errorf("%s: changed=%v", rel, changed)
		}
	}
	cert := parseCert(t, after["pki/apiserver.crt"])
	if !slices.Contains(cert.DNSNames, "kubernetes.default.svc.example.org") {
		t.Errorf("new SANs %v", cert.DNSNames)
	}

	c.CertValidity = 30 * 24 * time.Hour
	if err := Render(c, dir); err != nil {
		t.Fatal(err)
	}
	final := readTree(t, dir)
	for rel, data := range final {
		switch {
		case strings.HasSuffix(rel, ".key") && !bytes.Equal(data, before[rel]):
			t.Errorf("key %s replaced", rel)
		case strings.HasSuffix(rel, ".crt"):
			cert := parseCert(t, data)
			want := c.CertValidity
			if cert.IsCA {
				want = c.CAValidity
			}
			if got := cert.NotAfter.Sub(cert.NotBefore) - certBackdate; got != want {
				t.Errorf("%s: validity %s, want %s", rel, got, want)
			}
		}
	}
}

func TestRenderRefusesCAWithoutKey(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, filepath.Join(rendered(t), PKIDir), filepath.Join(dir, PKIDir))
	if err := os.Remove(filepath.Join(dir, PKIDir, "etcd", "ca.key")); err != nil {
		t.Fatal(err)
	}
	err := Render(testConfig(), dir)
	if err == nil || !strings.Contains(err.Error(), "refusing to replace a CA") {
		t.Fatalf("got %v", err)
	}
}

func TestRenderInvalidConfigWritesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "assets")
	c := testConfig()
	c.ServiceCIDR = "not-a-cidr"
	err := Render(c, dir)
	if err == nil || !strings.Contains(err.Error(), "--service-cidr") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("asset dir was created: %v", err)
	}
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

// TestCertificatesChain verifies every leaf against its CA for its usages.
func TestCertificatesChain(t *testing.T) {
	dir := filepath.Join(rendered(t), PKIDir)
	specs, err := certSpecs(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range specs {
		data, err := os.ReadFile(filepath.Join(dir, s.Base+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		cert := parseCert(t, data)
		if s.CA == "" {
			continue
		}
		caData, _ := os.ReadFile(filepath.Join(dir, s.CA+".crt"))
		pool := x509.NewCertPool()
		pool.AddCert(parseCert(t, caData))
		opts := x509.VerifyOptions{Roots: pool, KeyUsages: s.Config.Usages}
		if slices.Contains(s.Config.Usages, x509.ExtKeyUsageServerAuth) {
			opts.DNSName = "localhost"
		}
		if _, err := cert.Verify(opts); err != nil {
			t.Errorf("%s: %v", s.Base, err)
		}
	}
}

func TestKubeconfigs(t *testing.T) {
	dir := rendered(t)
	c := testConfig()
	for _, spec := range kubeconfigSpecs(c) {
		cfg, err := clientcmd.LoadFromFile(filepath.Join(dir, spec.File))
		if err != nil {
			t.Fatal(err)
		}
		rest, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
		if err != nil {
			t.Fatalf("%s: %v", spec.File, err)
		}
		if rest.Host != "https://192.0.2.10:6443" {
			t.Errorf("%s: server %s", spec.File, rest.Host)
		}
		cert := parseCert(t, rest.CertData)
		caPool := x509.NewCertPool()
		caPool.AddCert(parseCert(t, rest.CAData))
		if _, err := cert.Verify(x509.VerifyOptions{Roots: caPool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: %v", spec.File, err)
		}
		if cfg.CurrentContext != spec.User+"@kubernetes" {
			t.Errorf("%s: context %s", spec.File, cfg.CurrentContext)
		}
		if spec.File == KubeletKubeconfig && (cert.Subject.CommonName != "system:node:node1" || !slices.Equal(cert.Subject.Organization, []string{"system:nodes"})) {
			t.Errorf("kubelet.conf subject %s", cert.Subject)
		}
	}
}

// decodeAll decodes every document of a rendered file strictly.
func decodeAll(t *testing.T, path string) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(clientsetscheme.Scheme, serializer.EnableStrict)
	dec := codecs.UniversalDeserializer()
	reader := yamlutil.NewYAMLReader(bufioReader(data))
	var objs []runtime.Object
	for {
		doc, err := reader.Read()
		if err != nil {
			break
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// TestBootstrapPodsAcceptedByBootlet runs every bootstrap manifest through
// bootlet's own create path (kubelet defaulting and the apiserver's pod
// validation) and checks what the kubelet's later adoption relies on.
func TestBootstrapPodsAcceptedByBootlet(t *testing.T) {
	dir := rendered(t)
	for _, name := range Components {
		objs := decodeAll(t, filepath.Join(dir, BootstrapManifestsDir, name+".yaml"))
		if len(objs) != 1 {
			t.Fatalf("%s: %d objects", name, len(objs))
		}
		pod, ok := objs[0].(*v1.Pod)
		if !ok {
			t.Fatalf("%s: %T", name, objs[0])
		}
		out, err := podapi.DefaultPod(pod, "node1")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if out.UID != PodUID("kube-system", name, "node1") || out.Name != name || out.Namespace != "kube-system" {
			t.Errorf("%s: got %s/%s uid %s", name, out.Namespace, out.Name, out.UID)
		}
		if !out.Spec.HostNetwork || out.Spec.PriorityClassName != "system-node-critical" {
			t.Errorf("%s: hostNetwork %v priorityClass %q", name, out.Spec.HostNetwork, out.Spec.PriorityClassName)
		}
		for _, v := range out.Spec.Volumes {
			if v.HostPath == nil {
				t.Errorf("%s: volume %s is not a hostPath", name, v.Name)
				continue
			}
			if strings.HasPrefix(v.HostPath.Path, "/etc/kubernetes") {
				t.Errorf("%s: volume %s still points at %s", name, v.Name, v.HostPath.Path)
			}
		}
		ctr := out.Spec.Containers[0]
		if ctr.Command[0] != name || ctr.ImagePullPolicy != v1.PullIfNotPresent {
			t.Errorf("%s: command %q pull policy %s", name, ctr.Command[0], ctr.ImagePullPolicy)
		}
	}
}

func TestPodUID(t *testing.T) {
	a := PodUID("kube-system", "kube-apiserver", "node1")
	if a != PodUID("kube-system", "kube-apiserver", "node1") {
		t.Fatal("not deterministic")
	}
	for _, other := range []string{string(PodUID("kube-system", "kube-apiserver", "node2")), string(PodUID("kube-system", "etcd", "node1")), string(PodUID("default", "kube-apiserver", "node1"))} {
		if string(a) == other {
			t.Errorf("collision %s", other)
		}
	}
	if len(a) != 36 || a[14] != '5' {
		t.Errorf("not a version-5 UUID: %s", a)
	}
}

// TestBootstrapFlags checks the flags that come from the Config, and the
// one bootlet adds.
func TestBootstrapFlags(t *testing.T) {
	c := testConfig()
	c.ServiceCIDR, c.PodCIDR, c.ClusterDomain = "172.20.0.0/16", "10.200.0.0/16", "example.org"
	c.EtcdServers = []string{"https://10.0.0.5:2379"}
	c.EtcdDataDir, c.APIServerPort, c.KubernetesVersion = "/srv/etcd", 7443, "v1.36.1"
	pods, err := bootstrapPods(c, "/assets")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		Etcd: {"--data-dir=/srv/etcd", "--name=node1", "--listen-client-urls=https://127.0.0.1:2379,https://192.0.2.10:2379",
			"--initial-cluster=node1=https://192.0.2.10:2380", "--listen-metrics-urls=http://127.0.0.1:2381"},
		KubeAPIServer: {"--advertise-address=192.0.2.10", "--secure-port=7443", "--service-cluster-ip-range=172.20.0.0/16",
			"--etcd-servers=https://10.0.0.5:2379", "--service-account-issuer=https://kubernetes.default.svc.example.org",
			"--permit-port-sharing=true", "--authorization-mode=Node,RBAC",
			"--endpoint-reconciler-type=none", "--shutdown-delay-duration=5s", "--shutdown-watch-termination-grace-period=10s",
			"--goaway-chance=0.02"},
		KubeControllerManager: {"--cluster-cidr=10.200.0.0/16", "--allocate-node-cidrs=true", "--service-cluster-ip-range=172.20.0.0/16",
			"--kubeconfig=/etc/kubernetes/controller-manager.conf", "--leader-elect=true", "--cluster-name=kubernetes", "--permit-port-sharing=true"},
		KubeScheduler: {"--kubeconfig=/etc/kubernetes/scheduler.conf", "--leader-elect=true", "--permit-port-sharing=true"},
	}
	images := map[string]string{
		Etcd: "registry.k8s.io/etcd:3.6.8-0", KubeAPIServer: "registry.k8s.io/kube-apiserver:v1.36.1",
		KubeControllerManager: "registry.k8s.io/kube-controller-manager:v1.36.1", KubeScheduler: "registry.k8s.io/kube-scheduler:v1.36.1",
	}
	for _, pod := range pods {
		ctr := pod.Spec.Containers[0]
		for _, flag := range want[pod.Name] {
			if !slices.Contains(ctr.Command, flag) {
				t.Errorf("%s: missing %s in %v", pod.Name, flag, ctr.Command)
			}
		}
		// An upgrade's helper shares the member's client address
		// (docs/design/upgrade.md); only the port, never the address.
		if pod.Name == Etcd && (!slices.Contains(ctr.Command, "--socket-reuse-port=true") || slices.ContainsFunc(ctr.Command, func(s string) bool { return strings.HasPrefix(s, "--socket-reuse-address") })) {
			t.Errorf("etcd must share its port (and only its port): %v", ctr.Command)
		}
		if ctr.Image != images[pod.Name] {
			t.Errorf("%s: image %s", pod.Name, ctr.Image)
		}
		if pod.Name == KubeAPIServer && ctr.ReadinessProbe.HTTPGet.Path != "/readyz" {
			t.Errorf("apiserver readiness probe %v", ctr.ReadinessProbe)
		}
		if pod.Name == KubeAPIServer && !slices.Contains(ctr.Env, v1.EnvVar{Name: "GODEBUG", Value: "multipathtcp=0"}) {
			t.Errorf("apiserver env %v: want GODEBUG=multipathtcp=0 (its listener must be plain TCP to be steered)", ctr.Env)
		}
	}
}

func TestCredentialFiles(t *testing.T) {
	cases := []struct {
		cmd  []string
		want []string
	}{
		{[]string{"kube-scheduler", "--kubeconfig=/etc/kubernetes/scheduler.conf", "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf", "--leader-elect=true"}, []string{"scheduler.conf"}},
		{[]string{"x", "--a=/etc/kubernetes/pki/etcd/ca.crt", "--b=/etc/kubernetes/pki/ca.crt", "--c=/etc/kubernetesX/y", "--d=/etc/ssl/certs/z", "--e=/etc/kubernetes"}, []string{"pki/ca.crt", "pki/etcd/ca.crt"}},
		{[]string{"x", "/etc/kubernetes/not-a-flag", "--flag", "--cluster-signing-key-file="}, nil},
	}
	for _, tc := range cases {
		if got := credentialFiles(tc.cmd); !slices.Equal(got, tc.want) {
			t.Errorf("%v: got %v, want %v", tc.cmd, got, tc.want)
		}
	}
	if got := secretKey("pki/etcd/ca.crt"); got != "etcd-ca.crt" {
		t.Errorf("secretKey: %s", got)
	}
	if got := secretKey("controller-manager.conf"); got != "controller-manager.conf" {
		t.Errorf("secretKey: %s", got)
	}
}

// TestSelfHostedValid validates every self-hosted object with the
// apiserver's own validation (after defaulting and conversion, as the
// apiserver would), and runs each pod template through bootlet's pod create
// path, which is what the checkpointer will do with these pods.
func TestSelfHostedValid(t *testing.T) {
	dir := rendered(t)
	kinds := map[string]int{}
	for _, file := range []string{"rbac.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"} {
		for _, obj := range decodeAll(t, filepath.Join(dir, SelfHostedDir, file)) {
			kinds[obj.GetObjectKind().GroupVersionKind().Kind]++
			legacyscheme.Scheme.Default(obj)
			var errs field.ErrorList
			var tmpl *v1.PodTemplateSpec
			var name string
			switch o := obj.(type) {
			case *v1.Secret:
				in := &api.Secret{}
				mustConvert(t, o, in)
				errs = corevalidation.ValidateSecret(in)
				name = o.Name
			case *appsv1.DaemonSet:
				in := &apps.DaemonSet{}
				mustConvert(t, o, in)
				errs = appsvalidation.ValidateDaemonSet(in, corevalidation.PodValidationOptions{})
				tmpl, name = &o.Spec.Template, o.Name
				if o.Spec.Template.Annotations[btypes.AnnotationCheckpoint] != "true" || !o.Spec.Template.Spec.HostNetwork ||
					o.Spec.Template.Spec.PriorityClassName != "system-node-critical" {
					t.Errorf("apiserver DaemonSet template: %+v", o.Spec.Template.ObjectMeta)
				}
			case *appsv1.Deployment:
				in := &apps.Deployment{}
				mustConvert(t, o, in)
				errs = appsvalidation.ValidateDeployment(in, corevalidation.PodValidationOptions{})
				tmpl, name = &o.Spec.Template, o.Name
				if !slices.Contains(o.Spec.Template.Spec.Containers[0].Command, "--leader-elect=true") {
					t.Errorf("%s: no leader election", o.Name)
				}
			case *policyv1.PodDisruptionBudget:
				in := &policy.PodDisruptionBudget{}
				mustConvert(t, o, in)
				errs = policyvalidation.ValidatePodDisruptionBudget(in, policyvalidation.PodDisruptionBudgetValidationOptions{})
				name = o.Name
			case *rbacv1.ClusterRoleBinding:
				in := &rbac.ClusterRoleBinding{}
				mustConvert(t, o, in)
				errs = rbacvalidation.ValidateClusterRoleBinding(in)
				name = o.Name
			default:
				t.Fatalf("%s: unexpected %T", file, obj)
			}
			if len(errs) > 0 {
				t.Errorf("%s %s: %v", file, name, errs.ToAggregate())
			}
			if tmpl == nil {
				continue
			}
			if _, ok := tmpl.Spec.NodeSelector[btypes.LabelControlPlanePods]; !ok || len(tmpl.Spec.NodeSelector) != 1 || len(tmpl.Spec.Containers[0].Ports) != 0 {
				t.Errorf("%s: nodeSelector %v ports %v", name, tmpl.Spec.NodeSelector, tmpl.Spec.Containers[0].Ports)
			}
			if !slices.Contains(tmpl.Spec.Containers[0].Command, "--permit-port-sharing=true") {
				t.Errorf("%s: no --permit-port-sharing", name)
			}
			if name == KubeAPIServer && (!slices.Contains(tmpl.Spec.Containers[0].Command, "--goaway-chance=0.02") ||
				!slices.Contains(tmpl.Spec.Containers[0].Env, v1.EnvVar{Name: "GODEBUG", Value: "multipathtcp=0"})) {
				t.Errorf("%s: the self-hosted apiserver (and so its checkpoint) must be ready for the hand-over: %v %v", name, tmpl.Spec.Containers[0].Command, tmpl.Spec.Containers[0].Env)
			}
			// The rolling update's hand-over: the old pod serves through a
			// preStop sleep before its SIGTERM, and the grace period covers
			// the sleep, the shutdown delay and the watch grace.
			if name == KubeAPIServer {
				lc := tmpl.Spec.Containers[0].Lifecycle
				grace := tmpl.Spec.TerminationGracePeriodSeconds
				if lc == nil || lc.PreStop == nil || lc.PreStop.Sleep == nil || lc.PreStop.Sleep.Seconds < 10 ||
					grace == nil || *grace < lc.PreStop.Sleep.Seconds+5+10 {
					t.Errorf("%s: the rolling update needs a preStop sleep covered by the grace period: %+v %v", name, lc, grace)
				}
			}
			// Ready only once its own process serves (the gate bootlet
			// sets); the Deployments' pods have no such gate: nothing sets it
			// for them, and they share no port.
			wantGates := []v1.PodReadinessGate(nil)
			if name == KubeAPIServer {
				wantGates = []v1.PodReadinessGate{{ConditionType: "bootlet.dev/serving"}}
			}
			if !reflect.DeepEqual(tmpl.Spec.ReadinessGates, wantGates) {
				t.Errorf("%s: readinessGates %+v, want %+v", name, tmpl.Spec.ReadinessGates, wantGates)
			}
			// The self-hosted apiserver keeps the default lease endpoint
			// reconciler: it is the one that writes default/kubernetes.
			for _, arg := range tmpl.Spec.Containers[0].Command {
				if strings.HasPrefix(arg, "--endpoint-reconciler-type") || strings.HasPrefix(arg, "--shutdown-send-retry-after") {
					t.Errorf("%s: unexpected %s", name, arg)
				}
			}
			pod := &v1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
			pod.Name, pod.Namespace = name+"-abcde", "kube-system"
			if _, err := podapi.DefaultPod(pod, "node1"); err != nil {
				t.Errorf("%s template is not acceptable to bootlet: %v", name, err)
			}
		}
	}
	want := map[string]int{"Secret": 3, "DaemonSet": 1, "Deployment": 2, "PodDisruptionBudget": 2, "ClusterRoleBinding": 2}
	if !maps.Equal(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
}

// TestSelfHostedSecretsMatchFlags: each Secret holds exactly the files its
// component's flags name, with the bytes of the rendered files.
func TestSelfHostedSecretsMatchFlags(t *testing.T) {
	dir := rendered(t)
	for _, name := range []string{KubeAPIServer, KubeControllerManager, KubeScheduler} {
		objs := decodeAll(t, filepath.Join(dir, SelfHostedDir, name+".yaml"))
		secret := objs[0].(*v1.Secret)
		var cmd []string
		switch o := objs[1].(type) {
		case *appsv1.DaemonSet:
			cmd = o.Spec.Template.Spec.Containers[0].Command
		case *appsv1.Deployment:
			cmd = o.Spec.Template.Spec.Containers[0].Command
		}
		// No pod mounts the Secret (the Node authorizer would hand it to
		// the master's kubelet); the template mounts its mirror, which
		// maps every key to the path its flag names.
		if refs := secretsReferenced(t, objs[1]); len(refs) > 0 {
			t.Errorf("%s: the template references Secrets %v", name, refs)
		}
		target, ok, err := credmirror.TargetOf(secret)
		if err != nil || !ok {
			t.Fatalf("%s: no mirror target: %v", name, err)
		}
		if want := CredentialDir(dir, name); target.Dir != want {
			t.Errorf("%s: mirrored to %s, want %s", name, target.Dir, want)
		}
		if hp := hostPathOf(t, objs[1], "kubernetes"); hp == nil || hp.Path != target.Dir || hp.Type == nil || *hp.Type != v1.HostPathDirectory {
			t.Errorf("%s: credential volume %+v, want hostPath %s (Directory)", name, hp, target.Dir)
		}
		if _, labelled := secret.Labels[btypes.LabelCredentials]; !labelled {
			t.Errorf("%s: the Secret lacks the label %s", name, btypes.LabelCredentials)
		}
		mapped := map[string]string{}
		for _, it := range target.Items {
			mapped[it.Key] = it.Path
		}
		files := credentialFiles(cmd)
		for _, rel := range files {
			if mapped[secretKey(rel)] != rel {
				t.Errorf("%s: key %s mirrored to %q, want %s", name, secretKey(rel), mapped[secretKey(rel)], rel)
			}
		}
		if len(files) != len(secret.Data) || len(files) == 0 {
			t.Errorf("%s: %d files named by flags, %d secret keys", name, len(files), len(secret.Data))
		}
		for _, rel := range files {
			want, err := os.ReadFile(filepath.Join(dir, rel))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(secret.Data[secretKey(rel)], want) {
				t.Errorf("%s: secret key %s differs from %s", name, secretKey(rel), rel)
			}
		}
	}
}

// podTemplate is the pod template of a DaemonSet or a Deployment.
func podTemplate(t *testing.T, o runtime.Object) *v1.PodTemplateSpec {
	t.Helper()
	switch w := o.(type) {
	case *appsv1.DaemonSet:
		return &w.Spec.Template
	case *appsv1.Deployment:
		return &w.Spec.Template
	}
	t.Fatalf("%T is not a workload", o)
	return nil
}

// secretsReferenced are the Secrets a workload's pods would reference, by
// the Node authorizer's own visitor.
func secretsReferenced(t *testing.T, o runtime.Object) []string {
	pod := &v1.Pod{Spec: podTemplate(t, o).Spec}
	var names []string
	podutil.VisitPodSecretNames(pod, func(n string) bool { names = append(names, n); return true })
	return names
}

// hostPathOf is the hostPath of a workload's volume NAME.
func hostPathOf(t *testing.T, o runtime.Object, name string) *v1.HostPathVolumeSource {
	for _, v := range podTemplate(t, o).Spec.Volumes {
		if v.Name == name {
			return v.HostPath
		}
	}
	return nil
}

func mustConvert(t *testing.T, in, out runtime.Object) {
	t.Helper()
	if err := legacyscheme.Scheme.Convert(in, out, nil); err != nil {
		t.Fatal(err)
	}
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }

// TestBootstrapStartOrder: the bootstrap pods that reach the apiserver
// through a kubeconfig start after it (bootlet.dev/start-after); etcd and the
// apiserver start at once; the self-hosted templates carry no start order
// (the kubelet runs them, and a checkpoint of one must not wait for a pod
// named kube-apiserver).
func TestBootstrapStartOrder(t *testing.T) {
	pods, err := bootstrapPods(testConfig(), "/assets")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{Etcd: "", KubeAPIServer: "", KubeControllerManager: KubeAPIServer, KubeScheduler: KubeAPIServer}
	for _, pod := range pods {
		if got := pod.Annotations[btypes.AnnotationStartAfter]; got != want[pod.Name] {
			t.Errorf("%s: %s=%q, want %q", pod.Name, btypes.AnnotationStartAfter, got, want[pod.Name])
		}
	}
	// selfHostedFiles builds the templates from kubeadmPods.
	for name, pod := range kubeadmPods(testConfig()) {
		if v, ok := pod.Annotations[btypes.AnnotationStartAfter]; ok {
			t.Errorf("the self-hosted %s carries %s=%q", name, btypes.AnnotationStartAfter, v)
		}
	}
}
