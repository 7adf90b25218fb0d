package manifests

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"maps"
	"net"
	neturl "net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/embed"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/keyutil"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/apps"
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"

	mastersrules "github.com/bootlet/bootlet/masters"
)

// threeMasters is testConfig for three masters behind a VIP.
func threeMasters() Config {
	c := testConfig()
	c.NodeName, c.AdvertiseAddress = "", ""
	c.Masters = []Master{{"master-1", "192.0.2.11"}, {"master-2", "192.0.2.12"}, {"master-3", "192.0.2.13"}}
	c.ControlPlaneEndpoint = "192.0.2.10:6443"
	return c
}

var (
	mastersOnce sync.Once
	mastersDir  string
	mastersErr  error
)

// renderedMasters renders threeMasters once per test binary. Tests must not
// modify it.
func renderedMasters(t *testing.T) string {
	t.Helper()
	mastersOnce.Do(func() {
		mastersDir, mastersErr = os.MkdirTemp("", "bootlet-render-masters-")
		if mastersErr == nil {
			mastersErr = Render(threeMasters(), mastersDir)
		}
	})
	if mastersErr != nil {
		t.Fatal(mastersErr)
	}
	return mastersDir
}

func TestValidateMasters(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*Config)
		wantErr string // substring; "" means valid
	}{
		{"three masters", func(*Config) {}, ""},
		{"one master, no endpoint", func(c *Config) { c.Masters = c.Masters[:1]; c.ControlPlaneEndpoint = "" }, ""},
		{"endpoint without a port", func(c *Config) { c.ControlPlaneEndpoint = "192.0.2.10" }, ""},
		{"endpoint a DNS name", func(c *Config) { c.ControlPlaneEndpoint = "api.example.com:6443" }, ""},
		{"a master's own config", func(c *Config) { *c = c.ForMaster(1) }, ""},
		{"no endpoint", func(c *Config) { c.ControlPlaneEndpoint = "" }, "--control-plane-endpoint: Required value"},
		{"endpoint port not the apiserver's", func(c *Config) { c.ControlPlaneEndpoint = "192.0.2.10:7443" }, `--control-plane-endpoint: Invalid value: "192.0.2.10:7443": the port must be the apiserver's`},
		{"endpoint bad port", func(c *Config) { c.ControlPlaneEndpoint = "192.0.2.10:70000" }, "--control-plane-endpoint: Invalid value"},
		{"endpoint bad host", func(c *Config) { c.ControlPlaneEndpoint = "API_VIP:6443" }, "--control-plane-endpoint: Invalid value"},
		{"bad master name", func(c *Config) { c.Masters[1].Name = "Master_2" }, "--master[1].name: Invalid value"},
		{"empty master name", func(c *Config) { c.Masters[1].Name = "" }, "--master[1].name: Required value"},
		{"master address not an IP", func(c *Config) { c.Masters[2].Address = "master-3" }, "--master[2].address: Invalid value"},
		{"master address loopback", func(c *Config) { c.Masters[2].Address = "127.0.0.1" }, "--master[2].address: Invalid value"},
		{"duplicate name", func(c *Config) { c.Masters[2].Name = "master-1" }, `--master[2].name: Duplicate value: "master-1"`},
		{"duplicate address", func(c *Config) { c.Masters[1].Address = "192.0.2.11" }, `--master[1].address: Duplicate value: "192.0.2.11"`},
		{"mixed families", func(c *Config) { c.Masters[1].Address = "2001:db8::12" }, "--master[1].address: Invalid value: \"2001:db8::12\": must be of the first master's IP family"},
		{"node name besides the masters", func(c *Config) { c.NodeName = "node1" }, "--node-name: Invalid value"},
		{"a master with another's address", func(c *Config) { c.NodeName, c.AdvertiseAddress = "master-1", "192.0.2.12" }, "--node-name: Invalid value"},
		{"relative master asset dir", func(c *Config) { c.MasterAssetDir = "etc/kubernetes" }, "--master-asset-dir"},
		{"one node with an endpoint", func(c *Config) { *c = testConfig(); c.ControlPlaneEndpoint = "192.0.2.10:6443" }, ""},
		{"one node with a bad endpoint", func(c *Config) { *c = testConfig(); c.ControlPlaneEndpoint = "192.0.2.10:1" }, "--control-plane-endpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := threeMasters()
			tc.mutate(&c)
			got := c.Validate().ToAggregate()
			switch {
			case tc.wantErr == "" && got != nil:
				t.Fatalf("unexpected errors: %v", got)
			case tc.wantErr != "" && got == nil:
				t.Fatalf("no error, want %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(got.Error(), tc.wantErr):
				t.Fatalf("error %q does not contain %q", got, tc.wantErr)
			}
		})
	}
}

