package cri

// Small helpers copied from kubelet packages that are too heavy to link
// into the daemon: pkg/kubelet/cm and pkg/kubelet/kuberuntime each pull in
// the scheduler, client-go's fake clientset and (kuberuntime) the etcd
// client and apiserver options, about 500 packages and 40 MB of binary
// that an idle daemon pages in just by starting
// (docs/design/architecture.md, "Footprint"). Each copy names the file of k8s.io/kubernetes v1.36.3 it
// mirrors; kubelet_parity_test.go calls the kubelet's own function over a
// table of inputs and asserts identical output, so a version bump that
// changes one of them fails there (tests do not link into the binary).

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	libcontainercgroups "github.com/opencontainers/cgroups"
	cgroupsystemd "github.com/opencontainers/cgroups/systemd"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/features"
)

// PodLogsDirectory is kuberuntime.BuildPodLogsDirectory
// (pkg/kubelet/kuberuntime/helpers.go): PODLOGSDIR/NS_NAME_UID. Unlike the
// kubelet's, it refuses parts that are not one clean path element: the
// directory is created and removed as root.
func PodLogsDirectory(podLogsDir, podNamespace, podName string, podUID types.UID) (string, error) {
	if err := PathElements("namespace", podNamespace, "name", podName, "uid", string(podUID)); err != nil {
		return "", err
	}
	return filepath.Join(podLogsDir, strings.Join([]string{podNamespace, podName, string(podUID)}, "_")), nil
}

// ContainerLogsDirectory is kuberuntime.BuildContainerLogsDirectory
// (pkg/kubelet/kuberuntime/helpers.go): the pod's log directory / NAME,
// with PodLogsDirectory's checks and the container name's.
func ContainerLogsDirectory(podLogsDir, podNamespace, podName string, podUID types.UID, containerName string) (string, error) {
	dir, err := PodLogsDirectory(podLogsDir, podNamespace, podName, podUID)
	if err != nil {
		return "", err
	}
	if err := PathElement("container name", containerName); err != nil {
		return "", err
	}
	return filepath.Join(dir, containerName), nil
}

// cgroupName is cm.CgroupName (pkg/kubelet/cm/types.go): the components of
// a cgroup path, rendered per driver by toCgroupfs and toSystemd.
type cgroupName []string

// newCgroupName is cm.NewCgroupName (pkg/kubelet/cm/cgroup_manager_linux.go),
// except that it returns the kubelet's panic as an error: a component is a
// pod UID, and a UID that reaches here from an older checkpoint or a
// future code path must fail that one pod, not kill the daemon.
func newCgroupName(base cgroupName, components ...string) (cgroupName, error) {
	for _, component := range components {
		if strings.Contains(component, "/") || strings.Contains(component, "_") {
			return nil, fmt.Errorf("invalid character in component [%q] of CgroupName", component)
		}
	}
	return cgroupName(append(append([]string{}, base...), components...)), nil
}

// toSystemd is cm.CgroupName.ToSystemd (cgroup_manager_linux.go), with its
// panic returned as an error.
func (n cgroupName) toSystemd() (string, error) {
	if len(n) == 0 || (len(n) == 1 && n[0] == "") {
		return "/", nil
	}
	parts := make([]string, 0, len(n))
	for _, part := range n {
		parts = append(parts, strings.ReplaceAll(part, "-", "_"))
	}
	result, err := cgroupsystemd.ExpandSlice(strings.Join(parts, "-") + ".slice")
	if err != nil {
		return "", fmt.Errorf("error converting cgroup name [%v] to systemd format: %v", n, err)
	}
	return result, nil
}

// toCgroupfs is cm.CgroupName.ToCgroupfs (cgroup_manager_linux.go).
func (n cgroupName) toCgroupfs() string {
	return "/" + path.Join(n...)
}

// podCgroupNameSuffix is cm.GetPodCgroupNameSuffix (pkg/kubelet/cm/helpers_linux.go).
func podCgroupNameSuffix(podUID types.UID) string {
	return "pod" + string(podUID)
}

// CFS constants of pkg/kubelet/cm/helpers_linux.go.
const (
	minShares      = 2
	maxShares      = 262144
	sharesPerCPU   = 1024
	milliCPUToCPU  = 1000
	quotaPeriod    = 100000
	minQuotaPeriod = 1000

	// cgroup2MaxSwapFilename is cm.Cgroup2MaxSwapFilename.
	cgroup2MaxSwapFilename = "memory.swap.max"
)

// milliCPUToQuota is cm.MilliCPUToQuota (pkg/kubelet/cm/helpers_linux.go).
func milliCPUToQuota(milliCPU int64, period int64) (quota int64) {
	if milliCPU == 0 {
		return
	}
	if !utilfeature.DefaultFeatureGate.Enabled(features.CPUCFSQuotaPeriod) {
		period = quotaPeriod
	}
	quota = (milliCPU * period) / milliCPUToCPU
	if quota < minQuotaPeriod {
		quota = minQuotaPeriod
	}
	return
}

// milliCPUToShares is cm.MilliCPUToShares (pkg/kubelet/cm/helpers_linux.go).
func milliCPUToShares(milliCPU int64) uint64 {
	if milliCPU == 0 {
		return minShares
	}
	shares := (milliCPU * sharesPerCPU) / milliCPUToCPU
	if shares < minShares {
		return minShares
	}
	if shares > maxShares {
		return maxShares
	}
	return uint64(shares)
}

// hugepageLimits is kuberuntime.GetHugepageLimitsFromResources
// (pkg/kubelet/kuberuntime/kuberuntime_container_linux.go): every page size
// the host has, limited to 0 unless the container (or, with
// PodLevelResources, the pod) sets a hugepages-SIZE limit.
func hugepageLimits(ctx context.Context, pod *v1.Pod, containerResources v1.ResourceRequirements) []*runtimeapi.HugepageLimit {
	var limits []*runtimeapi.HugepageLimit
	for _, pageSize := range libcontainercgroups.HugePageSizes() {
		limits = append(limits, &runtimeapi.HugepageLimit{PageSize: pageSize, Limit: uint64(0)})
	}
	required := map[string]uint64{}
	if utilfeature.DefaultFeatureGate.Enabled(features.PodLevelResources) && resourcehelper.IsPodLevelResourcesSet(pod) {
		for name, amount := range pod.Spec.Resources.Limits {
			requiredHugepageLimit(ctx, required, name, amount)
		}
	}
	for name, amount := range containerResources.Limits {
		requiredHugepageLimit(ctx, required, name, amount)
	}
	for _, l := range limits {
		if limit, ok := required[l.PageSize]; ok {
			l.Limit = limit
		}
	}
	return limits
}

// requiredHugepageLimit is kuberuntime's readAndDefineRequiredHugepageLimit.
func requiredHugepageLimit(ctx context.Context, required map[string]uint64, name v1.ResourceName, amount resource.Quantity) {
	logger := klog.FromContext(ctx)
	if !v1helper.IsHugePageResourceName(name) {
		return
	}
	pageSize, err := v1helper.HugePageSizeFromResourceName(name)
	if err != nil {
		logger.Info("Failed to get hugepage size from resource", "object", name, "err", err)
		return
	}
	sizeString, err := v1helper.HugePageUnitSizeFromByteSize(pageSize.Value())
	if err != nil {
		logger.Info("Size is invalid", "object", name, "err", err)
		return
	}
	required[sizeString] = uint64(amount.Value())
}
