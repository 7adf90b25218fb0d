package manifests

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/clientcmd"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/apps"
	appsvalidation "k8s.io/kubernetes/pkg/apis/apps/validation"
	api "k8s.io/kubernetes/pkg/apis/core"
	corevalidation "k8s.io/kubernetes/pkg/apis/core/validation"
	"k8s.io/kubernetes/pkg/apis/rbac"
	rbacvalidation "k8s.io/kubernetes/pkg/apis/rbac/validation"
	"k8s.io/kubernetes/pkg/capabilities"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	_ "k8s.io/kubernetes/pkg/apis/rbac/install"
)

// addonObjects decodes self-hosted/FILE of the shared render.
func addonObjects(t *testing.T, file string) []runtime.Object {
	t.Helper()
	return decodeAll(t, filepath.Join(rendered(t), SelfHostedDir, file))
}

// TestAddonsValid: every add-on object passes the apiserver's own
// validation (after defaulting), so the pivot's create cannot be refused.
func TestAddonsValid(t *testing.T) {
	// kube-proxy is privileged, which kubeadm's apiserver allows
	// (--allow-privileged=true).
	capabilities.Setup(true, 0)
	kinds := map[string][]string{}
	for _, file := range []string{"addon-flannel.yaml", "addon-kube-proxy.yaml", "addon-coredns.yaml"} {
		for _, obj := range addonObjects(t, file) {
			legacyscheme.Scheme.Default(obj)
			var errs field.ErrorList
			var name string
			switch o := obj.(type) {
			case *v1.Namespace:
				in := &api.Namespace{}
				mustConvert(t, o, in)
				errs, name = corevalidation.ValidateNamespace(in), o.Name
			case *v1.ServiceAccount:
				in := &api.ServiceAccount{}
				mustConvert(t, o, in)
				errs, name = corevalidation.ValidateServiceAccount(in), o.Name
			case *v1.ConfigMap:
				in := &api.ConfigMap{}
				mustConvert(t, o, in)
				errs, name = corevalidation.ValidateConfigMap(in), o.Name
			case *v1.Service:
				in := &api.Service{}
				mustConvert(t, o, in)
				// The Service strategy's PrepareForCreate fills clusterIPs
				// from clusterIP before validating.
				in.Spec.ClusterIPs = []string{in.Spec.ClusterIP}
				errs, name = corevalidation.ValidateServiceCreate(in), o.Name
				if o.ResourceVersion != "" {
					t.Errorf("Service %s carries resourceVersion %q: a create would be refused", o.Name, o.ResourceVersion)
				}
			case *appsv1.DaemonSet:
				in := &apps.DaemonSet{}
				mustConvert(t, o, in)
				errs, name = appsvalidation.ValidateDaemonSet(in, corevalidation.PodValidationOptions{}), o.Name
			case *appsv1.Deployment:
				in := &apps.Deployment{}
				mustConvert(t, o, in)
				errs, name = appsvalidation.ValidateDeployment(in, corevalidation.PodValidationOptions{}), o.Name
			case *rbacv1.ClusterRole:
				in := &rbac.ClusterRole{}
				mustConvert(t, o, in)
				errs, name = rbacvalidation.ValidateClusterRole(in, rbacvalidation.ClusterRoleValidationOptions{}), o.Name
			case *rbacv1.ClusterRoleBinding:
				in := &rbac.ClusterRoleBinding{}
				mustConvert(t, o, in)
				errs, name = rbacvalidation.ValidateClusterRoleBinding(in), o.Name
			case *rbacv1.Role:
				in := &rbac.Role{}
				mustConvert(t, o, in)
				errs, name = rbacvalidation.ValidateRole(in), o.Name
			case *rbacv1.RoleBinding:
				in := &rbac.RoleBinding{}
				mustConvert(t, o, in)
				errs, name = rbacvalidation.ValidateRoleBinding(in), o.Name
			default:
				t.Fatalf("%s: unexpected %T", file, obj)
			}
			if len(errs) > 0 {
				t.Errorf("%s %s: %v", file, name, errs.ToAggregate())
			}
			kinds[file] = append(kinds[file], obj.GetObjectKind().GroupVersionKind().Kind+"/"+name)
		}
	}
	want := map[string][]string{
		"addon-flannel.yaml": {"Namespace/kube-flannel", "ClusterRole/flannel", "ClusterRoleBinding/flannel", "ServiceAccount/flannel",
			"ConfigMap/kube-flannel-cfg", "DaemonSet/kube-flannel-ds"},
		"addon-kube-proxy.yaml": {"ServiceAccount/kube-proxy", "ClusterRoleBinding/kubeadm:node-proxier", "Role/kube-proxy", "RoleBinding/kube-proxy",
			"ConfigMap/kube-proxy", "DaemonSet/kube-proxy"},
		"addon-coredns.yaml": {"Deployment/coredns", "ConfigMap/coredns", "Service/kube-dns", "ClusterRole/system:coredns",
			"ClusterRoleBinding/system:coredns", "ServiceAccount/coredns"},
	}
	for file, w := range want {
		if !slices.Equal(kinds[file], w) {
			t.Errorf("%s holds %v, want %v", file, kinds[file], w)
		}
	}
}

