package nodeagent

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
)

// The helpers of an etcd step of one or two members.
//
// A member of one or two cannot be replaced without a gap in which etcd
// serves nothing: the others are no majority. So for its step this node's
// agent adds members beside it until there are three (two beside one
// member, one beside one of two), each first a learner (a member that
// never starts is then no part of the quorum, and is removed), then a
// voter: of three voters, two keep the quorum while the member restarts at
// the new version. They run the version the member leaves, so until they
// go a rollback may still put it back (etcd's cluster version stays at the
// older minor). Once the member is healthy at its new version, and the
// apiservers name their own member alone again, they are removed and their
// pods and data deleted; the next member's step adds its own.
// docs/design/upgrade.md ("etcd's step") says why this shape.

// Helpers is how many helpers a member may have: a one-member etcd's step
// adds them all (upgrade.EtcdHelpersFor(1)), a two-member one the first.
const Helpers = upgrade.EtcdStepMembers - 1

// helperPortStep is how far each helper's ports are from the member's
// (client, peer and metrics alike): helper i listens on the member's
// ports plus i times it.
const helperPortStep = 10

// HelperName is the etcd --name of helper i (1-based) of the member named
// member; it is also the suffix of its pod's name.
func HelperName(member string, i int) string {
	return fmt.Sprintf("%s%s%d", member, helperInfix, i)
}

// IsHelperName reports whether an etcd member's name is a helper's
// (HelperName), of any member.
func IsHelperName(name string) bool {
	i := strings.LastIndex(name, helperInfix)
	if i <= 0 {
		return false
	}
	n, err := strconv.Atoi(name[i+len(helperInfix):])
	return err == nil && n >= 1
}

const helperInfix = "-upgrade-helper-"

// HelperPodName is the name of helper i's pod in bootlet's store (its
// mirror pod adds the node's name).
func HelperPodName(i int) string { return fmt.Sprintf("etcd-upgrade-helper-%d", i) }

// MemberPod is what the agent reads out of this node's etcd pod for its
// helpers: the member's name, its URLs, where its data lives, and the
// files of etcd's healthcheck client, all as render writes them
// (kubeadm's flags).
type MemberPod struct {
	Name       string
	ClientURL  string // the loopback one: the first of --listen-client-urls
	PeerURL    string // --initial-advertise-peer-urls
	MetricsURL string // --listen-metrics-urls (the probes' port)
	// DataDir is the host directory of its data.
	DataDir string
	// CAFile, CertFile and KeyFile are host paths: etcd's CA and the
	// healthcheck client's pair (kubeadm's client for its own etcd calls),
	// in the directory the member's --trusted-ca-file is mounted from.
	CAFile, CertFile, KeyFile string
	// ServingCertFile and ServingKeyFile are the host paths of the
	// member's own pair (--cert-file, --key-file; "" when not mounted
	// from the host). A node labelled a master has no healthcheck
	// client: its member's certificate is a client one too
	// (masters/signer issues it for both).
	ServingCertFile, ServingKeyFile string
}

// ClientPair is the client pair to reach etcd with: the healthcheck
// client's, which a master render made has; on a node labelled a master
// since, which has none, the member's own pair (a client certificate
// too).
func (m MemberPod) ClientPair() (certFile, keyFile string) {
	if _, err := os.Stat(m.CertFile); err != nil && m.ServingCertFile != "" && m.ServingKeyFile != "" {
		return m.ServingCertFile, m.ServingKeyFile
	}
	return m.CertFile, m.KeyFile
}

