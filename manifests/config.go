package manifests

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/component-helpers/node/util"
	kubeadmvalidation "k8s.io/kubernetes/cmd/kubeadm/app/apis/kubeadm/validation"
	kubeadmconstants "k8s.io/kubernetes/cmd/kubeadm/app/constants"
	netutils "k8s.io/utils/net"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Config holds the values of `bootlet render`'s flags.
type Config struct {
	// NodeName is the node's name: the etcd member name, a SAN of the
	// apiserver and etcd certificates, and the kubelet's identity.
	NodeName string
	// AdvertiseAddress is the node IP the apiserver advertises and etcd
	// listens on besides 127.0.0.1.
	AdvertiseAddress string
	// APIServerPort is the apiserver's secure port.
	APIServerPort int32
	// ServiceCIDR is the service network (one CIDR, or two for dual-stack);
	// its first IP is the `kubernetes` service's.
	ServiceCIDR string
	// PodCIDR is the pod network the controller-manager allocates node CIDRs from.
	PodCIDR string
	// ClusterDomain is the DNS domain of the cluster.
	ClusterDomain string
	// EtcdServers are the etcd client URLs the apiserver uses.
	EtcdServers []string
	// KubernetesVersion is the control-plane image tag (v1.36.3).
	KubernetesVersion string
	// EtcdDataDir is the host directory etcd keeps its data in.
	EtcdDataDir string
	// CertValidity is the lifetime of every leaf certificate.
	CertValidity time.Duration
	// CAValidity is the lifetime of the CA certificates.
	CAValidity time.Duration
	// KubeletStaticPodPath, KubeletRuntimeEndpoint and KubeletPodLogsDir
	// are the node's, for the kubelet's configuration (KubeletConfigFile).
	KubeletStaticPodPath   string
	KubeletRuntimeEndpoint string
	KubeletPodLogsDir      string
	// Addons are the cluster add-ons self-hosted/ holds (AllAddons, any
	// subset; none when the pod network, Services and DNS come from
	// elsewhere).
	Addons []string
	// CNIBinDir, CNIConfDir and CNIDataDir are the node's CNI directories
	// (the container runtime's bin and conf dirs, and the IPAM state):
	// flannel installs its plugin and network config there.
	// FlannelRunDir is where flannel writes subnet.env for its plugin.
	CNIBinDir, CNIConfDir, CNIDataDir, FlannelRunDir string
	// BootstrapTokenTTL is the lifetime of the bootstrap token render
	// writes for workers to join (JoinFile); a re-render keeps the token
	// until it is in the last tenth of it.
	BootstrapTokenTTL time.Duration
}

// Defaults that do not depend on the host.
const (
	DefaultAPIServerPort     = 6443
	DefaultServiceCIDR       = "10.96.0.0/12"
	DefaultPodCIDR           = "10.244.0.0/16"
	DefaultClusterDomain     = "cluster.local"
	DefaultKubernetesVersion = "v1.36.3"
	DefaultEtcdDataDir       = "/var/lib/etcd"
	DefaultCertValidity      = 365 * 24 * time.Hour
	DefaultCAValidity        = 10 * 365 * 24 * time.Hour
	// The kubelet's defaults (kubeadm's staticPodPath).
	DefaultKubeletStaticPodPath   = kubeadmconstants.KubernetesDir + "/" + kubeadmconstants.ManifestsSubDirName
	DefaultKubeletRuntimeEndpoint = "unix:///run/containerd/containerd.sock"
	DefaultKubeletPodLogsDir      = "/var/log/pods"
	// The CNI's and flannel's upstream host paths.
	DefaultCNIBinDir     = "/opt/cni/bin"
	DefaultCNIConfDir    = "/etc/cni/net.d"
	DefaultCNIDataDir    = "/var/lib/cni"
	DefaultFlannelRunDir = "/run/flannel"
)

// DefaultEtcdServers is the local etcd pod's client URL, as kubeadm's.
var DefaultEtcdServers = []string{fmt.Sprintf("https://127.0.0.1:%d", kubeadmconstants.EtcdListenClientPort)}