// TestAddonsFollowConfig: what each add-on takes from the render flags.
func TestAddonsFollowConfig(t *testing.T) {
	c := testConfig()
	var kubeDNS *v1.Service
	var coredns *appsv1.Deployment
	for _, o := range addonObjects(t, "addon-coredns.yaml") {
		switch o := o.(type) {
		case *v1.Service:
			kubeDNS = o
		case *appsv1.Deployment:
			coredns = o
		}
	}
	// kubeadm's: the 10th IP of the service CIDR.
	if kubeDNS == nil || kubeDNS.Spec.ClusterIP != "10.96.0.10" {
		t.Errorf("kube-dns Service: %+v", kubeDNS)
	}
	if coredns == nil || coredns.Spec.Template.Spec.Containers[0].Image != "registry.k8s.io/coredns/coredns:v1.14.2" {
		t.Errorf("CoreDNS Deployment: %+v", coredns)
	}

	for _, o := range addonObjects(t, "addon-kube-proxy.yaml") {
		switch o := o.(type) {
		case *v1.ConfigMap:
			var cfg kubeproxyconfig.KubeProxyConfiguration
			if err := yaml.Unmarshal([]byte(o.Data["config.conf"]), &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg.ClusterCIDR != c.PodCIDR || cfg.ClientConnection.Kubeconfig != "/var/lib/kube-proxy/kubeconfig.conf" {
				t.Errorf("kube-proxy configuration: clusterCIDR %q kubeconfig %q", cfg.ClusterCIDR, cfg.ClientConnection.Kubeconfig)
			}
			// hostNetwork, so no Service IP: the advertise address.
			kc, err := clientcmd.Load([]byte(o.Data["kubeconfig.conf"]))
			if err != nil {
				t.Fatal(err)
			}
			if got := kc.Clusters["default"].Server; got != c.APIServerURL() {
				t.Errorf("kube-proxy's kubeconfig points at %s, want %s", got, c.APIServerURL())
			}
		case *appsv1.DaemonSet:
			if img := o.Spec.Template.Spec.Containers[0].Image; img != "registry.k8s.io/kube-proxy:v1.36.3" || !o.Spec.Template.Spec.HostNetwork {
				t.Errorf("kube-proxy DaemonSet: image %s hostNetwork %v", img, o.Spec.Template.Spec.HostNetwork)
			}
		}
	}

	for _, o := range addonObjects(t, "addon-flannel.yaml") {
		switch o := o.(type) {
		case *v1.ConfigMap:
			var net struct{ Network string }
			if err := json.Unmarshal([]byte(o.Data["net-conf.json"]), &net); err != nil || net.Network != c.PodCIDR {
				t.Errorf("net-conf.json %q: %v", o.Data["net-conf.json"], err)
			}
			var cni struct {
				CNIVersion string `json:"cniVersion"`
				Plugins    []struct {
					Type       string
					SubnetFile string
					DataDir    string
					IPAM       map[string]string
				}
			}
			if err := json.Unmarshal([]byte(o.Data["cni-conf.json"]), &cni); err != nil {
				t.Fatal(err)
			}
			p := cni.Plugins[0]
			if cni.CNIVersion != "0.4.0" || p.Type != "flannel" || p.SubnetFile != "/run/flannel/subnet.env" ||
				p.DataDir != "/var/lib/cni/flannel" || p.IPAM["dataDir"] != "/var/lib/cni/networks" {
				t.Errorf("cni-conf.json: %s", o.Data["cni-conf.json"])
			}
		case *appsv1.DaemonSet:
			paths := map[string]string{}
			for _, v := range o.Spec.Template.Spec.Volumes {
				if v.HostPath != nil {
					paths[v.Name] = v.HostPath.Path
				}
			}
			env := map[string]string{}
			for _, e := range o.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			if args := o.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--iptables-resync=30") {
				t.Errorf("flanneld's args %v: want --iptables-resync=30 (kube-proxy's resync, not flannel's 5 s of iptables execs)", args)
			}
			if env["KUBERNETES_SERVICE_HOST"] != c.AdvertiseAddress || env["KUBERNETES_SERVICE_PORT"] != "6443" {
				t.Errorf("flanneld must reach the apiserver without kube-proxy: env %v", env)
			}
			want := map[string]string{"run": "/run/flannel", "cni-plugin": "/opt/cni/bin", "cni": "/etc/cni/net.d", "xtables-lock": "/run/xtables.lock"}
			for k, v := range want {
				if paths[k] != v {
					t.Errorf("flannel host path %s = %q, want %q", k, paths[k], v)
				}
			}
		}
	}
}

