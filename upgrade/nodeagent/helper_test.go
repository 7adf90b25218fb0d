package nodeagent

import (
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	btypes "github.com/bootlet/bootlet/types"
)

// memberPod is an etcd pod as render writes it (kubeadm's flags, host
// paths under an asset dir).
func memberPod() *v1.Pod {
	probe := func(path string) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Host: "127.0.0.1", Path: path, Port: intstr.FromString("probe-port")}}}
	}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "kube-system", UID: "u1", Labels: map[string]string{"component": "etcd", "tier": "control-plane"}},
		Spec: v1.PodSpec{HostNetwork: true, Containers: []v1.Container{{Name: "etcd", Image: "registry.k8s.io/etcd:3.6.8-0",
			Command: []string{"etcd", "--advertise-client-urls=https://192.0.2.10:2379", "--cert-file=/etc/kubernetes/pki/etcd/server.crt",
				"--data-dir=/var/lib/etcd", "--initial-advertise-peer-urls=https://192.0.2.10:2380", "--initial-cluster=m1=https://192.0.2.10:2380",
				"--listen-client-urls=https://127.0.0.1:2379,https://192.0.2.10:2379", "--listen-metrics-urls=http://127.0.0.1:2381",
				"--listen-peer-urls=https://192.0.2.10:2380", "--name=m1", "--trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt"},
			Ports:         []v1.ContainerPort{{Name: "probe-port", ContainerPort: 2381, HostPort: 2381, Protocol: v1.ProtocolTCP}},
			LivenessProbe: probe("/livez"), ReadinessProbe: probe("/readyz"), StartupProbe: probe("/readyz"),
			VolumeMounts: []v1.VolumeMount{{Name: "etcd-data", MountPath: "/var/lib/etcd"}, {Name: "etcd-certs", MountPath: "/etc/kubernetes/pki/etcd"}}}},
			Volumes: []v1.Volume{{Name: "etcd-data", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv/etcd"}}},
				{Name: "etcd-certs", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/assets/pki/etcd"}}}}}}
}

func TestReadMemberPod(t *testing.T) {
	m, err := ReadMemberPod(memberPod())
	if err != nil {
		t.Fatal(err)
	}
	want := MemberPod{Name: "m1", ClientURL: "https://127.0.0.1:2379", PeerURL: "https://192.0.2.10:2380", MetricsURL: "http://127.0.0.1:2381",
		DataDir: "/srv/etcd", CAFile: "/assets/pki/etcd/ca.crt", CertFile: "/assets/pki/etcd/healthcheck-client.crt", KeyFile: "/assets/pki/etcd/healthcheck-client.key",
		// The pod names no --key-file.
		ServingCertFile: "/assets/pki/etcd/server.crt"}
	if m != want {
		t.Errorf("ReadMemberPod = %+v\nwant %+v", m, want)
	}
	withKey := memberPod()
	withKey.Spec.Containers[0].Command = append(withKey.Spec.Containers[0].Command, "--key-file=/etc/kubernetes/pki/etcd/server.key")
	if m, err := ReadMemberPod(withKey); err != nil || m.ServingCertFile != "/assets/pki/etcd/server.crt" || m.ServingKeyFile != "/assets/pki/etcd/server.key" {
		t.Errorf("ReadMemberPod with --key-file = %+v, %v; want the member's own pair's host paths", m, err)
	}
	bad := memberPod()
	bad.Spec.Volumes = bad.Spec.Volumes[:1]
	if _, err := ReadMemberPod(bad); err == nil {
		t.Errorf("a pod with no hostPath for its certificates was read")
	}
}

// A helper's pod is the member's with its own name, ports, probes and
// data, joining the existing cluster; the member's pod is not changed.
func TestHelperPod(t *testing.T) {
	member := memberPod()
	m, err := ReadMemberPod(member)
	if err != nil {
		t.Fatal(err)
	}
	h, err := HelperOf(m, 2)
	if err != nil {
		t.Fatal(err)
	}
	if h.ClientURL != "https://127.0.0.1:2399" || h.PeerURL != "https://192.0.2.10:2400" || h.DataDir != "/srv/etcd-upgrade-helper-2" || h.Name != "m1-upgrade-helper-2" {
		t.Errorf("HelperOf = %+v", h)
	}
	ic := InitialCluster([]Member{{ID: 1, Name: "m1", PeerURLs: []string{m.PeerURL}}, {ID: 2, PeerURLs: []string{h.PeerURL}, Learner: true}}, []Helper{h})
	if ic != "m1=https://192.0.2.10:2380,m1-upgrade-helper-2=https://192.0.2.10:2400" {
		t.Errorf("InitialCluster = %s", ic)
	}
	p, err := HelperPod(member, h, ic, false)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "etcd-upgrade-helper-2" || p.UID != "" || p.Labels[btypes.LabelEtcdUpgradeHelper] != h.Name || p.Labels["component"] == "etcd" {
		t.Errorf("helper pod meta %+v", p.ObjectMeta)
	}
	c := p.Spec.Containers[0]
	for _, flag := range []string{"--name=m1-upgrade-helper-2", "--listen-client-urls=https://127.0.0.1:2399", "--advertise-client-urls=https://127.0.0.1:2399",
		"--listen-peer-urls=https://192.0.2.10:2400", "--initial-advertise-peer-urls=https://192.0.2.10:2400", "--listen-metrics-urls=http://127.0.0.1:2401",
		"--initial-cluster=" + ic, "--initial-cluster-state=existing", "--data-dir=/var/lib/etcd", "--cert-file=/etc/kubernetes/pki/etcd/server.crt"} {
		if !slices.Contains(c.Command, flag) {
			t.Errorf("helper command lacks %s: %v", flag, c.Command)
		}
	}
	// The probes name the port, which is the helper's own (the kubelet
	// admits no two host-network pods with one host port); a learner
	// fails /readyz, so the startup probe asks /livez.
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != 2401 || c.Ports[0].HostPort != 2401 || c.Ports[0].Name != "probe-port" {
		t.Errorf("helper ports %+v, want probe-port 2401", c.Ports)
	}
	for _, pr := range []*v1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if pr.HTTPGet.Port.String() != "probe-port" {
			t.Errorf("helper probe on port %s, want probe-port", pr.HTTPGet.Port.String())
		}
	}
	if c.StartupProbe.HTTPGet.Path != "/livez" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("helper probes: startup %s, readiness %s", c.StartupProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path)
	}
	numeric := memberPod()
	numeric.Spec.Containers[0].LivenessProbe.HTTPGet.Port = intstr.FromInt32(2381)
	if np, err := HelperPod(numeric, h, ic, false); err != nil || np.Spec.Containers[0].LivenessProbe.HTTPGet.Port.IntValue() != 2401 {
		t.Errorf("a numeric probe port: %v %v", err, np.Spec.Containers[0].LivenessProbe.HTTPGet.Port)
	}
	noPeerFlag := memberPod()
	noPeerFlag.Spec.Containers[0].Command = slices.DeleteFunc(slices.Clone(noPeerFlag.Spec.Containers[0].Command), func(a string) bool { return strings.HasPrefix(a, "--listen-peer-urls=") })
	if np, err := HelperPod(noPeerFlag, h, ic, false); err != nil || !slices.Contains(np.Spec.Containers[0].Command, "--listen-peer-urls=https://192.0.2.10:2400") {
		t.Errorf("a member relying on etcd's default peer port: the helper's command %v (%v)", np.Spec.Containers[0].Command, err)
	}
	if p.Spec.Volumes[0].HostPath.Path != "/srv/etcd-upgrade-helper-2" || p.Spec.Volumes[1].HostPath.Path != "/assets/pki/etcd" {
		t.Errorf("helper volumes %+v", p.Spec.Volumes)
	}
	if !slices.Equal(member.Spec.Containers[0].Command, memberPod().Spec.Containers[0].Command) || member.Spec.Volumes[0].HostPath.Path != "/srv/etcd" ||
		member.Spec.Containers[0].Ports[0].ContainerPort != 2381 || member.Spec.Containers[0].StartupProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("the member's pod changed: %+v", member.Spec)
	}
}

