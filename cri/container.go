package cri

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	libcontainercgroups "github.com/opencontainers/cgroups"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/kubernetes/pkg/features"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/qos"
	"k8s.io/kubernetes/pkg/securitycontext"
)

// ContainerOptions are the per-start facts a container config depends on:
// resolved environment, materialised mounts and the image's identity.
type ContainerOptions struct {
	PodLogsDir string
	// Envs is the output of MakeEnvironment.
	Envs []kubecontainer.EnvVar
	// Mounts are the volume mounts, /etc/hosts and the termination-log
	// file, already materialised on the host (see package runner's volume code).
	Mounts []*runtimeapi.Mount
	// ImageRef is the image ID the runtime reported for container.Image.
	ImageRef string
	// ImageUID and ImageUser come from the image's config (ImageStatus),
	// used when the security context sets no runAsUser.
	ImageUID  *int64
	ImageUser string
	// MachineMemory is the node's memory capacity in bytes, used for the
	// burstable OOM score.
	MachineMemory int64
	// SeccompDefault is the kubelet's seccompDefault (false by default).
	SeccompDefault bool
}

// ContainerConfig is the kubelet's generateContainerConfig
// (kuberuntime_container.go and kuberuntime_container_linux.go).
func ContainerConfig(pod *v1.Pod, c *v1.Container, restartCount int, o ContainerOptions) (*runtimeapi.ContainerConfig, error) {
	logPath, err := ContainerLogPath(c.Name, restartCount)
	if err != nil {
		return nil, err
	}
	command, args := kubecontainer.ExpandContainerCommandAndArgs(c, o.Envs)
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(restartCount)},
		Image:       &runtimeapi.ImageSpec{Image: o.ImageRef, UserSpecifiedImage: c.Image},
		Command:     command,
		Args:        args,
		WorkingDir:  c.WorkingDir,
		Labels:      ContainerLabels(pod, c),
		Annotations: ContainerAnnotations(pod, c, restartCount),
		Mounts:      o.Mounts,
		LogPath:     logPath,
		Stdin:       c.Stdin,
		StdinOnce:   c.StdinOnce,
		Tty:         c.TTY,
	}
	if c.Lifecycle != nil && c.Lifecycle.StopSignal != nil && utilfeature.DefaultFeatureGate.Enabled(features.ContainerStopSignals) {
		if v, ok := runtimeapi.Signal_value[string(*c.Lifecycle.StopSignal)]; ok {
			cfg.StopSignal = runtimeapi.Signal(v)
		}
	}
	sc, err := containerSecurityContext(pod, c, o)
	if err != nil {
		return nil, err
	}
	cfg.Linux = &runtimeapi.LinuxContainerConfig{
		Resources:       containerResources(pod, c, o.MachineMemory),
		SecurityContext: sc,
	}
	cfg.Envs = make([]*runtimeapi.KeyValue, len(o.Envs))
	for i, e := range o.Envs {
		cfg.Envs[i] = &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)}
	}
	return cfg, nil
}

// ContainerLabels is the kubelet's newContainerLabels: only identity, never
// the pod's own labels.
func ContainerLabels(pod *v1.Pod, c *v1.Container) map[string]string {
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: c.Name,
	}
}

// ContainerHash is the kubelet's HashContainer in the hex form it stores.
func ContainerHash(c *v1.Container) string {
	return strconv.FormatUint(kubecontainer.HashContainer(c), 16)
}

// ContainerAnnotations is the kubelet's newContainerAnnotations.
func ContainerAnnotations(pod *v1.Pod, c *v1.Container, restartCount int) map[string]string {
	a := map[string]string{
		AnnotationContainerHash:            ContainerHash(c),
		AnnotationRestartCount:             strconv.Itoa(restartCount),
		AnnotationTerminationMessagePath:   c.TerminationMessagePath,
		AnnotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
	}
	if pod.DeletionGracePeriodSeconds != nil {
		a[AnnotationDeletionGracePeriod] = strconv.FormatInt(*pod.DeletionGracePeriodSeconds, 10)
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[AnnotationTerminationGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if raw, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[AnnotationPreStopHandler] = string(raw)
		}
	}
	if len(c.Ports) > 0 {
		if raw, err := json.Marshal(c.Ports); err == nil {
			a[AnnotationContainerPorts] = string(raw)
		}
	}
	return a
}

func containerResources(pod *v1.Pod, c *v1.Container, machineMemory int64) *runtimeapi.LinuxContainerResources {
	var cpuRequest *resource.Quantity
	if _, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
		cpuRequest = c.Resources.Requests.Cpu()
	}
	cpuLimit, memLimit := c.Resources.Limits.Cpu(), c.Resources.Limits.Memory()
	if utilfeature.DefaultFeatureGate.Enabled(features.PodLevelResources) && resourcehelper.IsPodLevelResourcesSet(pod) {
		if cpuLimit.IsZero() {
			cpuLimit = pod.Spec.Resources.Limits.Cpu()
		}
		if memLimit.IsZero() {
			memLimit = pod.Spec.Resources.Limits.Memory()
		}
	}
	r := linuxResources(cpuRequest, cpuLimit, memLimit)
	r.OomScoreAdj = int64(qos.GetContainerOOMScoreAdjust(pod, c, machineMemory))
	r.HugepageLimits = hugepageLimits(context.Background(), pod, c.Resources)
	configureNoSwap(r)
	return r
}