// DefaultConfig returns the flag defaults. The node name and advertise
// address come from the host (the lower-cased hostname, and the IPv4 address
// of the default-route interface); either is left empty if the host cannot
// tell, and Validate then says so.
func DefaultConfig() Config {
	cfg := Config{
		APIServerPort:     DefaultAPIServerPort,
		ServiceCIDR:       DefaultServiceCIDR,
		PodCIDR:           DefaultPodCIDR,
		ClusterDomain:     DefaultClusterDomain,
		EtcdServers:       append([]string(nil), DefaultEtcdServers...),
		KubernetesVersion: DefaultKubernetesVersion,
		EtcdDataDir:       DefaultEtcdDataDir,
		CertValidity:      DefaultCertValidity,
		CAValidity:        DefaultCAValidity,

		KubeletStaticPodPath:   DefaultKubeletStaticPodPath,
		KubeletRuntimeEndpoint: DefaultKubeletRuntimeEndpoint,
		KubeletPodLogsDir:      DefaultKubeletPodLogsDir,

		Addons:        append([]string(nil), AllAddons...),
		CNIBinDir:     DefaultCNIBinDir,
		CNIConfDir:    DefaultCNIConfDir,
		CNIDataDir:    DefaultCNIDataDir,
		FlannelRunDir: DefaultFlannelRunDir,

		BootstrapTokenTTL: DefaultBootstrapTokenTTL,
	}
	if name, err := util.GetHostname(""); err == nil {
		cfg.NodeName = name
	}
	if ip := hostIPv4(); ip != nil {
		cfg.AdvertiseAddress = ip.String()
	}
	return cfg
}

// hostIPv4 is the node's first non-loopback IPv4 address. It prefers the
// address of the default-route interface (what kubeadm picks, so that a
// bridge such as docker0 or cni0 is not chosen when it happens to come
// first), and falls back to the first global IPv4 of any interface that is up.
func hostIPv4() net.IP {
	if ip, err := utilnet.ChooseHostInterface(); err == nil && ip.To4() != nil && !ip.IsLoopback() {
		return ip
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && n.IP.IsGlobalUnicast() {
				return n.IP.To4()
			}
		}
	}
	return nil
}