// ReadMemberPod reads the member out of its pod.
func ReadMemberPod(p *v1.Pod) (MemberPod, error) {
	ctr := EtcdContainer(p)
	if ctr == nil {
		return MemberPod{}, fmt.Errorf("pod %s has no %s container", p.Name, etcd)
	}
	flags := etcdFlags(ctr.Command)
	m := MemberPod{Name: flags["name"], PeerURL: first(flags["initial-advertise-peer-urls"]),
		ClientURL: first(flags["listen-client-urls"]), MetricsURL: first(flags["listen-metrics-urls"])}
	m.DataDir = hostPathOf(p, ctr, flags["data-dir"])
	ca := hostPathOf(p, ctr, flags["trusted-ca-file"])
	if ca != "" {
		dir := filepath.Dir(ca)
		m.CAFile, m.CertFile, m.KeyFile = ca, filepath.Join(dir, "healthcheck-client.crt"), filepath.Join(dir, "healthcheck-client.key")
	}
	m.ServingCertFile, m.ServingKeyFile = hostPathOf(p, ctr, flags["cert-file"]), hostPathOf(p, ctr, flags["key-file"])
	var missing []string
	for _, f := range []struct{ what, v string }{{"--name", m.Name}, {"--initial-advertise-peer-urls", m.PeerURL},
		{"--listen-client-urls", m.ClientURL}, {"--listen-metrics-urls", m.MetricsURL}, {"a hostPath at --data-dir", m.DataDir}, {"a hostPath at --trusted-ca-file", m.CAFile}} {
		if f.v == "" {
			missing = append(missing, f.what)
		}
	}
	if len(missing) > 0 {
		return MemberPod{}, fmt.Errorf("etcd pod %s: no %s", p.Name, strings.Join(missing, ", "))
	}
	return m, nil
}

// SharesClientAddress reports whether the helper pod p listens on the
// member's client URL too (HelperPod's shareAddress).
func SharesClientAddress(p *v1.Pod, memberClientURL string) bool {
	ctr := EtcdContainer(p)
	return ctr != nil && slices.Contains(strings.Split(etcdFlags(ctr.Command)["listen-client-urls"], ","), memberClientURL)
}

// Helper is one helper member as the agent adds it.
type Helper struct {
	Index              int
	Name, Pod          string
	ClientURL, PeerURL string
	DataDir            string
}

// HelperOf is helper i of member m: its ports are m's plus i times
// helperPortStep, its client URL loopback only (only this node's
// apiserver uses it), its peer URL on m's peer address (the member must
// reach it), and its data beside m's.
func HelperOf(m MemberPod, i int) (Helper, error) {
	client, err := shiftPort(m.ClientURL, i*helperPortStep)
	if err != nil {
		return Helper{}, err
	}
	client, err = withHost(client, "127.0.0.1")
	if err != nil {
		return Helper{}, err
	}
	peer, err := shiftPort(m.PeerURL, i*helperPortStep)
	if err != nil {
		return Helper{}, err
	}
	return Helper{Index: i, Name: HelperName(m.Name, i), Pod: HelperPodName(i), ClientURL: client, PeerURL: peer,
		DataDir: fmt.Sprintf("%s-upgrade-helper-%d", filepath.Clean(m.DataDir), i)}, nil
}