// A bad masters Config is an Invalid status naming the flag, and writes
// nothing.
func TestRenderMastersInvalid(t *testing.T) {
	dir := t.TempDir()
	c := threeMasters()
	c.ControlPlaneEndpoint = ""
	err := Render(c, dir)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "--control-plane-endpoint") {
		t.Fatalf("got %v, want Invalid naming --control-plane-endpoint", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("wrote %d entries", len(entries))
	}
}

// TestPerNodePairsAreTheNodeDependentOnes: the pairs two masters' specs
// differ in are exactly perNodePairs, so every other pair is shared, and a
// pair that comes to name the node must join the list.
func TestPerNodePairsAreTheNodeDependentOnes(t *testing.T) {
	c := threeMasters()
	a, err := certSpecs(c.ForMaster(0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := certSpecs(c.ForMaster(1))
	if err != nil {
		t.Fatal(err)
	}
	var differ []string
	for i := range a {
		if a[i].Base != b[i].Base {
			t.Fatalf("spec order differs: %s, %s", a[i].Base, b[i].Base)
		}
		if !equalSpec(a[i], b[i]) {
			differ = append(differ, a[i].Base)
		}
	}
	want := slices.Clone(perNodePairs)
	sort.Strings(differ)
	sort.Strings(want)
	if !slices.Equal(differ, want) {
		t.Fatalf("specs differing between masters: %v, perNodePairs %v", differ, want)
	}
}

func equalSpec(a, b certSpec) bool {
	return a.CA == b.CA && a.Validity == b.Validity && a.Config.CommonName == b.Config.CommonName &&
		slices.Equal(a.Config.Organization, b.Config.Organization) &&
		slices.Equal(a.Config.AltNames.DNSNames, b.Config.AltNames.DNSNames) && ipsEqual(a.Config.AltNames.IPs, b.Config.AltNames.IPs)
}

// perNodeFile says whether a file of a master's dir is its own: its
// bootstrap pods, its kubelet's kubeconfig, and the pairs of perNodePairs.
func perNodeFile(rel string) bool {
	if strings.HasPrefix(rel, BootstrapManifestsDir+"/") || rel == KubeletKubeconfig {
		return true
	}
	for _, base := range perNodePairs {
		if rel == filepath.Join(PKIDir, base+".crt") || rel == filepath.Join(PKIDir, base+".key") {
			return true
		}
	}
	return false
}

// Every master's dir has a single node's layout; what the masters share is
// byte for byte the same (self-hosted/ included: whichever master's pivot
// creates its objects, they are the same), what is a master's own differs.
func TestRenderMastersLayoutAndSharing(t *testing.T) {
	dir := renderedMasters(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"master-1", "master-2", "master-3"}) {
		t.Fatalf("asset dir holds %v", names)
	}
	single := readTree(t, rendered(t))
	trees := map[string]map[string][]byte{}
	for _, m := range threeMasters().Masters {
		trees[m.Name] = readTree(t, MasterDir(dir, m.Name))
		if got, want := slices.Sorted(maps.Keys(trees[m.Name])), slices.Sorted(maps.Keys(single)); !slices.Equal(got, want) {
			t.Fatalf("%s has files %v, a single node %v", m.Name, got, want)
		}
		for rel := range trees[m.Name] {
			fi, err := os.Stat(filepath.Join(MasterDir(dir, m.Name), rel))
			if err != nil {
				t.Fatal(err)
			}
			si, err := os.Stat(filepath.Join(rendered(t), rel))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode() != si.Mode() {
				t.Errorf("%s/%s: mode %v, a single node's %v", m.Name, rel, fi.Mode(), si.Mode())
			}
		}
	}
	var shared int
	for rel, data := range trees["master-1"] {
		for _, other := range []string{"master-2", "master-3"} {
			same := string(data) == string(trees[other][rel])
			switch {
			case perNodeFile(rel) && same:
				t.Errorf("%s is the same for master-1 and %s, but is a master's own", rel, other)
			case !perNodeFile(rel) && !same:
				t.Errorf("%s differs between master-1 and %s, but is shared", rel, other)
			}
		}
		if !perNodeFile(rel) {
			shared++
		}
	}
	for _, must := range []string{"pki/ca.key", "pki/front-proxy-ca.key", "pki/etcd/ca.key", "pki/kubelet-client-ca.key", "pki/ca-signing.crt", "pki/sa.key", "pki/sa.pub",
		"pki/apiserver.key", BootstrapKubeletKubeconfig, AuthenticationConfigFile, "self-hosted/join.yaml", "self-hosted/kube-apiserver.yaml", AdminKubeconfig} {
		if perNodeFile(must) {
			t.Errorf("%s must be shared", must)
		}
	}
	t.Logf("%d shared files, %d a master's own", shared, len(trees["master-1"])-shared)
}

// Each master's certificates: the apiserver's verifies for every master's
// name and IP and the endpoint; etcd's and the kubelet's name the master.
func TestRenderMastersCertificates(t *testing.T) {
	dir := renderedMasters(t)
	c := threeMasters()
	for _, m := range c.Masters {
		md := MasterDir(dir, m.Name)
		pool := func(ca string) *x509.CertPool {
			p := x509.NewCertPool()
			p.AddCert(masterCert(t, filepath.Join(md, PKIDir, ca+".crt")))
			return p
		}
		apiserver := masterCert(t, filepath.Join(md, PKIDir, APIServer+".crt"))
		for _, name := range []string{"192.0.2.10", "192.0.2.11", "192.0.2.12", "192.0.2.13", "master-1", "master-2", "master-3", "127.0.0.1", "kubernetes.default.svc", "10.96.0.1"} {
			if _, err := apiserver.Verify(x509.VerifyOptions{DNSName: name, Roots: pool(CA), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("%s: the apiserver certificate does not verify for %s: %v", m.Name, name, err)
			}
		}
		for _, base := range []string{EtcdServer, EtcdPeer} {
			cert := masterCert(t, filepath.Join(md, PKIDir, base+".crt"))
			if cert.Subject.CommonName != m.Name || !slices.Equal(cert.DNSNames, []string{"localhost", m.Name}) ||
				!slices.Equal(ipStrings(cert.IPAddresses), []string{m.Address, "127.0.0.1", "::1"}) {
				t.Errorf("%s %s: CN %s, SANs %v %v", m.Name, base, cert.Subject.CommonName, cert.DNSNames, cert.IPAddresses)
			}
			if _, err := cert.Verify(x509.VerifyOptions{DNSName: m.Address, Roots: pool(EtcdCA), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("%s %s: %v", m.Name, base, err)
			}
			for _, other := range c.Masters {
				if other.Name != m.Name {
					if err := cert.VerifyHostname(other.Address); err == nil {
						t.Errorf("%s %s verifies for %s", m.Name, base, other.Address)
					}
				}
			}
		}
		kubelet := masterCert(t, filepath.Join(md, PKIDir, KubeletClient+".crt"))
		if kubelet.Subject.CommonName != "system:node:"+m.Name || !slices.Equal(kubelet.Subject.Organization, []string{"system:nodes"}) {
			t.Errorf("%s: kubelet client %s", m.Name, kubelet.Subject)
		}
	}
}

func masterCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseCert(t, data)
}

// Every kubeconfig of every master, the bootstrap kubeconfig and
// cluster-info name the control-plane endpoint.
func TestRenderMastersKubeconfigServers(t *testing.T) {
	dir := renderedMasters(t)
	c := threeMasters()
	const want = "https://192.0.2.10:6443"
	for i, m := range c.Masters {
		md := MasterDir(dir, m.Name)
		files := []string{BootstrapKubeletKubeconfig}
		for _, spec := range kubeconfigSpecs(c.ForMaster(i)) {
			files = append(files, spec.File)
		}
		for _, f := range files {
			cfg, err := clientcmd.LoadFromFile(filepath.Join(md, f))
			if err != nil {
				t.Fatal(err)
			}
			for name, cl := range cfg.Clusters {
				if cl.Server != want {
					t.Errorf("%s/%s: cluster %s server %s", m.Name, f, name, cl.Server)
				}
			}
		}
		for _, obj := range decodeAll(t, filepath.Join(md, SelfHostedDir, JoinFile)) {
			if cm, ok := obj.(*v1.ConfigMap); ok && cm.Name == bootstrapapi.ConfigMapClusterInfo {
				cfg, err := clientcmd.Load([]byte(cm.Data[bootstrapapi.KubeConfigKey]))
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Clusters[""].Server != want {
					t.Errorf("%s: cluster-info server %s", m.Name, cfg.Clusters[""].Server)
				}
			}
		}
		// The add-ons reach the apiserver at the endpoint too.
		proxy, err := os.ReadFile(filepath.Join(md, SelfHostedDir, "addon-kube-proxy.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		flannel, err := os.ReadFile(filepath.Join(md, SelfHostedDir, "addon-flannel.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(proxy), "server: "+want) || !strings.Contains(string(flannel), "value: 192.0.2.10\n") {
			t.Errorf("%s: the add-ons do not name the endpoint", m.Name)
		}
		for _, a := range []string{"192.0.2.11", "192.0.2.12", "192.0.2.13"} {
			if strings.Contains(string(proxy)+string(flannel), a) {
				t.Errorf("%s: an add-on names master address %s", m.Name, a)
			}
		}
	}
}

// Each master's etcd pod is a member of the three, bootstrapping a new
// cluster, as etcd itself reads the flags; the apiserver uses its local
// member; the pods name the master's /etc/kubernetes.
func TestRenderMastersBootstrapPods(t *testing.T) {
	dir := renderedMasters(t)
	c := threeMasters()
	for _, m := range c.Masters {
		md := MasterDir(dir, m.Name)
		member, err := LoadEtcdMember(md)
		if err != nil {
			t.Fatal(err)
		}
		pod := decodeAll(t, EtcdManifestPath(md))[0].(*v1.Pod)
		flags := commandFlags(pod.Spec.Containers[0].Command)
		ec := embed.NewConfig()
		ec.Name = flags["name"]
		ec.Dir = flags["data-dir"]
		ec.InitialCluster = flags["initial-cluster"]
		ec.ClusterState = flags["initial-cluster-state"]
		for flag, dst := range map[string]*[]neturl.URL{"listen-peer-urls": &ec.ListenPeerUrls, "initial-advertise-peer-urls": &ec.AdvertisePeerUrls,
			"listen-client-urls": &ec.ListenClientUrls, "advertise-client-urls": &ec.AdvertiseClientUrls} {
			urls, err := types.NewURLs(strings.Split(flags[flag], ","))
			if err != nil {
				t.Fatalf("%s --%s: %v", m.Name, flag, err)
			}
			*dst = []neturl.URL(urls)
		}
		if err := ec.Validate(); err != nil {
			t.Errorf("%s: etcd refuses its flags: %v", m.Name, err)
		}
		members, _, err := ec.PeerURLsMapAndToken("etcd")
		if err != nil {
			t.Fatal(err)
		}
		if len(members) != 3 || ec.ClusterState != embed.ClusterStateFlagNew || ec.Name != m.Name {
			t.Errorf("%s: members %v, state %s, name %s", m.Name, members, ec.ClusterState, ec.Name)
		}
		for _, o := range c.Masters {
			if got := members[o.Name].String(); got != "https://"+o.Address+":2380" {
				t.Errorf("%s: member %s at %s", m.Name, o.Name, got)
			}
		}
		if got := ec.AdvertisePeerUrls[0].String(); got != members[m.Name].String() || member.PeerURLs[0] != got {
			t.Errorf("%s: advertises peer %s, listed as %s", m.Name, got, members[m.Name])
		}
		if !strings.HasPrefix(member.CAFile, md) || member.ClientURL != "https://127.0.0.1:2379" {
			t.Errorf("%s: LoadEtcdMember %+v", m.Name, member)
		}

		api := decodeAll(t, filepath.Join(md, BootstrapManifestsDir, KubeAPIServer+".yaml"))[0].(*v1.Pod)
		af := commandFlags(api.Spec.Containers[0].Command)
		if af["etcd-servers"] != "https://127.0.0.1:2379" || af["advertise-address"] != m.Address {
			t.Errorf("%s: bootstrap apiserver --etcd-servers=%s --advertise-address=%s", m.Name, af["etcd-servers"], af["advertise-address"])
		}
		for _, f := range []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler} {
			p := decodeAll(t, filepath.Join(md, BootstrapManifestsDir, f+".yaml"))[0].(*v1.Pod)
			if p.UID != PodUID(p.Namespace, p.Name, m.Name) {
				t.Errorf("%s: %s has UID %s", m.Name, f, p.UID)
			}
			for _, v := range p.Spec.Volumes {
				if v.HostPath != nil && strings.HasPrefix(v.HostPath.Path, dir) {
					t.Errorf("%s: %s mounts %s, not under the master's /etc/kubernetes", m.Name, f, v.HostPath.Path)
				}
			}
		}
		kc, err := os.ReadFile(filepath.Join(md, KubeletConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(kc), "clientCAFile: /etc/kubernetes/pki/kubelet-client-ca.crt") {
			t.Errorf("%s: kubelet-config.yaml does not name the master's /etc/kubernetes:\n%s", m.Name, kc)
		}
	}
}

func commandFlags(command []string) map[string]string {
	flags := map[string]string{}
	for _, a := range command {
		if k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok && strings.HasPrefix(a, "--") {
			flags[k] = v
		}
	}
	return flags
}

// The self-hosted objects for 1 and 3 masters: the apiserver advertises
// its node's IP from the downward API; the controller-manager and the
// scheduler keep two replicas and a preference on one master, one replica
// per master and a requirement on three.
func TestSelfHostedForMasters(t *testing.T) {
	one := threeMasters()
	one.Masters, one.ControlPlaneEndpoint = one.Masters[:1], ""
	for _, tc := range []struct {
		name      string
		cfg       Config
		daemonSet bool
		downward  bool
		advertise string
	}{
		{"one node", testConfig(), false, false, "192.0.2.10"},
		{"one node with an endpoint", func() Config { c := testConfig(); c.ControlPlaneEndpoint = "192.0.2.10:6443"; return c }(), false, false, "192.0.2.10"},
		{"one master", one.ForMaster(0), false, true, "$(HOST_IP)"},
		{"three masters", threeMasters().ForMaster(1), true, true, "$(HOST_IP)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// selfHostedFiles reads the credentials from the asset dir.
			copyTree(t, rendered(t), dir)
			files, err := selfHostedFiles(tc.cfg, dir, dir)
			if err != nil {
				t.Fatal(err)
			}
			ds := files[KubeAPIServer+".yaml"][1].(*appsv1.DaemonSet)
			ctr := ds.Spec.Template.Spec.Containers[0]
			if got := commandFlags(ctr.Command)["advertise-address"]; got != tc.advertise {
				t.Errorf("--advertise-address=%s, want %s", got, tc.advertise)
			}
			hasEnv := slices.ContainsFunc(ctr.Env, func(e v1.EnvVar) bool {
				return e.Name == "HOST_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP"
			})
			_, annotated := ds.Spec.Template.Annotations["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"]
			if hasEnv != tc.downward || annotated == tc.downward || (ctr.ReadinessProbe.HTTPGet.Host == "") != tc.downward {
				t.Errorf("HOST_IP env %v, advertise annotation %v, probe host %q", hasEnv, annotated, ctr.ReadinessProbe.HTTPGet.Host)
			}
			legacyscheme.Scheme.Default(ds)
			in := &apps.DaemonSet{}
			mustConvert(t, ds, in)
			if errs := appsvalidation.ValidateDaemonSet(in, corevalidation.PodValidationOptions{}); len(errs) > 0 {
				t.Errorf("DaemonSet: %v", errs)
			}
			for _, name := range []string{KubeControllerManager, KubeScheduler} {
				pdb := files[name+".yaml"][2].(*policyv1.PodDisruptionBudget)
				if !tc.daemonSet {
					// One master: today's Deployment, unchanged.
					d, ok := files[name+".yaml"][1].(*appsv1.Deployment)
					if !ok {
						t.Fatalf("%s: %T, want a Deployment", name, files[name+".yaml"][1])
					}
					aa := d.Spec.Template.Spec.Affinity.PodAntiAffinity
					if *d.Spec.Replicas != 2 || len(aa.RequiredDuringSchedulingIgnoredDuringExecution) != 0 || len(aa.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
						t.Errorf("%s: replicas %d, anti-affinity %+v", name, *d.Spec.Replicas, aa)
					}
					if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.MaxUnavailable != nil {
						t.Errorf("%s: PDB %+v", name, pdb.Spec)
					}
					continue
				}
				// Several masters: a DaemonSet on the control-plane nodes,
				// as the apiserver's, one master's pod replaced at a time.
				d, ok := files[name+".yaml"][1].(*appsv1.DaemonSet)
				if !ok {
					t.Fatalf("%s: %T, want a DaemonSet", name, files[name+".yaml"][1])
				}
				spec := d.Spec.Template.Spec
				if spec.Affinity != nil || !maps.Equal(spec.NodeSelector, ds.Spec.Template.Spec.NodeSelector) ||
					!reflect.DeepEqual(spec.Tolerations, ds.Spec.Template.Spec.Tolerations) || spec.PriorityClassName != "system-cluster-critical" {
					t.Errorf("%s: affinity %+v, nodeSelector %v, tolerations %v, priority %q", name, spec.Affinity, spec.NodeSelector, spec.Tolerations, spec.PriorityClassName)
				}
				if u := d.Spec.UpdateStrategy; u.Type != appsv1.RollingUpdateDaemonSetStrategyType || u.RollingUpdate == nil ||
					u.RollingUpdate.MaxUnavailable == nil || u.RollingUpdate.MaxUnavailable.IntValue() != 1 || u.RollingUpdate.MaxSurge != nil {
					t.Errorf("%s: update strategy %+v", name, u)
				}
				// minAvailable 2 of 3: maxUnavailable, which the
				// disruption controller cannot resolve for a DaemonSet.
				if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 2 || pdb.Spec.MinAvailable.Type != intstr.Int || pdb.Spec.MaxUnavailable != nil {
					t.Errorf("%s: PDB %+v", name, pdb.Spec)
				}
				legacyscheme.Scheme.Default(d)
				in := &apps.DaemonSet{}
				mustConvert(t, d, in)
				if errs := appsvalidation.ValidateDaemonSet(in, corevalidation.PodValidationOptions{}); len(errs) > 0 {
					t.Errorf("%s DaemonSet: %v", name, errs)
				}
			}
		})
	}
}

// A re-render changes nothing; a master whose dir was lost gets the
// cluster's keys back from another master's.
func TestRenderMastersIdempotent(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, renderedMasters(t), dir)
	before := readTree(t, dir)
	if err := Render(threeMasters(), dir); err != nil {
		t.Fatal(err)
	}
	after := readTree(t, dir)
	for rel := range before {
		if string(before[rel]) != string(after[rel]) {
			t.Errorf("re-render changed %s", rel)
		}
	}
	if len(after) != len(before) {
		t.Errorf("re-render wrote %d files, had %d", len(after), len(before))
	}

	if err := os.RemoveAll(MasterDir(dir, "master-1")); err != nil {
		t.Fatal(err)
	}
	if err := Render(threeMasters(), dir); err != nil {
		t.Fatal(err)
	}
	again := readTree(t, dir)
	for rel, data := range before {
		// master-1's own keys are new, so are its certificates and
		// kubelet.conf; its bootstrap pods hold no key and come out the same.
		m1 := strings.TrimPrefix(rel, "master-1/")
		own := m1 != rel && perNodeFile(m1) && !strings.HasPrefix(m1, BootstrapManifestsDir+"/")
		if same := string(data) == string(again[rel]); same == own {
			t.Errorf("%s: same as before %v (master-1's own keys: %v)", rel, same, own)
		}
	}
}

// Two masters with different copies of a shared key: nothing is written,
// and the error names both files.
func TestRenderMastersRefusesDifferentKeys(t *testing.T) {
	dir := t.TempDir()
	copyTree(t, renderedMasters(t), dir)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(MasterDir(dir, "master-3"), PKIDir, EtcdCA+".key")
	if err := os.WriteFile(other, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(MasterDir(dir, "master-2"), PKIDir, "apiserver.crt")); err != nil {
		t.Fatal(err)
	}
	before := readTree(t, dir)
	err = Render(threeMasters(), dir)
	if err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), filepath.Join(MasterDir(dir, "master-1"), PKIDir, EtcdCA+".key")) {
		t.Fatalf("got %v, want an error naming both etcd CA keys", err)
	}
	if after := readTree(t, dir); len(after) != len(before) {
		t.Fatalf("wrote files: %d, had %d", len(after), len(before))
	}
}

