//go:build bootlet_tools

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/manifests"
)

// newRenderCmd is `bootlet render`: the control-plane assets (PKI,
// kubeconfigs, bootstrap pods, self-hosted objects) for this node, written
// under --asset-dir. It only writes files; see docs/control-plane.md.
func newRenderCmd() *cobra.Command {
	cfg := manifests.DefaultConfig()
	var assetDir string
	cmd := &cobra.Command{
		Use:   renderUse,
		Short: renderShort,
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
keys, certificates that still match, and the token until the last tenth of --bootstrap-token-ttl.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if assetDir == "" {
				return fmt.Errorf("--asset-dir is required")
			}
			if err := manifests.Render(cfg, assetDir); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rendered the control plane of node %s (%s) into %s\n", cfg.NodeName, cfg.APIServerURL(), assetDir)
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
	return cmd
}
