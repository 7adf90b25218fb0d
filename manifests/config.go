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
	kubeadmutil "k8s.io/kubernetes/cmd/kubeadm/app/util"
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
	// KubeProxyConntrackMaxPerCore is kube-proxy's conntrack.maxPerCore:
	// -1 keeps kubeadm's default (32768), 0 leaves nf_conntrack_max as the
	// host has it. A node in a container needs 0, as kind's do: kube-proxy
	// writes the sysctl whenever it differs from its own figure (up or
	// down), and a container's /proc/sys is read-only, so it exits.
	KubeProxyConntrackMaxPerCore int32
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
	// Masters are the control-plane nodes when render writes one asset
	// directory per master (RenderMasters; docs/cluster.md, "Three
	// masters"); empty: one node, NodeName and AdvertiseAddress. A
	// master's own Config (ForMaster) has both: NodeName and
	// AdvertiseAddress are that master's, Masters the whole list.
	Masters []Master
	// ControlPlaneEndpoint is kubeadm's controlPlaneEndpoint, HOST[:PORT]:
	// the one address of the API in front of the masters (a keepalived
	// VIP). When set, every kubeconfig, cluster-info and the add-ons
	// name it, and the apiserver certificate has its host as a SAN.
	ControlPlaneEndpoint string
	// MasterAssetDir is, with Masters, where each master's asset dir is
	// copied to on that master (DefaultMasterAssetDir): the bootstrap pods'
	// host paths and kubelet-config.yaml name it, so the dir works there
	// as if rendered in place.
	MasterAssetDir string
}

// Master is one control-plane node of a render for several masters: its
// node name and the IP its etcd member and apiserver advertise.
type Master struct {
	Name, Address string
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
	// DefaultMasterAssetDir is kubeadm's /etc/kubernetes.
	DefaultMasterAssetDir = kubeadmconstants.KubernetesDir
)

// DefaultEtcdServers is the local etcd pod's client URL, as kubeadm's.
var DefaultEtcdServers = []string{fmt.Sprintf("https://127.0.0.1:%d", kubeadmconstants.EtcdListenClientPort)}

// DefaultConfig returns the flag defaults. The node name and advertise
// address come from the host (the lower-cased hostname, and the IPv4 address
// of the default-route interface); either is left empty if the host cannot
// tell, and Validate then says so.
func DefaultConfig() Config {
	cfg := Config{
		APIServerPort:                DefaultAPIServerPort,
		ServiceCIDR:                  DefaultServiceCIDR,
		PodCIDR:                      DefaultPodCIDR,
		ClusterDomain:                DefaultClusterDomain,
		KubeProxyConntrackMaxPerCore: -1,
		EtcdServers:                  append([]string(nil), DefaultEtcdServers...),
		KubernetesVersion:            DefaultKubernetesVersion,
		EtcdDataDir:                  DefaultEtcdDataDir,
		CertValidity:                 DefaultCertValidity,
		CAValidity:                   DefaultCAValidity,

		KubeletStaticPodPath:   DefaultKubeletStaticPodPath,
		KubeletRuntimeEndpoint: DefaultKubeletRuntimeEndpoint,
		KubeletPodLogsDir:      DefaultKubeletPodLogsDir,

		Addons:        append([]string(nil), AllAddons...),
		CNIBinDir:     DefaultCNIBinDir,
		CNIConfDir:    DefaultCNIConfDir,
		CNIDataDir:    DefaultCNIDataDir,
		FlannelRunDir: DefaultFlannelRunDir,

		BootstrapTokenTTL: DefaultBootstrapTokenTTL,
		MasterAssetDir:    DefaultMasterAssetDir,
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

	var advertise net.IP
	if len(c.Masters) == 0 {
		errs = append(errs, validateNodeName(c.NodeName, p("node-name"))...)
		var addrErrs field.ErrorList
		advertise, addrErrs = validateAdvertiseAddress(c.AdvertiseAddress, p("advertise-address"), "no non-loopback IPv4 address was found on this host; set it")
		errs = append(errs, addrErrs...)
	} else {
		var mErrs field.ErrorList
		advertise, mErrs = c.validateMasters(p("master"))
		errs = append(errs, mErrs...)
		errs = append(errs, kubeadmvalidation.ValidateAbsolutePath(c.MasterAssetDir, p("master-asset-dir"))...)
	}
	errs = append(errs, kubeadmvalidation.ValidatePort(c.APIServerPort, p("api-server-port"))...)
	errs = append(errs, c.validateControlPlaneEndpoint(p("control-plane-endpoint"))...)

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
	if c.KubeProxyConntrackMaxPerCore < -1 {
		errs = append(errs, field.Invalid(p("kube-proxy-conntrack-max-per-core"), c.KubeProxyConntrackMaxPerCore, "must be -1 (kubeadm's default), 0 (leave nf_conntrack_max alone) or a positive count"))
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
	if why := ValidateBootstrapTokenTTL(c.BootstrapTokenTTL); why != "" {
		errs = append(errs, field.Invalid(p("bootstrap-token-ttl"), c.BootstrapTokenTTL.String(), why))
	}
	return errs
}

// validateNodeName checks a node name: a DNS subdomain that leaves room
// for the runtime names of its static pods.
func validateNodeName(name string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		return append(errs, field.Required(fld, "the host name could not be found; set it"))
	}
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(fld, name, msg))
	}
	// The runtime name of each static pod is NAME-NODENAME, which must
	// itself be a DNS subdomain.
	if longest := "kube-controller-manager-" + name; len(longest) > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, field.TooLong(fld, name, validation.DNS1123SubdomainMaxLength-len("kube-controller-manager-")))
	}
	return errs
}

