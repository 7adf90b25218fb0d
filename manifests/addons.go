package manifests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientsetscheme "k8s.io/client-go/kubernetes/scheme"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"
	kubeadmapi "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm"
	"k8s.io/kubernetes/cmd/kubeadm/app/componentconfigs"
	"k8s.io/kubernetes/cmd/kubeadm/app/phases/addons/dns"
	"k8s.io/kubernetes/cmd/kubeadm/app/phases/addons/proxy"
	"k8s.io/utils/ptr"
)

// The cluster add-ons render can write into self-hosted/, the values of
// --addons. What each one is and how it comes back after a reboot:
// docs/control-plane.md, "The add-ons".
const (
	AddonFlannel   = "flannel"
	AddonKubeProxy = "kube-proxy"
	AddonCoreDNS   = "coredns"
)

// AllAddons is --addons' default: a cluster with a pod network, Services
// and DNS, as kubeadm (kube-proxy, CoreDNS) plus bootkube (flannel) make it.
var AllAddons = []string{AddonFlannel, AddonKubeProxy, AddonCoreDNS}

// flannel's images, upstream names. The CNI plugin's tag is the version of
// containernetworking/plugins whose meta/flannel it is built from
// (flannel-io/cni-plugin, its continuation, is not on the module proxy):
// hack/images.sh.
const (
	FlannelImage          = "ghcr.io/flannel-io/flannel:v0.28.10"
	FlannelCNIPluginImage = "ghcr.io/flannel-io/flannel-cni-plugin:v0.9.1"
	// FlannelNamespace is upstream kube-flannel.yml's.
	FlannelNamespace = "kube-flannel"
	// flannelCNIVersion is the newest CNI spec the v0.9.1 plugin speaks;
	// the bridge, host-local and portmap plugins (v1.9.1) speak it too.
	flannelCNIVersion = "0.4.0"
)

// addonFiles are the add-ons' files of self-hosted/, by name.
func addonFiles(c Config) (map[string][]runtime.Object, error) {
	files := map[string][]runtime.Object{}
	if c.HasAddon(AddonFlannel) {
		objs, err := flannelObjects(c)
		if err != nil {
			return nil, fmt.Errorf("flannel: %w", err)
		}
		files["addon-flannel.yaml"] = objs
	}
	if c.HasAddon(AddonKubeProxy) {
		objs, err := kubeProxyObjects(c)
		if err != nil {
			return nil, fmt.Errorf("kube-proxy: %w", err)
		}
		files["addon-kube-proxy.yaml"] = objs
	}
	if c.HasAddon(AddonCoreDNS) {
		objs, err := coreDNSObjects(c)
		if err != nil {
			return nil, fmt.Errorf("coredns: %w", err)
		}
		files["addon-coredns.yaml"] = objs
	}
	return files, nil
}

// kubeProxyObjects are kubeadm's kube-proxy add-on, as `kubeadm init phase
// addon kube-proxy --print-manifest` prints it for c (kubeadm's own code,
// its component config defaulting included: clusterCIDR is the pod CIDR,
// and the kubeconfig points at the advertise address, not at a Service).
func kubeProxyObjects(c Config) ([]runtime.Object, error) {
	cc := clusterConfiguration(c)
	ep := apiEndpoint(c)
	componentconfigs.Default(cc, ep, &kubeadmapi.NodeRegistrationOptions{})
	if c.KubeProxyConntrackMaxPerCore >= 0 {
		if kp, ok := cc.ComponentConfigs[componentconfigs.KubeProxyGroup]; ok {
			kp.Get().(*kubeproxyconfig.KubeProxyConfiguration).Conntrack.MaxPerCore = ptr.To(c.KubeProxyConntrackMaxPerCore)
		}
	}
	var buf bytes.Buffer
	if err := proxy.EnsureProxyAddon(cc, ep, nil, &buf, true); err != nil {
		return nil, err
	}
	return decodeObjects(&buf)
}