// Validate checks every field and names the flag of each bad value. It reuses
// kubeadm's validators where kubeadm has one, so the same values are accepted.
func (c Config) Validate() field.ErrorList {
	var errs field.ErrorList
	p := func(flag string) *field.Path { return field.NewPath("--" + flag) }

	if c.NodeName == "" {
		errs = append(errs, field.Required(p("node-name"), "the host name could not be found; set it"))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(c.NodeName) {
			errs = append(errs, field.Invalid(p("node-name"), c.NodeName, msg))
		}
		// The runtime name of each static pod is NAME-NODENAME, which must
		// itself be a DNS subdomain.
		if longest := "kube-controller-manager-" + c.NodeName; len(longest) > validation.DNS1123SubdomainMaxLength {
			errs = append(errs, field.TooLong(p("node-name"), c.NodeName, validation.DNS1123SubdomainMaxLength-len("kube-controller-manager-")))
		}
	}

	var advertise net.IP
	if c.AdvertiseAddress == "" {
		errs = append(errs, field.Required(p("advertise-address"), "no non-loopback IPv4 address was found on this host; set it"))
	} else if advertise = netutils.ParseIPSloppy(c.AdvertiseAddress); advertise == nil {
		errs = append(errs, field.Invalid(p("advertise-address"), c.AdvertiseAddress, "must be an IP address"))
	} else if advertise.IsLoopback() || advertise.IsUnspecified() {
		// etcd listens on 127.0.0.1 and on this address: a loopback one would
		// be bound twice, and an unspecified one cannot be advertised.
		errs = append(errs, field.Invalid(p("advertise-address"), c.AdvertiseAddress, "must not be a loopback or unspecified address"))
	}
	errs = append(errs, kubeadmvalidation.ValidatePort(c.APIServerPort, p("api-server-port"))...)

	svcErrs := kubeadmvalidation.ValidateIPNetFromString(c.ServiceCIDR, kubeadmconstants.MinimumAddressesInServiceSubnet, p("service-cidr"))
	if len(svcErrs) == 0 {
		svcErrs = kubeadmvalidation.ValidateServiceSubnetSize(c.ServiceCIDR, p("service-cidr"))
	}
	errs = append(errs, svcErrs...)
	podErrs := kubeadmvalidation.ValidateIPNetFromString(c.PodCIDR, kubeadmconstants.MinimumAddressesInPodSubnet, p("pod-cidr"))
	if len(podErrs) == 0 {
		podErrs = kubeadmvalidation.ValidatePodSubnetNodeMask(c.PodCIDR, clusterConfiguration(c), p("pod-cidr"))
	}
	errs = append(errs, podErrs...)
	if len(svcErrs) == 0 && len(podErrs) == 0 {
		svc, _ := netutils.ParseCIDRs(strings.Split(c.ServiceCIDR, ","))
		pod, _ := netutils.ParseCIDRs(strings.Split(c.PodCIDR, ","))
		for _, s := range svc {
			for _, q := range pod {
				if s.Contains(q.IP) || q.Contains(s.IP) {
					errs = append(errs, field.Invalid(p("pod-cidr"), c.PodCIDR, fmt.Sprintf("overlaps the service CIDR %s", s)))
				}
			}
		}
		// The apiserver refuses a primary service range of another family
		// than its advertise address.
		if advertise != nil && netutils.IsIPv6(advertise) != netutils.IsIPv6CIDR(svc[0]) {
			errs = append(errs, field.Invalid(p("service-cidr"), c.ServiceCIDR, "the first CIDR must be of the advertise address's IP family"))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(c.ClusterDomain) {
		errs = append(errs, field.Invalid(p("cluster-domain"), c.ClusterDomain, msg))
	}
	if len(c.EtcdServers) == 0 {
		errs = append(errs, field.Required(p("etcd-servers"), "at least one etcd client URL"))
	} else {
		// The apiserver is given etcd client certificates, so only https.
		errs = append(errs, kubeadmvalidation.ValidateURLs(c.EtcdServers, true, p("etcd-servers"))...)
	}
	if !strings.HasPrefix(c.KubernetesVersion, "v") {
		errs = append(errs, field.Invalid(p("kubernetes-version"), c.KubernetesVersion, "must be a semantic version starting with v, like v1.36.3"))
	} else if _, err := version.ParseSemantic(c.KubernetesVersion); err != nil {
		errs = append(errs, field.Invalid(p("kubernetes-version"), c.KubernetesVersion, err.Error()))
	}
	errs = append(errs, kubeadmvalidation.ValidateAbsolutePath(c.EtcdDataDir, p("etcd-data-dir"))...)
	if c.CertValidity <= 0 {
		errs = append(errs, field.Invalid(p("cert-validity"), c.CertValidity.String(), "must be positive"))
	}
	if c.CAValidity <= 0 {
		errs = append(errs, field.Invalid(p("ca-validity"), c.CAValidity.String(), "must be positive"))
	} else if c.CertValidity > c.CAValidity {
		errs = append(errs, field.Invalid(p("cert-validity"), c.CertValidity.String(), fmt.Sprintf("must not exceed --ca-validity (%s): a certificate cannot outlive its CA", c.CAValidity)))
	}
	errs = append(errs, kubeadmvalidation.ValidateAbsolutePath(c.KubeletStaticPodPath, p("kubelet-static-pod-path"))...)
	errs = append(errs, kubeadmvalidation.ValidateAbsolutePath(c.KubeletPodLogsDir, p("kubelet-pod-logs-dir"))...)
	if u, err := url.Parse(c.KubeletRuntimeEndpoint); err != nil || u.Scheme != "unix" || !filepath.IsAbs(u.Path) {
		errs = append(errs, field.Invalid(p("kubelet-runtime-endpoint"), c.KubeletRuntimeEndpoint, "must be a unix:// URL with an absolute path"))
	}
	errs = append(errs, validateAddons(c.Addons, p("addons"))...)
	errs = append(errs, kubeadmvalidation.ValidateAbsolutePath(c.CNIBinDir, p("cni-bin-dir"))...)
	errs = append(errs, kubeadmvalidation.ValidateAbsolutePath(c.CNIConfDir, p("cni-conf-dir"))...)
	errs = append(errs, kubeadmvalidation.ValidateAbsolutePath(c.CNIDataDir, p("cni-data-dir"))...)
	errs = append(errs, kubeadmvalidation.ValidateAbsolutePath(c.FlannelRunDir, p("flannel-run-dir"))...)
	if c.BootstrapTokenTTL <= 0 {
		// A token that never expires would let anyone who ever saw it
		// join a node for ever.
		errs = append(errs, field.Invalid(p("bootstrap-token-ttl"), c.BootstrapTokenTTL.String(), "must be positive"))
	}
	return errs
}

// validateAddons accepts any subset of AllAddons, each once.
func validateAddons(addons []string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, a := range addons {
		switch {
		case !slices.Contains(AllAddons, a):
			errs = append(errs, field.NotSupported(fld.Index(i), a, AllAddons))
		case seen[a]:
			errs = append(errs, field.Duplicate(fld.Index(i), a))
		}
		seen[a] = true
	}
	return errs
}

// DNSServiceIP is the kube-dns Service's ClusterIP, the 10th IP of the
// service CIDR as kubeadm picks it, and so the kubelet's clusterDNS.
func (c Config) DNSServiceIP() (net.IP, error) {
	return kubeadmconstants.GetDNSIP(c.ServiceCIDR)
}

// HasAddon says whether render writes the add-on name.
func (c Config) HasAddon(name string) bool {
	return slices.Contains(c.Addons, name)
}

// APIServerServiceIP is the first IP of the (first) service CIDR: the
// ClusterIP of default/kubernetes, so a SAN of the apiserver certificate.
func (c Config) APIServerServiceIP() (net.IP, error) {
	return kubeadmconstants.GetAPIServerVirtualIP(c.ServiceCIDR)
}

// APIServerURL is where every kubeconfig points: the advertise address, as
// kubeadm's kubeconfigs do when no controlPlaneEndpoint is set.
func (c Config) APIServerURL() string {
	return "https://" + net.JoinHostPort(c.AdvertiseAddress, fmt.Sprint(c.APIServerPort))
}