// validateAdvertiseAddress checks a node's IP and returns it parsed (nil
// when it is not one).
func validateAdvertiseAddress(addr string, fld *field.Path, requiredMsg string) (net.IP, field.ErrorList) {
	var errs field.ErrorList
	ip := netutils.ParseIPSloppy(addr)
	switch {
	case addr == "":
		errs = append(errs, field.Required(fld, requiredMsg))
	case ip == nil:
		errs = append(errs, field.Invalid(fld, addr, "must be an IP address"))
	case ip.IsLoopback() || ip.IsUnspecified():
		// etcd listens on 127.0.0.1 and on this address: a loopback one would
		// be bound twice, and an unspecified one cannot be advertised.
		errs = append(errs, field.Invalid(fld, addr, "must not be a loopback or unspecified address"))
	}
	return ip, errs
}

// validateMasters checks Masters (each a node name and address, none
// twice, all of one IP family) and that NodeName and AdvertiseAddress, if
// set, are one of them (a master's own Config); it returns the first
// master's address, for the service CIDR's family check.
func (c Config) validateMasters(fld *field.Path) (net.IP, field.ErrorList) {
	var errs field.ErrorList
	var first net.IP
	names, addrs := map[string]bool{}, map[string]bool{}
	for i, m := range c.Masters {
		errs = append(errs, validateNodeName(m.Name, fld.Index(i).Child("name"))...)
		ip, aerrs := validateAdvertiseAddress(m.Address, fld.Index(i).Child("address"), "NAME=IP")
		errs = append(errs, aerrs...)
		if names[m.Name] {
			errs = append(errs, field.Duplicate(fld.Index(i).Child("name"), m.Name))
		}
		names[m.Name] = true
		if ip == nil {
			continue
		}
		if addrs[ip.String()] {
			errs = append(errs, field.Duplicate(fld.Index(i).Child("address"), m.Address))
		}
		addrs[ip.String()] = true
		if first == nil {
			first = ip
		} else if netutils.IsIPv6(first) != netutils.IsIPv6(ip) {
			errs = append(errs, field.Invalid(fld.Index(i).Child("address"), m.Address, "must be of the first master's IP family"))
		}
	}
	if len(c.Masters) > 1 && c.ControlPlaneEndpoint == "" {
		// Every master's kubeconfigs, cluster-info and the one set of
		// self-hosted objects would name one master's own address: the
		// cluster would stop when that master does. kubeadm refuses a
		// second control-plane node without it too.
		errs = append(errs, field.Required(field.NewPath("--control-plane-endpoint"), "required with more than one --master: the one address (a VIP) of the API in front of them"))
	}
	// A master's own Config (ForMaster) names one of them.
	if c.NodeName != "" || c.AdvertiseAddress != "" {
		if i := slices.IndexFunc(c.Masters, func(m Master) bool { return m.Name == c.NodeName }); i < 0 || c.Masters[i].Address != c.AdvertiseAddress {
			errs = append(errs, field.Invalid(field.NewPath("--node-name"), c.NodeName, fmt.Sprintf("with --master, each master's name and address come from its --master (%s=%s is not one of them)", c.NodeName, c.AdvertiseAddress)))
		}
	}
	return first, errs
}