// The sharing helper listens on the member's loopback client address too,
// and advertises its own; only where the member's pod lets a second
// process listen there.
func TestHelperPodSharesAddress(t *testing.T) {
	member := memberPod()
	m, err := ReadMemberPod(member)
	if err != nil {
		t.Fatal(err)
	}
	h, err := HelperOf(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := HelperPod(member, h, "", true); err == nil || !strings.Contains(err.Error(), "--socket-reuse-port") {
		t.Errorf("sharing the address of a member without --socket-reuse-port: %v", err)
	}
	member.Spec.Containers[0].Command = append(member.Spec.Containers[0].Command, "--socket-reuse-port=true")
	p, err := HelperPod(member, h, "", true)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Spec.Containers[0].Command
	for _, flag := range []string{"--listen-client-urls=https://127.0.0.1:2389,https://127.0.0.1:2379", "--advertise-client-urls=https://127.0.0.1:2389", "--socket-reuse-port=true"} {
		if !slices.Contains(c, flag) {
			t.Errorf("sharing helper's command lacks %s: %v", flag, c)
		}
	}
	if !SharesClientAddress(p, m.ClientURL) {
		t.Errorf("SharesClientAddress of the sharing helper's pod: false")
	}
	own, err := HelperPod(member, h, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if SharesClientAddress(own, m.ClientURL) || SharesClientAddress(member, "https://127.0.0.1:2399") {
		t.Errorf("SharesClientAddress of a helper on its own address, or of another URL: true")
	}
}

// TestMemberPodOf: a worker's member made from master m1's mirror pod has
// the worker's name and address in every URL etcd advertises or listens
// on, keeps everything else of the template (image, certificates, data,
// probes, other flags), takes the stored name, and carries none of the
// template's node-specific annotations.
func TestMemberPodOf(t *testing.T) {
	mirror := memberPod()
	mirror.Name, mirror.Spec.NodeName = "etcd-m1", "m1"
	mirror.Annotations = map[string]string{"kubernetes.io/config.mirror": "abc", "kubernetes.io/config.hash": "abc", btypes.AnnotationOwner: string(btypes.OwnerKubeletStatic),
		annotationAdvertiseClientURLs: "https://192.0.2.10:2379"}
	before := mirror.DeepCopy()
	got, err := MemberPodOf(mirror, "w1", netip.MustParseAddr("192.0.2.21"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "etcd" || got.Namespace != "kube-system" || got.Spec.NodeName != "" || got.Labels["component"] != "etcd" {
		t.Errorf("pod %s/%s on %q, labels %v; want kube-system/etcd, no node, the template's labels", got.Namespace, got.Name, got.Spec.NodeName, got.Labels)
	}
	if want := map[string]string{annotationAdvertiseClientURLs: "https://192.0.2.21:2379"}; !maps.Equal(got.Annotations, want) {
		t.Errorf("annotations %v; want %v", got.Annotations, want)
	}
	want := []string{"etcd", "--advertise-client-urls=https://192.0.2.21:2379", "--cert-file=/etc/kubernetes/pki/etcd/server.crt",
		"--data-dir=/var/lib/etcd", "--initial-advertise-peer-urls=https://192.0.2.21:2380", "--initial-cluster=m1=https://192.0.2.10:2380",
		"--listen-client-urls=https://127.0.0.1:2379,https://192.0.2.21:2379", "--listen-metrics-urls=http://127.0.0.1:2381",
		"--listen-peer-urls=https://192.0.2.21:2380", "--name=w1", "--trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt"}
	if cmd := EtcdContainer(got).Command; !slices.Equal(cmd, want) {
		t.Errorf("command\n%q\nwant\n%q", cmd, want)
	}
	m, err := ReadMemberPod(got)
	if err != nil || m.DataDir != "/srv/etcd" || m.CAFile != "/assets/pki/etcd/ca.crt" || m.PeerURL != "https://192.0.2.21:2380" {
		t.Errorf("ReadMemberPod = %+v, %v; want the template's host paths and w1's peer URL", m, err)
	}
	if !equality.Semantic.DeepEqual(mirror, before) {
		t.Error("the template was changed")
	}

	v6, err := MemberPodOf(memberPod(), "w6", netip.MustParseAddr("2001:db8::21"))
	if err != nil {
		t.Fatal(err)
	}
	// The template's loopback stays (the local apiserver's
	// --etcd-servers names it), whatever the node's address family.
	if cmd := strings.Join(EtcdContainer(v6).Command, " "); !strings.Contains(cmd, "--listen-client-urls=https://127.0.0.1:2379,https://[2001:db8::21]:2379") ||
		!strings.Contains(cmd, "--initial-advertise-peer-urls=https://[2001:db8::21]:2380") {
		t.Errorf("an IPv6 node's command: %s", cmd)
	}

	helper := memberPod()
	helper.Labels[btypes.LabelEtcdUpgradeHelper] = "m1-upgrade-helper-1"
	noAdvertise := memberPod()
	noAdvertise.Spec.Containers[0].Command = slices.DeleteFunc(slices.Clone(noAdvertise.Spec.Containers[0].Command), func(a string) bool {
		return strings.HasPrefix(a, "--advertise-client-urls=")
	})
	for name, tc := range map[string]struct {
		pod  *v1.Pod
		ip   netip.Addr
		want string
	}{
		"an upgrade helper":          {helper, netip.MustParseAddr("192.0.2.21"), "upgrade helper"},
		"no address":                 {memberPod(), netip.Addr{}, "no address"},
		"no --advertise-client-urls": {noAdvertise, netip.MustParseAddr("192.0.2.21"), "--advertise-client-urls"},
		"not an etcd pod":            {&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, netip.MustParseAddr("192.0.2.21"), "no etcd container"},
	} {
		if _, err := MemberPodOf(tc.pod, "w1", tc.ip); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error with %q", name, err, tc.want)
		}
	}
}

// TestMemberPodOfIPv6Template: a template listening on the IPv6 loopback
// first keeps it.
func TestMemberPodOfIPv6Template(t *testing.T) {
	tmpl := memberPod()
	tmpl.Spec.Containers[0].Command = SetFlags(tmpl.Spec.Containers[0].Command, map[string]string{"listen-client-urls": "https://[::1]:2379,https://[2001:db8::10]:2379"})
	got, err := MemberPodOf(tmpl, "w6", netip.MustParseAddr("2001:db8::21"))
	if err != nil {
		t.Fatal(err)
	}
	if cmd := strings.Join(EtcdContainer(got).Command, " "); !strings.Contains(cmd, "--listen-client-urls=https://[::1]:2379,https://[2001:db8::21]:2379") {
		t.Errorf("command %s", cmd)
	}
}

// TestClientPair: a first-boot master reaches etcd with the healthcheck
// client's pair; a node labelled a master, which has none, with its
// member's own pair; neither there, the healthcheck's names (the error
// then says which file is missing).
func TestClientPair(t *testing.T) {
	dir := t.TempDir()
	m := MemberPod{CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "healthcheck-client.crt"), KeyFile: filepath.Join(dir, "healthcheck-client.key"),
		ServingCertFile: filepath.Join(dir, "server.crt"), ServingKeyFile: filepath.Join(dir, "server.key")}
	if cert, key := m.ClientPair(); cert != m.ServingCertFile || key != m.ServingKeyFile {
		t.Errorf("no healthcheck pair: %s %s, want the member's own", cert, key)
	}
	if err := os.WriteFile(m.CertFile, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cert, key := m.ClientPair(); cert != m.CertFile || key != m.KeyFile {
		t.Errorf("with the healthcheck pair: %s %s, want it", cert, key)
	}
	none := MemberPod{CertFile: filepath.Join(dir, "absent.crt"), KeyFile: filepath.Join(dir, "absent.key")}
	if cert, _ := none.ClientPair(); cert != none.CertFile {
		t.Errorf("neither pair: %s, want the healthcheck's name", cert)
	}
}
