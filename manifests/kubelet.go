package manifests

import (
	"fmt"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	kubeletconfig "k8s.io/kubelet/config/v1beta1"
	kubeadmutil "k8s.io/kubernetes/cmd/kubeadm/app/util"
	"k8s.io/utils/ptr"
)

// The kubelet's configuration is written here and nowhere else: `bootlet
// render` writes KubeletConfigFile for `make up` (hack/kubelet-up.sh), and
// the e2e framework calls KubeletConfiguration for its kubelets, which run
// on other ports and directories or without an apiserver.

// KubeletConfigFile is the kubelet's --config under the asset dir.
const KubeletConfigFile = "kubelet-config.yaml"

// The kubelet's default ports (kubeadm's): its API and its plain-HTTP
// healthz, the latter on 127.0.0.1 only.
const (
	DefaultKubeletPort        = 10250
	DefaultKubeletHealthzPort = 10248
)

// KubeletOptions are what differs between the kubelets that use the one
// configuration: make up's, and the e2e framework's.
type KubeletOptions struct {
	StaticPodPath            string
	ContainerRuntimeEndpoint string
	PodLogsDir               string
	// Port is the kubelet API's (HTTPS), HealthzPort its healthz's (HTTP,
	// 127.0.0.1).
	Port, HealthzPort int32
	// ClientCAFile is the only CA whose client certificates the kubelet API
	// accepts: render's kubelet-client-ca, which signs the apiserver's
	// kubelet client and nothing else. "" accepts no certificate at all.
	ClientCAFile string
	// Standalone is a kubelet without an apiserver (no --kubeconfig): it
	// does not register a node, and it cannot ask an apiserver to review a
	// token or an access, so it listens on 127.0.0.1 only, with x509 as its
	// only authentication (anonymous off) and every authenticated request
	// allowed (AlwaysAllow: whoever holds a certificate of ClientCAFile is
	// root on the node anyway).
	Standalone bool
	// ClusterDNS and ClusterDomain are what the kubelet writes into the
	// resolv.conf of every pod with dnsPolicy ClusterFirst; empty: none
	// (the kubelet then falls back to the host's resolver and warns).
	ClusterDNS    []string
	ClusterDomain string
}