// With --control-plane-endpoint on one node, the kubeconfigs name it and
// the apiserver certificate has it; nothing else changes.
func TestRenderOneNodeWithEndpoint(t *testing.T) {
	c := testConfig()
	c.ControlPlaneEndpoint = "api.example.com"
	if got := c.APIServerURL(); got != "https://api.example.com:6443" {
		t.Fatalf("APIServerURL %s", got)
	}
	specs, err := certSpecs(c)
	if err != nil {
		t.Fatal(err)
	}
	base, err := certSpecs(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	for i := range specs {
		if specs[i].Base == APIServer {
			if !slices.Contains(specs[i].Config.AltNames.DNSNames, "api.example.com") {
				t.Errorf("apiserver SANs %v", specs[i].Config.AltNames.DNSNames)
			}
			if !ipsEqual(specs[i].Config.AltNames.IPs, base[i].Config.AltNames.IPs) {
				t.Errorf("apiserver IPs %v, without the endpoint %v", specs[i].Config.AltNames.IPs, base[i].Config.AltNames.IPs)
			}
		} else if !equalSpec(specs[i], base[i]) {
			t.Errorf("%s changed with the endpoint", specs[i].Base)
		}
	}
	c.ControlPlaneEndpoint = "192.0.2.99:6443"
	for _, s := range mustSpecs(t, c) {
		if s.Base == APIServer && !slices.ContainsFunc(s.Config.AltNames.IPs, func(ip net.IP) bool { return ip.Equal(net.ParseIP("192.0.2.99")) }) {
			t.Errorf("apiserver IPs %v lack the endpoint", s.Config.AltNames.IPs)
		}
	}
}

func mustSpecs(t *testing.T, c Config) []certSpec {
	t.Helper()
	s, err := certSpecs(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The DaemonSet the masters' controller makes of a one-master render's
// Deployment once the cluster has more masters (masters.DaemonSetOf) is
// the one render makes for several: the same object metadata, selector,
// rollout and placement of its pods.
func TestDaemonSetOfOneMastersDeployment(t *testing.T) {
	one := threeMasters()
	one.Masters, one.ControlPlaneEndpoint = one.Masters[:1], ""
	filesOf := func(cfg Config) map[string][]runtime.Object {
		dir := t.TempDir()
		copyTree(t, rendered(t), dir)
		files, err := selfHostedFiles(cfg, dir, dir)
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	oneFiles, threeFiles := filesOf(one.ForMaster(0)), filesOf(threeMasters().ForMaster(1))
	for _, name := range []string{KubeControllerManager, KubeScheduler} {
		got := mastersrules.DaemonSetOf(oneFiles[name+".yaml"][1].(*appsv1.Deployment))
		want := threeFiles[name+".yaml"][1].(*appsv1.DaemonSet)
		if !reflect.DeepEqual(got.TypeMeta, want.TypeMeta) || !reflect.DeepEqual(got.ObjectMeta, want.ObjectMeta) ||
			!reflect.DeepEqual(got.Spec.Selector, want.Spec.Selector) || !reflect.DeepEqual(got.Spec.UpdateStrategy, want.Spec.UpdateStrategy) {
			t.Errorf("%s: DaemonSetOf = %+v %+v %+v, render's %+v %+v %+v", name, got.ObjectMeta, got.Spec.Selector, got.Spec.UpdateStrategy,
				want.ObjectMeta, want.Spec.Selector, want.Spec.UpdateStrategy)
		}
		g, w := got.Spec.Template, want.Spec.Template
		if !reflect.DeepEqual(g.Labels, w.Labels) || !reflect.DeepEqual(g.Spec.NodeSelector, w.Spec.NodeSelector) ||
			!reflect.DeepEqual(g.Spec.Tolerations, w.Spec.Tolerations) || !reflect.DeepEqual(g.Spec.Affinity, w.Spec.Affinity) ||
			g.Spec.PriorityClassName != w.Spec.PriorityClassName || g.Spec.HostNetwork != w.Spec.HostNetwork {
			t.Errorf("%s: DaemonSetOf's pods: labels %v nodeSelector %v tolerations %v affinity %+v priority %q; render's: %v %v %v %+v %q", name,
				g.Labels, g.Spec.NodeSelector, g.Spec.Tolerations, g.Spec.Affinity, g.Spec.PriorityClassName,
				w.Labels, w.Spec.NodeSelector, w.Spec.Tolerations, w.Spec.Affinity, w.Spec.PriorityClassName)
		}
		legacyscheme.Scheme.Default(got)
		in := &apps.DaemonSet{}
		mustConvert(t, got, in)
		if errs := appsvalidation.ValidateDaemonSet(in, corevalidation.PodValidationOptions{}); len(errs) > 0 {
			t.Errorf("%s DaemonSet: %v", name, errs)
		}
	}
}