// HelpersOf are every helper member m may have (1 to Helpers), in order.
func HelpersOf(m MemberPod) ([]Helper, error) {
	var out []Helper
	for i := 1; i <= Helpers; i++ {
		h, err := HelperOf(m, i)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// HelperPod is the pod of helper h: a copy of the member's pod p (its
// image, its certificates, its probes) with h's name, ports and data
// directory, joining the existing cluster whose members initialCluster
// names (name=peerURL, h included). shareAddress: it listens on the
// member's loopback client address too (the member's
// --socket-reuse-port, which the copy keeps, lets it), advertising its
// own.
func HelperPod(p *v1.Pod, h Helper, initialCluster string, shareAddress bool) (*v1.Pod, error) {
	m, err := ReadMemberPod(p)
	if err != nil {
		return nil, err
	}
	metrics, err := shiftPort(m.MetricsURL, h.Index*helperPortStep)
	if err != nil {
		return nil, err
	}
	oldPort, err := portOf(m.MetricsURL)
	if err != nil {
		return nil, err
	}
	metricsPort, err := portOf(metrics)
	if err != nil {
		return nil, err
	}
	out := &v1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: h.Pod, Namespace: p.Namespace,
			Labels: map[string]string{"component": "etcd-upgrade-helper", "tier": "control-plane", btypes.LabelEtcdUpgradeHelper: h.Name}},
		Spec: *p.Spec.DeepCopy(),
	}
	ctr := EtcdContainer(out)
	dataDir := etcdFlags(ctr.Command)["data-dir"]
	listen := h.ClientURL
	if shareAddress {
		if !upgrade.EtcdSharesAddress(ctr.Command) {
			return nil, fmt.Errorf("etcd pod %s: no %s=true, so no second process may listen on its client address", p.Name, upgrade.ArgEtcdSocketReusePort)
		}
		listen += "," + m.ClientURL
	}
	ctr.Command = SetFlags(ctr.Command, map[string]string{
		"name": h.Name, "listen-client-urls": listen, "advertise-client-urls": h.ClientURL,
		"listen-peer-urls": h.PeerURL, "initial-advertise-peer-urls": h.PeerURL, "listen-metrics-urls": metrics,
		"initial-cluster": initialCluster, "initial-cluster-state": "existing",
	})
	// kubeadm declares the metrics port (probe-port, which the host
	// network makes a host port) and names it in the probes: the kubelet's
	// admission refuses a second pod with the same host port, so the
	// helper's is its own.
	for i := range ctr.Ports {
		if p := &ctr.Ports[i]; p.ContainerPort == int32(oldPort) {
			p.ContainerPort = int32(metricsPort)
			if p.HostPort != 0 {
				p.HostPort = int32(metricsPort)
			}
		}
	}
	for _, pr := range []*v1.Probe{ctr.LivenessProbe, ctr.ReadinessProbe, ctr.StartupProbe} {
		if pr != nil && pr.HTTPGet != nil && pr.HTTPGet.Port.Type == intstr.Int {
			pr.HTTPGet.Port = intstr.FromInt32(int32(metricsPort))
		}
	}
	if pr := ctr.StartupProbe; pr != nil && pr.HTTPGet != nil {
		// A learner fails /readyz (etcd's non_learner check) until it is
		// promoted; kubeadm's startup probe there would restart one that
		// takes long to catch up.
		pr.HTTPGet.Path = "/livez"
	}
	moved := false
	for _, vm := range ctr.VolumeMounts {
		if filepath.Clean(vm.MountPath) != filepath.Clean(dataDir) {
			continue
		}
		for i := range out.Spec.Volumes {
			if out.Spec.Volumes[i].Name == vm.Name && out.Spec.Volumes[i].HostPath != nil {
				out.Spec.Volumes[i].HostPath.Path = h.DataDir
				moved = true
			}
		}
	}
	if !moved {
		return nil, fmt.Errorf("etcd pod %s: no hostPath volume at --data-dir %s", p.Name, dataDir)
	}
	return out, nil
}

func portOf(u string) (int, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return 0, err
	}
	port, err := strconv.Atoi(pu.Port())
	if err != nil {
		return 0, fmt.Errorf("URL %s has no port: %w", u, err)
	}
	return port, nil
}

// InitialCluster is etcd's --initial-cluster for members (name=peerURL,
// comma-separated). A member added but not yet started has no name in
// etcd's list: it is named after the helper whose peer URL it has.
func InitialCluster(members []Member, helpers []Helper) string {
	var parts []string
	for _, m := range members {
		name := m.Name
		if name == "" {
			for _, h := range helpers {
				if len(m.PeerURLs) > 0 && m.PeerURLs[0] == h.PeerURL {
					name = h.Name
				}
			}
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, name+"="+u)
		}
	}
	return strings.Join(parts, ",")
}

// SetFlags is command with each --name=value of set in place of the
// command's own --name=, and those it lacks appended (by name): a flag
// the pod leaves to etcd's default (the peer port 2380 among them) would
// otherwise be the default's.
func SetFlags(command []string, set map[string]string) []string {
	set = maps.Clone(set)
	var cmd []string
	for _, a := range command {
		name, _, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if v, replace := set[name]; ok && strings.HasPrefix(a, "--") && replace {
			cmd = append(cmd, "--"+name+"="+v)
			delete(set, name)
			continue
		}
		cmd = append(cmd, a)
	}
	for _, name := range slices.Sorted(maps.Keys(set)) {
		cmd = append(cmd, "--"+name+"="+set[name])
	}
	return cmd
}

// EtcdContainer is p's etcd container, or nil.
func EtcdContainer(p *v1.Pod) *v1.Container {
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == etcd {
			return &p.Spec.Containers[i]
		}
	}
	return nil
}

// etcdFlags are the --name=value flags of a command.
func etcdFlags(command []string) map[string]string {
	flags := map[string]string{}
	for _, a := range command {
		if name, value, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok && strings.HasPrefix(a, "--") {
			flags[name] = value
		}
	}
	return flags
}