// TestAddonsSelection: --addons picks the files; none leaves only the
// control plane; the kubelet gets the cluster DNS either way.
func TestAddonsSelection(t *testing.T) {
	cases := []struct {
		addons []string
		want   []string
	}{
		{nil, nil},
		{[]string{AddonCoreDNS}, []string{"addon-coredns.yaml"}},
		{[]string{AddonKubeProxy, AddonFlannel}, []string{"addon-flannel.yaml", "addon-kube-proxy.yaml"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.addons, ","), func(t *testing.T) {
			c := testConfig()
			c.Addons = tc.addons
			files, err := addonFiles(c)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for name := range files {
				got = append(got, name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("files %v, want %v", got, tc.want)
			}
		})
	}
	opts, err := kubeletOptions(testConfig(), "/assets")
	if err != nil || !slices.Equal(opts.ClusterDNS, []string{"10.96.0.10"}) || opts.ClusterDomain != "cluster.local" {
		t.Errorf("kubelet options: %+v %v", opts, err)
	}
}

// TestAddonsFlannelPaths: other CNI directories reach the DaemonSet's host
// paths and the plugin's config (make up keeps them under its state dirs).
func TestAddonsFlannelPaths(t *testing.T) {
	c := testConfig()
	c.CNIBinDir, c.CNIConfDir, c.CNIDataDir, c.FlannelRunDir = "/var/lib/bootlet-up/cni/bin", "/var/lib/bootlet-up/cni/net.d", "/var/lib/bootlet-up/cni", "/run/bootlet-up/flannel"
	conf, err := flannelCNIConf(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"subnetFile": "/run/bootlet-up/flannel/subnet.env"`, `"dataDir": "/var/lib/bootlet-up/cni/flannel"`, `"dataDir": "/var/lib/bootlet-up/cni/networks"`} {
		if !strings.Contains(conf, want) {
			t.Errorf("cni-conf.json lacks %s:\n%s", want, conf)
		}
	}
}

// TestKubeProxyConntrackMaxPerCore: 0 reaches kube-proxy's configuration
// (a node in a container leaves nf_conntrack_max alone), -1 leaves
// kubeadm's default in place.
func TestKubeProxyConntrackMaxPerCore(t *testing.T) {
	for _, tc := range []struct {
		set  int32
		want *int32
	}{{-1, nil}, {0, ptr.To[int32](0)}, {65536, ptr.To[int32](65536)}} {
		c := testConfig()
		c.KubeProxyConntrackMaxPerCore = tc.set
		objs, err := kubeProxyObjects(c)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, o := range objs {
			cm, ok := o.(*v1.ConfigMap)
			if !ok {
				continue
			}
			var cfg kubeproxyconfig.KubeProxyConfiguration
			if err := yaml.Unmarshal([]byte(cm.Data["config.conf"]), &cfg); err != nil {
				t.Fatal(err)
			}
			found = true
			if got := cfg.Conntrack.MaxPerCore; (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("set %d: conntrack.maxPerCore = %v, want %v", tc.set, ptrString(got), ptrString(tc.want))
			}
		}
		if !found {
			t.Errorf("set %d: no kube-proxy ConfigMap", tc.set)
		}
	}
	c := testConfig()
	c.KubeProxyConntrackMaxPerCore = -2
	if errs := c.Validate(); len(errs) == 0 {
		t.Error("Validate accepted kube-proxy-conntrack-max-per-core -2")
	}
}

func ptrString(p *int32) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