// KubeletConfiguration is the kubelet's configuration for o: kubeadm's API trust, the kubelet's
// own eviction and local storage defaults, and what bootlet's nodes need (cgroup v1 allowed, swap
// tolerated, quick static pod pickup); each setting and why: docs/control-plane.md, "The
// kubelet's configuration".
func KubeletConfiguration(o KubeletOptions) (*kubeletconfig.KubeletConfiguration, error) {
	if o.StaticPodPath == "" || o.ContainerRuntimeEndpoint == "" || o.PodLogsDir == "" {
		return nil, fmt.Errorf("kubelet configuration: a static pod path, a runtime endpoint and a pod log directory are required")
	}
	if o.Port <= 0 || o.HealthzPort <= 0 {
		return nil, fmt.Errorf("kubelet configuration: ports %d and %d must be positive", o.Port, o.HealthzPort)
	}
	for _, p := range []string{o.StaticPodPath, o.PodLogsDir, o.ClientCAFile} {
		if p != "" && !filepath.IsAbs(p) {
			return nil, fmt.Errorf("kubelet configuration: path %q is not absolute", p)
		}
	}
	second := metav1.Duration{Duration: time.Second}
	cfg := &kubeletconfig.KubeletConfiguration{
		TypeMeta:                 metav1.TypeMeta{APIVersion: kubeletconfig.SchemeGroupVersion.String(), Kind: "KubeletConfiguration"},
		StaticPodPath:            o.StaticPodPath,
		FileCheckFrequency:       second,
		SyncFrequency:            second,
		ContainerRuntimeEndpoint: o.ContainerRuntimeEndpoint,
		PodLogsDir:               o.PodLogsDir,
		// The kubelet refuses cgroup v1 by default since v1.35; on a cgroup
		// v2 host the field changes nothing.
		FailCgroupV1:           ptr.To(false),
		FailSwapOn:             ptr.To(false),
		CgroupDriver:           "cgroupfs",
		CgroupsPerQOS:          ptr.To(true),
		EnforceNodeAllocatable: []string{"pods"},
		// localStorageCapacityIsolation, evictionHard and the image GC
		// thresholds are left unset, so the kubelet's defaults hold: it
		// reports the node's ephemeral-storage (a pod that requests some
		// can be scheduled), evicts a pod past its ephemeral-storage limit
		// or an emptyDir past its sizeLimit, and evicts and collects images
		// before the node's disk or memory runs out. This configuration is
		// every node's (`bootlet join` ships it to workers too), so it must
		// not carry a test machine's settings: those belong to the test
		// harness (e2e/kubelet.go, hack/kubelet-up.sh).
		RegisterNode: ptr.To(!o.Standalone),
		// Every image in the node's status, not the kubelet's default 50
		// largest: an upgrade's preflight reads there which of the
		// target's images a node lacks (upgrade.Observe).
		NodeStatusMaxImages: ptr.To[int32](-1),
		// The kubelet renews its client certificate (kubelet.conf's, which
		// seeds its --cert-dir) through a CSR the controller-manager approves
		// (nodeCertRotationBinding) and signs (--cluster-signing-*-file),
		// as kubeadm's kubelets do; a standalone kubelet has no apiserver.
		RotateCertificates: !o.Standalone,
		Address:            "0.0.0.0",
		Port:               o.Port,
		ReadOnlyPort:       0,
		HealthzBindAddress: "127.0.0.1",
		HealthzPort:        ptr.To(o.HealthzPort),
		Authentication: kubeletconfig.KubeletAuthentication{
			Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: ptr.To(false)},
			Webhook:   kubeletconfig.KubeletWebhookAuthentication{Enabled: ptr.To(!o.Standalone)},
			X509:      kubeletconfig.KubeletX509Authentication{ClientCAFile: o.ClientCAFile},
		},
		Authorization: kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeWebhook},
		ClusterDNS:    o.ClusterDNS,
		ClusterDomain: o.ClusterDomain,
	}
	if o.Standalone {
		cfg.Address = "127.0.0.1"
		cfg.Authorization.Mode = kubeletconfig.KubeletAuthorizationModeAlwaysAllow
	}
	return cfg, nil
}

// kubeletOptions are make up's kubelet's, from the render Config: the
// kubelet's default ports, render's kubelet client CA, and the cluster DNS
// at the kube-dns Service's IP (set whether or not CoreDNS is rendered, as
// kubeadm does: a cluster that brings its own DNS puts it there).
func kubeletOptions(c Config, assetDir string) (KubeletOptions, error) {
	dns, err := c.DNSServiceIP()
	if err != nil {
		return KubeletOptions{}, err
	}
	return KubeletOptions{
		ClusterDNS:               []string{dns.String()},
		ClusterDomain:            c.ClusterDomain,
		StaticPodPath:            c.KubeletStaticPodPath,
		ContainerRuntimeEndpoint: c.KubeletRuntimeEndpoint,
		PodLogsDir:               c.KubeletPodLogsDir,
		Port:                     DefaultKubeletPort,
		HealthzPort:              DefaultKubeletHealthzPort,
		ClientCAFile:             filepath.Join(assetDir, PKIDir, KubeletClientCA+".crt"),
	}, nil
}

// MarshalKubeletConfiguration serializes cfg as YAML with the kubelet's own
// API types and the Kubernetes serializer (fields in struct order).
func MarshalKubeletConfiguration(cfg *kubeletconfig.KubeletConfiguration) ([]byte, error) {
	scheme := runtime.NewScheme()
	if err := kubeletconfig.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return kubeadmutil.MarshalToYamlForCodecs(cfg, kubeletconfig.SchemeGroupVersion, serializer.NewCodecFactory(scheme))
}
