package manifests

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	kubeletconfiginternal "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletvalidation "k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	"k8s.io/kubernetes/pkg/kubelet/kubeletconfig/configfiles"
	utilfs "k8s.io/kubernetes/pkg/util/filesystem"
)

// loadKubeletConfig reads a kubelet configuration file the way the kubelet
// does at its start (its own loader: decoding, defaulting, relative paths),
// and validates it with the kubelet's own validation.
func loadKubeletConfig(t *testing.T, path string) *kubeletconfiginternal.KubeletConfiguration {
	t.Helper()
	loader, err := configfiles.NewFsLoader(&utilfs.DefaultFs{}, path)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := loader.Load(context.Background())
	if err != nil {
		t.Fatalf("the kubelet cannot load %s: %v", path, err)
	}
	if err := kubeletvalidation.ValidateKubeletConfiguration(kc, utilfeature.DefaultFeatureGate); err != nil {
		t.Fatalf("the kubelet refuses %s: %v", path, err)
	}
	return kc
}

// TestRenderedKubeletConfiguration: make up's kubelet authenticates every
// request (no anonymous, x509 of the kubelet client CA only, bearer tokens
// reviewed by the apiserver) and has the apiserver authorize it.
func TestRenderedKubeletConfiguration(t *testing.T) {
	dir := rendered(t)
	kc := loadKubeletConfig(t, filepath.Join(dir, KubeletConfigFile))
	c := testConfig()
	checks := []struct {
		what      string
		got, want any
	}{
		{"authentication.anonymous.enabled", kc.Authentication.Anonymous.Enabled, false},
		{"authentication.webhook.enabled", kc.Authentication.Webhook.Enabled, true},
		{"authentication.x509.clientCAFile", kc.Authentication.X509.ClientCAFile, filepath.Join(dir, PKIDir, KubeletClientCA+".crt")},
		{"authorization.mode", kc.Authorization.Mode, kubeletconfiginternal.KubeletAuthorizationModeWebhook},
		{"readOnlyPort", kc.ReadOnlyPort, int32(0)},
		{"port", kc.Port, int32(DefaultKubeletPort)},
		{"healthzBindAddress", kc.HealthzBindAddress, "127.0.0.1"},
		{"healthzPort", kc.HealthzPort, int32(DefaultKubeletHealthzPort)},
		{"address", kc.Address, "0.0.0.0"},
		{"registerNode", kc.RegisterNode, true},
		{"staticPodPath", kc.StaticPodPath, c.KubeletStaticPodPath},
		{"containerRuntimeEndpoint", kc.ContainerRuntimeEndpoint, c.KubeletRuntimeEndpoint},
		{"podLogsDir", kc.PodLogsDir, c.KubeletPodLogsDir},
		{"failCgroupV1", kc.FailCgroupV1, false},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.what, ch.got, ch.want)
		}
	}
}

