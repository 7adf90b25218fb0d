package cri

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	runtimeutil "k8s.io/kubernetes/pkg/kubelet/kuberuntime/util"
	kubeletutil "k8s.io/kubernetes/pkg/kubelet/util"
)

// SandboxOptions are the node facts the sandbox config depends on.
type SandboxOptions struct {
	// PodLogsDir is the kubelet's --pod-logs-dir equivalent (/var/log/pods).
	PodLogsDir string
	// CgroupDriver is cgroupfs or systemd, as the kubelet's cgroupDriver.
	CgroupDriver string
	// DNS is what the kubelet's dns.Configurer returns for this pod.
	DNS *runtimeapi.DNSConfig
}

// SandboxConfig is the kubelet's generatePodSandboxConfig
// (pkg/kubelet/kuberuntime/kuberuntime_sandbox.go) for a defaulted pod whose
// name is already the static-pod name NAME-NODENAME.
func SandboxConfig(pod *v1.Pod, attempt uint32, o SandboxOptions) (*runtimeapi.PodSandboxConfig, error) {
	logDir, err := PodLogsDirectory(o.PodLogsDir, pod.Namespace, pod.Name, pod.UID)
	if err != nil {
		return nil, err
	}
	cgroupParent, err := PodCgroupParent(pod, o.CgroupDriver)
	if err != nil {
		return nil, err
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   attempt,
		},
		Labels:       PodLabels(pod),
		Annotations:  pod.Annotations,
		DnsConfig:    o.DNS,
		LogDirectory: logDir,
	}
	if !kubecontainer.IsHostNetworkPod(pod) {
		hostname, err := PodHostname(pod)
		if err != nil {
			return nil, err
		}
		cfg.Hostname = hostname
	}

	var mappings []*runtimeapi.PortMapping
	for i := range pod.Spec.Containers {
		for _, p := range kubecontainer.MakePortMappings(klog.Background(), &pod.Spec.Containers[i]) {
			mappings = append(mappings, &runtimeapi.PortMapping{
				HostIp:        p.HostIP,
				HostPort:      int32(p.HostPort),
				ContainerPort: int32(p.ContainerPort),
				Protocol:      runtimeProtocol(p.Protocol),
			})
		}
	}
	cfg.PortMappings = mappings

	lc := &runtimeapi.LinuxPodSandboxConfig{
		CgroupParent: cgroupParent,
		SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			Privileged: kubecontainer.HasPrivilegedContainer(pod),
			Seccomp:    &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
		},
		Sysctls: map[string]string{},
	}
	if sc := pod.Spec.SecurityContext; sc != nil {
		for _, s := range sc.Sysctls {
			lc.Sysctls[s.Name] = s.Value
		}
		if sc.RunAsUser != nil {
			lc.SecurityContext.RunAsUser = &runtimeapi.Int64Value{Value: *sc.RunAsUser}
		}
		if sc.RunAsGroup != nil {
			lc.SecurityContext.RunAsGroup = &runtimeapi.Int64Value{Value: *sc.RunAsGroup}
		}
		lc.SecurityContext.NamespaceOptions = NamespaceOptions(pod)
		if sc.FSGroup != nil {
			lc.SecurityContext.SupplementalGroups = append(lc.SecurityContext.SupplementalGroups, *sc.FSGroup)
		}
		lc.SecurityContext.SupplementalGroups = append(lc.SecurityContext.SupplementalGroups, sc.SupplementalGroups...)
		if sc.SupplementalGroupsPolicy != nil {
			v, ok := runtimeapi.SupplementalGroupsPolicy_value[string(*sc.SupplementalGroupsPolicy)]
			if !ok {
				return nil, fmt.Errorf("unsupported supplementalGroupsPolicy: %s", *sc.SupplementalGroupsPolicy)
			}
			lc.SecurityContext.SupplementalGroupsPolicy = runtimeapi.SupplementalGroupsPolicy(v)
		}
		if o := sc.SELinuxOptions; o != nil {
			lc.SecurityContext.SelinuxOptions = &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
		}
	}
	lc.Resources = sandboxResources(pod)
	lc.Overhead = &runtimeapi.LinuxContainerResources{}
	if pod.Spec.Overhead != nil {
		cpu, mem := pod.Spec.Overhead.Cpu(), pod.Spec.Overhead.Memory()
		lc.Overhead = linuxResources(cpu, cpu, mem)
	}
	cfg.Linux = lc
	return cfg, nil
}

// NamespaceOptions is runtimeutil.NamespacesForPod. bootlet does not support
// hostUsers=false (validation rejects it), so the user namespace is the
// node's, stated explicitly when UserNamespacesSupport is on, exactly as the
// kubelet's UsernsManager.GetOrCreateUserNamespaceMappings
// (pkg/kubelet/userns/userns_manager.go) does for hostUsers unset or true.
func NamespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	opts := &runtimeapi.NamespaceOption{
		Ipc:     runtimeutil.IpcNamespaceForPod(pod),
		Network: runtimeutil.NetworkNamespaceForPod(pod),
		Pid:     runtimeutil.PidNamespaceForPod(pod),
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.UserNamespacesSupport) {
		opts.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}
	}
	return opts
}

// PodLabels is the kubelet's newPodLabels.
func PodLabels(pod *v1.Pod) map[string]string {
	labels := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		labels[k] = v
	}
	labels[LabelPodName] = pod.Name
	labels[LabelPodNamespace] = pod.Namespace
	labels[LabelPodUID] = string(pod.UID)
	return labels
}

// PodHostname is the kubelet's GeneratePodHostNameAndDomain followed by
// GetNodenameForKernel, for a node without a cluster domain.
func PodHostname(pod *v1.Pod) (string, error) {
	hostname := pod.Name
	if len(hostname) > 63 {
		// truncatePodHostnameIfNeeded: cut to 63 and drop a trailing - or .
		hostname = strings.TrimRight(hostname[:63], "-.")
	}
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	return kubeletutil.GetNodenameForKernel(hostname, "", pod.Spec.SetHostnameAsFQDN)
}

func runtimeProtocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

func sandboxResources(pod *v1.Pod) *runtimeapi.LinuxContainerResources {
	opts := resourcehelper.PodResourcesOptions{
		ExcludeOverhead:       true,
		SkipPodLevelResources: !utilfeature.DefaultFeatureGate.Enabled(features.PodLevelResources),
	}
	req := resourcehelper.PodRequests(pod, opts)
	lim := resourcehelper.PodLimits(pod, opts)
	var cpuRequest *resource.Quantity
	if _, ok := req[v1.ResourceCPU]; ok {
		cpuRequest = req.Cpu()
	}
	return linuxResources(cpuRequest, lim.Cpu(), lim.Memory())
}