// configureNoSwap is the kubelet's configureContainerSwapResources with its
// default memorySwap.swapBehavior, NoSwap (swapConfigurationHelper.ConfigureNoSwap
// in pkg/kubelet/kuberuntime/kuberuntime_container_linux.go): when the swap
// controller exists, cgroup v1 gets memory+swap = the memory limit and
// cgroup v2 gets memory.swap.max = 0.
func configureNoSwap(r *runtimeapi.LinuxContainerResources) {
	if !swapControllerAvailable() {
		return
	}
	if !libcontainercgroups.IsCgroup2UnifiedMode() {
		r.MemorySwapLimitInBytes = r.MemoryLimitInBytes
		return
	}
	if r.Unified == nil {
		r.Unified = map[string]string{}
	}
	r.Unified[cgroup2MaxSwapFilename] = "0"
}

// swapControllerAvailable is the kubelet's checkSwapControllerAvailability
// (kuberuntime_container_linux.go), evaluated once like its
// initSwapControllerAvailabilityCheck.
var swapControllerAvailable = sync.OnceValue(func() bool {
	p := "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes"
	if libcontainercgroups.IsCgroup2UnifiedMode() {
		groups, err := libcontainercgroups.ParseCgroupFile("/proc/self/cgroup")
		if err != nil {
			return false
		}
		p = filepath.Join("/sys/fs/cgroup", groups[""], "memory.swap.max")
	}
	_, err := os.Stat(p)
	return err == nil
})

// linuxResources is the kubelet's calculateLinuxResources with cpuCFSQuota
// on and the default 100ms period.
func linuxResources(cpuRequest, cpuLimit, memoryLimit *resource.Quantity) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	if cpuRequest == nil && cpuLimit != nil {
		r.CpuShares = int64(milliCPUToShares(cpuLimit.MilliValue()))
	} else {
		r.CpuShares = int64(milliCPUToShares(cpuRequest.MilliValue()))
	}
	if m := memoryLimit.Value(); m != 0 {
		r.MemoryLimitInBytes = m
	}
	r.CpuPeriod = int64(quotaPeriod)
	r.CpuQuota = milliCPUToQuota(cpuLimit.MilliValue(), r.CpuPeriod)
	return r
}

// containerSecurityContext is the kubelet's determineEffectiveSecurityContext.
func containerSecurityContext(pod *v1.Pod, c *v1.Container, o ContainerOptions) (*runtimeapi.LinuxContainerSecurityContext, error) {
	eff := securitycontext.DetermineEffectiveSecurityContext(pod, c)
	sc := &runtimeapi.LinuxContainerSecurityContext{}
	if eff != nil {
		if caps := eff.Capabilities; caps != nil {
			sc.Capabilities = &runtimeapi.Capability{
				AddCapabilities:  make([]string, len(caps.Add)),
				DropCapabilities: make([]string, len(caps.Drop)),
			}
			for i, v := range caps.Add {
				sc.Capabilities.AddCapabilities[i] = string(v)
			}
			for i, v := range caps.Drop {
				sc.Capabilities.DropCapabilities[i] = string(v)
			}
		}
		if s := eff.SELinuxOptions; s != nil {
			sc.SelinuxOptions = &runtimeapi.SELinuxOption{User: s.User, Role: s.Role, Type: s.Type, Level: s.Level}
		}
		if eff.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *eff.RunAsUser}
		}
		if eff.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *eff.RunAsGroup}
		}
		if eff.Privileged != nil {
			sc.Privileged = *eff.Privileged
		}
		if eff.ReadOnlyRootFilesystem != nil {
			sc.ReadonlyRootfs = *eff.ReadOnlyRootFilesystem
		}
	}
	seccomp, err := seccompProfile(pod, c, o.SeccompDefault)
	if err != nil {
		return nil, err
	}
	sc.Seccomp = seccomp
	//lint:ignore SA1019 the kubelet still sets the deprecated field for runtimes that read only it (security_context.go)
	sc.Apparmor, sc.ApparmorProfile, err = appArmorProfile(pod, c)
	if err != nil {
		return nil, err
	}
	if sc.RunAsUser == nil {
		if o.ImageUID != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *o.ImageUID}
		}
		sc.RunAsUsername = o.ImageUser
	}
	sc.NamespaceOptions = NamespaceOptions(pod)
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
		if psc.SupplementalGroupsPolicy != nil {
			if v, ok := runtimeapi.SupplementalGroupsPolicy_value[string(*psc.SupplementalGroupsPolicy)]; ok {
				sc.SupplementalGroupsPolicy = runtimeapi.SupplementalGroupsPolicy(v)
			}
		}
	}
	sc.NoNewPrivs = securitycontext.AddNoNewPrivileges(eff)
	var procMount *v1.ProcMountType
	if eff != nil {
		procMount = eff.ProcMount
	}
	sc.MaskedPaths = securitycontext.ConvertToRuntimeMaskedPaths(procMount)
	sc.ReadonlyPaths = securitycontext.ConvertToRuntimeReadonlyPaths(procMount)
	return sc, nil
}