// validateControlPlaneEndpoint checks ControlPlaneEndpoint as kubeadm
// checks its controlPlaneEndpoint (HOST[:PORT], the host an IP or a DNS
// subdomain). Its port must be the apiserver's: the endpoint is an address
// in front of the masters' apiservers (a VIP), not a proxy, and bootlet's
// hand-over of the apiserver port (package reuseport) probes the node's
// own apiserver at the kubeconfigs' port.
func (c Config) validateControlPlaneEndpoint(fld *field.Path) field.ErrorList {
	if c.ControlPlaneEndpoint == "" {
		return nil
	}
	if errs := kubeadmvalidation.ValidateHostPort(c.ControlPlaneEndpoint, fld); len(errs) > 0 {
		return errs
	}
	if _, port, _ := kubeadmutil.ParseHostPort(c.ControlPlaneEndpoint); port != "" && port != fmt.Sprint(c.APIServerPort) {
		return field.ErrorList{field.Invalid(fld, c.ControlPlaneEndpoint, fmt.Sprintf("the port must be the apiserver's (--api-server-port %d): the endpoint is an address of the masters' apiservers (a VIP), not a proxy", c.APIServerPort))}
	}
	return nil
}

// ControlPlaneEndpointHost is ControlPlaneEndpoint's host ("" when unset).
func (c Config) ControlPlaneEndpointHost() string {
	host, _, _ := kubeadmutil.ParseHostPort(c.ControlPlaneEndpoint)
	return host
}

// apiServerHost is the host of APIServerURL: the control-plane endpoint's,
// else the advertise address.
func (c Config) apiServerHost() string {
	if h := c.ControlPlaneEndpointHost(); h != "" {
		return h
	}
	return c.AdvertiseAddress
}

// ForMaster is master i's own Config: NodeName and AdvertiseAddress are
// its, everything else (Masters included) the cluster's.
func (c Config) ForMaster(i int) Config {
	c.NodeName, c.AdvertiseAddress = c.Masters[i].Name, c.Masters[i].Address
	return c
}

// ParseMaster parses a --master value, NAME=IP. A value without "=" is an
// error, and its Master is what it does say (its name), so a list of them
// keeps the flags' indices.
func ParseMaster(s string) (Master, error) {
	name, addr, ok := strings.Cut(s, "=")
	if !ok {
		return Master{Name: name}, fmt.Errorf("must be NAME=IP, like master-1=172.30.90.11")
	}
	return Master{Name: name, Address: addr}, nil
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

// APIServerURL is where every kubeconfig points: the control-plane
// endpoint when set, else the advertise address, as kubeadm's kubeconfigs
// do (its GetControlPlaneEndpoint: the endpoint's port, or the apiserver's
// when it names none).
func (c Config) APIServerURL() string {
	if c.ControlPlaneEndpoint != "" {
		if u, err := kubeadmutil.GetControlPlaneEndpoint(c.ControlPlaneEndpoint, apiEndpoint(c)); err == nil {
			return u
		}
	}
	return "https://" + net.JoinHostPort(c.AdvertiseAddress, fmt.Sprint(c.APIServerPort))
}