// hostPathOf is the host path of the file or directory at path in ctr:
// the hostPath volume mounted at it, or at a directory above it ("" when
// none is).
func hostPathOf(p *v1.Pod, ctr *v1.Container, path string) string {
	if path == "" {
		return ""
	}
	path = filepath.Clean(path)
	for _, vm := range ctr.VolumeMounts {
		mount := filepath.Clean(vm.MountPath)
		rel, err := filepath.Rel(mount, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		for _, vol := range p.Spec.Volumes {
			if vol.Name == vm.Name && vol.HostPath != nil {
				return filepath.Join(vol.HostPath.Path, rel)
			}
		}
	}
	return ""
}

func first(list string) string {
	v, _, _ := strings.Cut(list, ",")
	return v
}

// shiftPort is u with its port moved by delta.
func shiftPort(u string, delta int) (string, error) {
	port, err := portOf(u)
	if err != nil {
		return "", err
	}
	pu, _ := url.Parse(u) // portOf parsed it
	pu.Host = net.JoinHostPort(pu.Hostname(), strconv.Itoa(port+delta))
	return pu.String(), nil
}

func withHost(u, host string) (string, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	pu.Host = net.JoinHostPort(host, pu.Port())
	return pu.String(), nil
}

// annotationAdvertiseClientURLs is kubeadm's annotation of the member's
// client URL on its pod.
const annotationAdvertiseClientURLs = "kubeadm.kubernetes.io/etcd.advertise-client-urls"

// MemberPodOf is node's own member pod made from another master's
// (template: its pod as the apiserver mirrors it): the same image,
// certificate paths, data directory, probes and flags, with node's name
// and its address ip in etcd's URLs (kubeadm's: the client URL on the
// template's loopback and ip, the peer URL on ip) and in kubeadm's annotation. It
// is named as the template is in its master's store (the mirror's name
// without its node's), carries the template's labels and no other
// annotation (the template's are its node's: the kubelet's config hash,
// bootlet's owner), and joins nothing yet: the promotion's learner sets
// --initial-cluster.
func MemberPodOf(template *v1.Pod, node string, ip netip.Addr) (*v1.Pod, error) {
	if _, err := ReadMemberPod(template); err != nil {
		return nil, err
	}
	if btypes.IsEtcdUpgradeHelper(template) {
		return nil, fmt.Errorf("pod %s is an upgrade helper's, not a member's", template.Name)
	}
	if !ip.IsValid() {
		return nil, fmt.Errorf("node %s has no address for its member", node)
	}
	flags := etcdFlags(EtcdContainer(template).Command)
	clientPort, err := portOf(first(flags["advertise-client-urls"]))
	if err != nil {
		return nil, fmt.Errorf("etcd pod %s's --advertise-client-urls: %w", template.Name, err)
	}
	peerPort, err := portOf(first(flags["initial-advertise-peer-urls"]))
	if err != nil {
		return nil, fmt.Errorf("etcd pod %s's --initial-advertise-peer-urls: %w", template.Name, err)
	}
	httpsURL := func(host string, port int) string { return "https://" + net.JoinHostPort(host, strconv.Itoa(port)) }
	client, peer := httpsURL(ip.String(), clientPort), httpsURL(ip.String(), peerPort)
	// The loopback the template's member listens on first, where the
	// apiserver on its node reaches it (render's --etcd-servers): the same
	// on this node, whatever the family of its own address.
	loopback := "127.0.0.1"
	if u, err := url.Parse(first(flags["listen-client-urls"])); err == nil {
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && a.IsLoopback() {
			loopback = a.String()
		}
	}
	name := template.Name
	if template.Spec.NodeName != "" {
		name = strings.TrimSuffix(name, "-"+template.Spec.NodeName)
	}
	out := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: template.Namespace, Labels: maps.Clone(template.Labels),
			Annotations: map[string]string{annotationAdvertiseClientURLs: client}},
		Spec: *template.Spec.DeepCopy(),
	}
	out.Spec.NodeName = ""
	ctr := EtcdContainer(out)
	ctr.Command = SetFlags(ctr.Command, map[string]string{
		"name": node, "advertise-client-urls": client, "listen-client-urls": httpsURL(loopback, clientPort) + "," + client,
		"initial-advertise-peer-urls": peer, "listen-peer-urls": peer,
	})
	return out, nil
}
