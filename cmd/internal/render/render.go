package render

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/bootlet/bootlet/cmd/internal/cli"
	"github.com/bootlet/bootlet/manifests"
)

// NewCommand is `bootlet render`: the control-plane assets (PKI,
// kubeconfigs, bootstrap pods, self-hosted objects) for this node, written
// under --asset-dir. It only writes files; see docs/control-plane.md.
func NewCommand() *cobra.Command {
	cfg := manifests.DefaultConfig()
	var assetDir string
	var masters []string
	cmd := &cobra.Command{
		Use:   cli.RenderUse,
		Short: cli.RenderShort,
		Long: `Render the assets of a single-node Kubernetes control plane into --asset-dir, laid out as
kubeadm lays out /etc/kubernetes: pki/, admin.conf, controller-manager.conf, scheduler.conf,
kubelet.conf, kubelet-config.yaml (the kubelet's configuration: its API takes client
certificates of pki/kubelet-client-ca only and asks the apiserver to authorize each request),
bootstrap-manifests/ (etcd, kube-apiserver, kube-controller-manager and kube-scheduler pods
for bootlet to run first) and self-hosted/ (the objects of the self-hosted control plane, and
the --addons: flannel, kube-proxy and CoreDNS; join.yaml: a bootstrap token, cluster-info, the
RBAC of the kubelet's TLS bootstrap, and kube-system/kubelet-config, the kubelet configuration and
kubelet client CA of joining nodes, for workers to join) and bootstrap-kubelet.conf (that token
for a worker's kubelet; ` + "`bootlet join`" + ` writes the same on a worker). Running it again keeps existing
keys, certificates that still match, and the token until the last tenth of --bootstrap-token-ttl.

With --master NAME=IP once per control-plane node (and --control-plane-endpoint, the VIP in
front of them), it writes one such asset dir per master, --asset-dir/NAME, to be copied to that
master's --master-asset-dir (/etc/kubernetes): the CAs, the service-account key, the bootstrap
token and every certificate but a master's own (its etcd member's, its kubelet's) are the same in
all of them, and each master's bootstrap pods are its own (docs/cluster.md, "Three masters").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if assetDir == "" {
				return fmt.Errorf("--asset-dir is required")
			}
			if errs := setMasters(&cfg, masters, cmd.Flags()); len(errs) > 0 {
				// Every bad flag at once, as Render would say the rest.
				errs = append(errs, cfg.Validate()...)
				return apierrors.NewInvalid(schema.GroupKind{Group: "bootlet.dev", Kind: "RenderConfig"}, "render", errs)
			}
			if err := manifests.Render(cfg, assetDir); err != nil {
				return err
			}
			if len(cfg.Masters) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "rendered the control plane of node %s (%s) into %s\n", cfg.NodeName, cfg.APIServerURL(), assetDir)
				return nil
			}
			for i, m := range cfg.Masters {
				fmt.Fprintf(cmd.OutOrStdout(), "rendered the control plane of master %s (%s, API %s) into %s\n", m.Name, m.Address, cfg.ForMaster(i).APIServerURL(), manifests.MasterDir(assetDir, m.Name))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&assetDir, "asset-dir", "", "directory to write the assets to (created if missing)")
	f.StringVar(&cfg.NodeName, "node-name", cfg.NodeName, "node name: etcd member name, certificate SAN, kubelet identity")
	f.StringVar(&cfg.AdvertiseAddress, "advertise-address", cfg.AdvertiseAddress, "node IP the apiserver advertises and etcd listens on (default: the default-route interface's IPv4)")
	f.Int32Var(&cfg.APIServerPort, "api-server-port", cfg.APIServerPort, "apiserver secure port")
	f.StringVar(&cfg.ServiceCIDR, "service-cidr", cfg.ServiceCIDR, "service network; its first IP is the kubernetes service's")
	f.StringVar(&cfg.PodCIDR, "pod-cidr", cfg.PodCIDR, "pod network, from which node CIDRs are allocated")
	f.StringVar(&cfg.ClusterDomain, "cluster-domain", cfg.ClusterDomain, "cluster DNS domain")
	f.Int32Var(&cfg.KubeProxyConntrackMaxPerCore, "kube-proxy-conntrack-max-per-core", cfg.KubeProxyConntrackMaxPerCore, "kube-proxy's conntrack.maxPerCore: -1 kubeadm's default, 0 leaves the host's nf_conntrack_max alone (a node in a container, whose /proc/sys is read-only)")
	f.StringSliceVar(&cfg.EtcdServers, "etcd-servers", cfg.EtcdServers, "etcd client URLs for the apiserver")
	f.StringVar(&cfg.KubernetesVersion, "kubernetes-version", cfg.KubernetesVersion, "control-plane image tag")
	f.StringVar(&cfg.EtcdDataDir, "etcd-data-dir", cfg.EtcdDataDir, "host directory for etcd's data")
	f.DurationVar(&cfg.CertValidity, "cert-validity", cfg.CertValidity, "lifetime of leaf certificates")
	f.DurationVar(&cfg.CAValidity, "ca-validity", cfg.CAValidity, "lifetime of CA certificates")
	f.StringVar(&cfg.KubeletStaticPodPath, "kubelet-static-pod-path", cfg.KubeletStaticPodPath, "the kubelet's staticPodPath, in kubelet-config.yaml")
	f.StringVar(&cfg.KubeletRuntimeEndpoint, "kubelet-runtime-endpoint", cfg.KubeletRuntimeEndpoint, "the kubelet's containerRuntimeEndpoint, in kubelet-config.yaml")
	f.StringVar(&cfg.KubeletPodLogsDir, "kubelet-pod-logs-dir", cfg.KubeletPodLogsDir, "the kubelet's podLogsDir, in kubelet-config.yaml")
	f.StringSliceVar(&cfg.Addons, "addons", cfg.Addons, "cluster add-ons to write into self-hosted/ (flannel, kube-proxy, coredns; empty for none)")
	f.StringVar(&cfg.CNIBinDir, "cni-bin-dir", cfg.CNIBinDir, "the container runtime's CNI plugin directory, where flannel installs its plugin")
	f.StringVar(&cfg.CNIConfDir, "cni-conf-dir", cfg.CNIConfDir, "the container runtime's CNI config directory, where flannel installs its network config")
	f.StringVar(&cfg.CNIDataDir, "cni-data-dir", cfg.CNIDataDir, "host directory for the CNI plugins' state (IP allocations)")
	f.DurationVar(&cfg.BootstrapTokenTTL, "bootstrap-token-ttl", cfg.BootstrapTokenTTL, "lifetime of the bootstrap token workers join with (kubeadm's 24h); `bootlet join print --create-token` makes later ones")
	f.StringVar(&cfg.FlannelRunDir, "flannel-run-dir", cfg.FlannelRunDir, "host directory where flannel writes subnet.env for its CNI plugin")
	f.StringArrayVar(&masters, "master", nil, "NAME=IP of a control-plane node, once per master: write one asset dir per master, ASSET-DIR/NAME, each to be copied to that master's /etc/kubernetes (instead of --node-name and --advertise-address; docs/cluster.md, \"Three masters\")")
	f.StringVar(&cfg.MasterAssetDir, "master-asset-dir", cfg.MasterAssetDir, "with --master, where each master's asset dir is copied to on that master: its bootstrap pods and kubelet-config.yaml name files under it")
	f.StringVar(&cfg.ControlPlaneEndpoint, "control-plane-endpoint", "", "HOST[:PORT] of the API in front of the masters (a VIP; the port is --api-server-port's): every kubeconfig, cluster-info and the add-ons name it, the apiserver certificate has it as a SAN (kubeadm's controlPlaneEndpoint); required with more than one --master")
	return cmd
}

// setMasters sets cfg.Masters from the --master values. With them, a node
// name and address given by flag contradict the masters' and are refused;
// the host's defaults are dropped, as each master's come from its --master.
func setMasters(cfg *manifests.Config, values []string, flags *pflag.FlagSet) field.ErrorList {
	var errs field.ErrorList
	if len(values) == 0 {
		if flags.Changed("master-asset-dir") {
			errs = append(errs, field.Forbidden(field.NewPath("--master-asset-dir"), "only with --master"))
		}
		return errs
	}
	fld := field.NewPath("--master")
	for i, v := range values {
		m, err := manifests.ParseMaster(v)
		if err != nil {
			errs = append(errs, field.Invalid(fld.Index(i), v, err.Error()))
		}
		cfg.Masters = append(cfg.Masters, m)
	}
	if flags.Changed("node-name") {
		errs = append(errs, field.Forbidden(field.NewPath("--node-name"), "not with --master: each master's node name is its --master NAME"))
	}
	if flags.Changed("advertise-address") {
		errs = append(errs, field.Forbidden(field.NewPath("--advertise-address"), "not with --master: each master's address is its --master IP"))
	}
	cfg.NodeName, cfg.AdvertiseAddress = "", ""
	return errs
}