// kubeletDefaults is what the kubelet's own loader makes of a configuration
// that sets nothing: its defaults.
func kubeletDefaults(t *testing.T) *kubeletconfiginternal.KubeletConfiguration {
	t.Helper()
	path := writeTemp(t, "empty.yaml", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"))
	loader, err := configfiles.NewFsLoader(&utilfs.DefaultFs{}, path)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := loader.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// TestKubeletConfigurationKeepsEvictionDefaults: neither the master's
// kubelet-config.yaml nor the kubelet-config ConfigMap that `bootlet join`
// gives every worker sets local storage isolation, hard eviction or image
// GC, so the kubelet runs with its defaults: it reports ephemeral-storage,
// evicts a pod past its ephemeral-storage limit or emptyDir sizeLimit, and
// evicts before the disk or memory runs out.
func TestKubeletConfigurationKeepsEvictionDefaults(t *testing.T) {
	dir := rendered(t)
	master, err := os.ReadFile(filepath.Join(dir, KubeletConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	cm := renderedKubeletConfigMap(t, dir)
	def := kubeletDefaults(t)
	if !def.LocalStorageCapacityIsolation || def.ImageGCHighThresholdPercent >= 100 {
		t.Fatalf("the kubelet's defaults are not what this test expects: isolation %v, image GC %d%%",
			def.LocalStorageCapacityIsolation, def.ImageGCHighThresholdPercent)
	}
	for name, data := range map[string]string{KubeletConfigFile: string(master), "ConfigMap " + KubeletConfigMap: cm.Data[KubeletConfigMapKey]} {
		for _, field := range []string{"localStorageCapacityIsolation", "evictionHard", "evictionSoft", "evictionMinimumReclaim",
			"imageGCHighThresholdPercent", "imageGCLowThresholdPercent", "mergeDefaultEvictionSettings"} {
			if strings.Contains(data, field+":") {
				t.Errorf("%s sets %s:\n%s", name, field, data)
			}
		}
		kc := loadKubeletConfig(t, writeTemp(t, "config.yaml", []byte(data)))
		// An evictionHard left unset reaches the kubelet's start empty,
		// where it becomes eviction.DefaultEvictionHard (memory.available
		// 100Mi, nodefs.available 10%, imagefs.available 15%, inodes 5%);
		// a map that is set replaces those defaults altogether.
		if kc.LocalStorageCapacityIsolation != def.LocalStorageCapacityIsolation || len(kc.EvictionHard) != 0 ||
			kc.ImageGCHighThresholdPercent != def.ImageGCHighThresholdPercent || kc.ImageGCLowThresholdPercent != def.ImageGCLowThresholdPercent {
			t.Errorf("%s: localStorageCapacityIsolation %v, evictionHard %v, image GC %d/%d; the kubelet's defaults: %v, %v, %d/%d", name,
				kc.LocalStorageCapacityIsolation, kc.EvictionHard, kc.ImageGCHighThresholdPercent, kc.ImageGCLowThresholdPercent,
				def.LocalStorageCapacityIsolation, def.EvictionHard, def.ImageGCHighThresholdPercent, def.ImageGCLowThresholdPercent)
		}
	}
}

// TestKubeletConfigurationStandalone: a kubelet without an apiserver cannot
// use webhooks; it listens on 127.0.0.1 only and still refuses anonymous
// requests.
func TestKubeletConfigurationStandalone(t *testing.T) {
	dir := t.TempDir()
	for _, ca := range []string{"", "/etc/e2e/client-ca.crt"} {
		cfg, err := KubeletConfiguration(KubeletOptions{StaticPodPath: "/m", ContainerRuntimeEndpoint: "unix:///run/c.sock", PodLogsDir: "/l",
			Port: 12345, HealthzPort: 12346, ClientCAFile: ca, Standalone: true})
		if err != nil {
			t.Fatal(err)
		}
		data, err := MarshalKubeletConfiguration(cfg)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		kc := loadKubeletConfig(t, path)
		if kc.Address != "127.0.0.1" || kc.Authentication.Anonymous.Enabled || kc.Authentication.Webhook.Enabled ||
			kc.Authentication.X509.ClientCAFile != ca || kc.Authorization.Mode != kubeletconfiginternal.KubeletAuthorizationModeAlwaysAllow ||
			kc.RegisterNode || kc.ReadOnlyPort != 0 || kc.Port != 12345 || kc.HealthzPort != 12346 {
			t.Errorf("standalone kubelet (client CA %q):\n%s", ca, data)
		}
	}
}

func TestKubeletConfigurationRefusesBadOptions(t *testing.T) {
	good := KubeletOptions{StaticPodPath: "/m", ContainerRuntimeEndpoint: "unix:///run/c.sock", PodLogsDir: "/l", Port: 1, HealthzPort: 2}
	for name, mutate := range map[string]func(*KubeletOptions){
		"no static pod path":    func(o *KubeletOptions) { o.StaticPodPath = "" },
		"relative log dir":      func(o *KubeletOptions) { o.PodLogsDir = "logs" },
		"relative client CA":    func(o *KubeletOptions) { o.ClientCAFile = "pki/ca.crt" },
		"no port":               func(o *KubeletOptions) { o.Port = 0 },
		"no runtime endpoint":   func(o *KubeletOptions) { o.ContainerRuntimeEndpoint = "" },
		"negative healthz port": func(o *KubeletOptions) { o.HealthzPort = -1 },
	} {
		o := good
		mutate(&o)
		if _, err := KubeletConfiguration(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := KubeletConfiguration(good); err != nil {
		t.Fatal(err)
	}
}

func readCert(t *testing.T, dir, base string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, PKIDir, base+".crt"))
	if err != nil {
		t.Fatal(err)
	}
	return parseCert(t, data)
}

func verifiesAgainst(cert, ca *x509.Certificate) error {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err
}

// TestKubeletClientCAIsolation: the kubelet's client CA signs the
// apiserver's kubelet client and nothing else, and the cluster CA (which
// also signs the controller-manager's, the scheduler's and CSR-approved
// certificates) does not sign it; so no certificate but the apiserver's
// reaches the kubelet's API.
func TestKubeletClientCAIsolation(t *testing.T) {
	dir := rendered(t)
	kubeletCA, clusterCA := readCert(t, dir, KubeletClientCA), readCert(t, dir, CA)
	if string(kubeletCA.RawSubjectPublicKeyInfo) == string(clusterCA.RawSubjectPublicKeyInfo) {
		t.Fatal("the kubelet client CA has the cluster CA's key")
	}
	client := readCert(t, dir, APIServerKubeletClnt)
	if err := verifiesAgainst(client, kubeletCA); err != nil {
		t.Errorf("apiserver-kubelet-client does not chain to the kubelet client CA: %v", err)
	}
	if verifiesAgainst(client, clusterCA) == nil {
		t.Error("apiserver-kubelet-client chains to the cluster CA")
	}
	for _, base := range []string{ControllerMgrClient, SchedulerClient, AdminClient, KubeletClient, APIServer, FrontProxyClient, APIServerEtcdClient} {
		if verifiesAgainst(readCert(t, dir, base), kubeletCA) == nil {
			t.Errorf("%s verifies against the kubelet client CA", base)
		}
	}
	// What the controller-manager's CSR signer issues is signed by its
	// --cluster-signing-cert-file, which must be the cluster CA.
	for _, name := range []string{KubeControllerManager, KubeAPIServer, KubeScheduler, Etcd} {
		data, err := os.ReadFile(filepath.Join(dir, BootstrapManifestsDir, name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), KubeletClientCA+".key") {
			t.Errorf("the %s pod names the kubelet client CA's key", name)
		}
		if name == KubeControllerManager && !strings.Contains(string(data), "--cluster-signing-cert-file=/etc/kubernetes/pki/"+CASigning+".crt") {
			t.Errorf("the controller-manager does not sign CSRs with the cluster CA:\n%s", data)
		}
	}
	// The apiserver's kubelet client is authorized by RBAC (the kubelet's
	// webhook asks the apiserver): kubeadm's binding names its CN.
	data, err := os.ReadFile(filepath.Join(dir, SelfHostedDir, "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := yamlutil.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096)
	found := false
	for {
		var crb rbacv1.ClusterRoleBinding
		if err := dec.Decode(&crb); err != nil {
			break
		}
		if crb.RoleRef.Name == "system:kubelet-api-admin" && len(crb.Subjects) == 1 && crb.Subjects[0].Kind == rbacv1.UserKind && crb.Subjects[0].Name == client.Subject.CommonName {
			found = true
		}
	}
	if !found {
		t.Errorf("no binding of %q to system:kubelet-api-admin in rbac.yaml:\n%s", client.Subject.CommonName, data)
	}
}

// TestRenderReissuesKubeletClientUnderItsCA: assets rendered before the
// kubelet client CA existed get it, and their apiserver-kubelet-client is
// re-issued under it (same key), on the next render.
func TestRenderReissuesKubeletClientUnderItsCA(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, rendered(t), dir)
	oldKey, _ := os.ReadFile(filepath.Join(dir, PKIDir, APIServerKubeletClnt+".key"))
	clusterCA := readCert(t, dir, CA)
	// An old layout: the client signed by the cluster CA, no kubelet CA.
	specs, err := certSpecs(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	spec := specByBase(t, specs, APIServerKubeletClnt)
	spec.CA = CA
	caPair, err := loadOrCreatePair(filepath.Join(dir, PKIDir), specByBase(t, specs, CA), nil, time.Now(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, PKIDir, APIServerKubeletClnt+".crt"))
	if _, err := loadOrCreatePair(filepath.Join(dir, PKIDir), spec, caPair, time.Now(), t.Logf); err != nil {
		t.Fatal(err)
	}
	if verifiesAgainst(readCert(t, dir, APIServerKubeletClnt), clusterCA) != nil {
		t.Fatal("setup: the old client is not signed by the cluster CA")
	}
	for _, f := range []string{KubeletClientCA + ".crt", KubeletClientCA + ".key"} {
		os.Remove(filepath.Join(dir, PKIDir, f))
	}
	if err := Render(testConfig(), dir); err != nil {
		t.Fatal(err)
	}
	if err := verifiesAgainst(readCert(t, dir, APIServerKubeletClnt), readCert(t, dir, KubeletClientCA)); err != nil {
		t.Errorf("after a re-render: %v", err)
	}
	if newKey, _ := os.ReadFile(filepath.Join(dir, PKIDir, APIServerKubeletClnt+".key")); string(newKey) != string(oldKey) {
		t.Error("the re-render replaced the client's key")
	}
}