// coreDNSObjects are kubeadm's CoreDNS add-on, as `kubeadm init phase addon
// coredns --print-manifest` prints it for c: the kube-dns Service at the
// 10th service IP, two replicas, forwarding to the node's resolver.
func coreDNSObjects(c Config) ([]runtime.Object, error) {
	var buf bytes.Buffer
	if err := dns.EnsureDNSAddon(clusterConfiguration(c), nil, "", &buf, true); err != nil {
		return nil, err
	}
	objs, err := decodeObjects(&buf)
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		// kubeadm's Service template carries resourceVersion "0" for its
		// update path; a create must not.
		if svc, ok := o.(*v1.Service); ok {
			svc.ResourceVersion = ""
		}
	}
	return objs, nil
}

// decodeObjects decodes a multi-document YAML stream into typed objects,
// each with its apiVersion and kind set (marshalObjects needs them).
func decodeObjects(r io.Reader) ([]runtime.Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var out []runtime.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, gvk, err := clientsetscheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding %q: %w", firstLine(doc), err)
		}
		obj.GetObjectKind().SetGroupVersionKind(*gvk)
		out = append(out, obj)
	}
}

func firstLine(b []byte) string {
	b = bytes.TrimSpace(b)
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// flannelCNIConf is the network config flannel's init container installs
// as CNIConfDir/10-flannel.conflist: upstream's, with the plugin's host
// paths (subnet.env, its own and host-local's state) from c, so that a node
// whose CNI directories are not the standard ones (make up's, the e2e
// tests') keeps everything in its own.
func flannelCNIConf(c Config) (string, error) {
	conf := map[string]any{
		"name":       "cbr0",
		"cniVersion": flannelCNIVersion,
		"plugins": []any{
			map[string]any{
				"type":       "flannel",
				"subnetFile": filepath.Join(c.FlannelRunDir, "subnet.env"),
				"dataDir":    filepath.Join(c.CNIDataDir, "flannel"),
				"ipam":       map[string]any{"type": "host-local", "dataDir": filepath.Join(c.CNIDataDir, "networks")},
				"delegate":   map[string]any{"hairpinMode": true, "isDefaultGateway": true},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]any{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	return string(b) + "\n", err
}

// flannelIPTablesResync is how often flanneld checks that its iptables
// rules are still there: kube-proxy's default full resync (30 s), not
// flannel's 5 s. flanneld checks each rule with its own `iptables -C`
// process, about ten per node per resync, and at 5 s that is two execs a
// second on every node whose rules nothing but an administrator removes:
// measured on four nodes sharing 2 CPUs, 15 execs a second, about a quarter
// of a CPU, a quarter of the idle cluster's CPU.
const flannelIPTablesResync = "--iptables-resync=30"

// flannelNetConf is flanneld's net-conf.json: the pod CIDR, iptables, vxlan
// (which crosses nodes on any L3 network, as the multi-node harness needs).
func flannelNetConf(c Config) (string, error) {
	b, err := json.MarshalIndent(map[string]any{
		"Network":        c.PodCIDR,
		"EnableNFTables": false,
		"Backend":        map[string]any{"Type": "vxlan"},
	}, "", "  ")
	return string(b) + "\n", err
}

// flannelObjects are upstream's Documentation/kube-flannel.yml of
// v0.28.10, object for object. What differs: the host paths come from c;
// the network config names them (flannelCNIConf); flanneld reaches the
// apiserver at the advertise address, not through the kubernetes Service.
func flannelObjects(c Config) ([]runtime.Object, error) {
	cniConf, err := flannelCNIConf(c)
	if err != nil {
		return nil, err
	}
	netConf, err := flannelNetConf(c)
	if err != nil {
		return nil, err
	}
	const name = "flannel"
	labels := map[string]string{"k8s-app": name}
	nodeLabels := map[string]string{"tier": "node", "app": name, "k8s-app": name}
	meta := func(n string, l map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: FlannelNamespace, Labels: l}
	}
	ns := &v1.Namespace{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: FlannelNamespace, Labels: map[string]string{
			"k8s-app": name, "pod-security.kubernetes.io/enforce": "privileged",
		}},
	}
	role := &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
		},
	}
	binding := clusterRoleBinding(name, name, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: FlannelNamespace})
	binding.Labels = labels
	sa := &v1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta(name, labels)}
	cm := &v1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta("kube-flannel-cfg", nodeLabels),
		Data:       map[string]string{"cni-conf.json": cniConf, "net-conf.json": netConf},
	}
	hostPath := func(vol, path string, t v1.HostPathType) v1.Volume {
		src := &v1.HostPathVolumeSource{Path: path}
		if t != "" {
			src.Type = &t
		}
		return v1.Volume{Name: vol, VolumeSource: v1.VolumeSource{HostPath: src}}
	}
	fieldEnv := func(n, path string) v1.EnvVar {
		return v1.EnvVar{Name: n, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
	}
	probe := func(path string, delay, period int32) *v1.Probe {
		return &v1.Probe{
			ProbeHandler:        v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromString("healthz")}},
			InitialDelaySeconds: delay, PeriodSeconds: period,
		}
	}
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: meta("kube-flannel-ds", nodeLabels),
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"tier": "node", "app": name}},
				Spec: v1.PodSpec{
					Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
						NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
							Key: v1.LabelOSStable, Operator: v1.NodeSelectorOpIn, Values: []string{"linux"},
						}}}},
					}}},
					HostNetwork:        true,
					PriorityClassName:  "system-node-critical",
					Tolerations:        []v1.Toleration{{Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}},
					ServiceAccountName: name,
					InitContainers: []v1.Container{
						{
							Name: "install-cni-plugin", Image: FlannelCNIPluginImage,
							Command:      []string{"cp"},
							Args:         []string{"-f", "/flannel", "/opt/cni/bin/flannel"},
							VolumeMounts: []v1.VolumeMount{{Name: "cni-plugin", MountPath: "/opt/cni/bin"}},
						},
						{
							Name: "install-cni", Image: FlannelImage,
							Command: []string{"/opt/bin/install-conf"},
							Args:    []string{"/etc/kube-flannel/cni-conf.json", "/etc/cni/net.d/10-flannel.conflist"},
							VolumeMounts: []v1.VolumeMount{
								{Name: "cni", MountPath: "/etc/cni/net.d"},
								{Name: "flannel-cfg", MountPath: "/etc/kube-flannel/"},
							},
						},
					},
					Containers: []v1.Container{{
						Name: "kube-flannel", Image: FlannelImage,
						Command:        []string{"/opt/bin/flanneld"},
						Args:           []string{"--ip-masq", "--kube-subnet-mgr", "--healthz-port=8081", flannelIPTablesResync},
						Ports:          []v1.ContainerPort{{Name: "healthz", ContainerPort: 8081, Protocol: v1.ProtocolTCP}},
						LivenessProbe:  probe("/healthz", 10, 30),
						ReadinessProbe: probe("/readyz", 5, 10),
						Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
							v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("50Mi"),
						}},
						SecurityContext: &v1.SecurityContext{
							Privileged:   ptr.To(false),
							Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN", "NET_RAW"}},
						},
						Env: []v1.EnvVar{
							fieldEnv("POD_NAME", "metadata.name"),
							fieldEnv("POD_NAMESPACE", "metadata.namespace"),
							{Name: "EVENT_QUEUE_DEPTH", Value: "5000"},
							{Name: "CONT_WHEN_CACHE_NOT_READY", Value: "false"},
							// The in-cluster client's address: the apiserver's own,
							// as kube-proxy's kubeconfig has it, not the kubernetes
							// Service's ClusterIP, which only kube-proxy's rules
							// serve. Otherwise the pod network waits for kube-proxy
							// (flanneld crash-loops until its rules exist).
							{Name: "KUBERNETES_SERVICE_HOST", Value: c.apiServerHost()},
							{Name: "KUBERNETES_SERVICE_PORT", Value: fmt.Sprint(c.APIServerPort)},
						},
						VolumeMounts: []v1.VolumeMount{
							{Name: "run", MountPath: "/run/flannel"},
							{Name: "flannel-cfg", MountPath: "/etc/kube-flannel/"},
							{Name: "xtables-lock", MountPath: "/run/xtables.lock"},
						},
					}},
					Volumes: []v1.Volume{
						hostPath("run", c.FlannelRunDir, ""),
						hostPath("cni-plugin", c.CNIBinDir, ""),
						hostPath("cni", c.CNIConfDir, ""),
						{Name: "flannel-cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
							LocalObjectReference: v1.LocalObjectReference{Name: cm.Name},
						}}},
						hostPath("xtables-lock", "/run/xtables.lock", v1.HostPathFileOrCreate),
					},
				},
			},
		},
	}
	return []runtime.Object{ns, role, binding, sa, cm, ds}, nil
}
