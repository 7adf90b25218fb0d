package runner

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/util/swap"
	"k8s.io/kubernetes/pkg/volume"
	"k8s.io/mount-utils"
)

// Memory-backed volumes and fsGroup ownership, as the kubelet's volume
// plugins do them (pkg/volume/emptydir setupTmpfs, pkg/volume/secret,
// pkg/volume/volume_linux.go SetVolumeOwnership).

var hostMounter = mount.New("")

// mountTmpfs mounts a tmpfs on dir unless one is there already: a restarted
// daemon adopts the mounts its previous run made (and the running
// containers bind-mount), it never stacks a second one.
func mountTmpfs(dir string, options ...string) error {
	notMnt, err := hostMounter.IsLikelyNotMountPoint(dir)
	if err != nil {
		return err
	}
	if !notMnt {
		return nil
	}
	// A non-empty directory that is no mount is a volume an older bootlet
	// wrote to disk, and running containers bind-mount it: a tmpfs on top
	// would hide every later update from them. Keep writing there until the
	// pod is recreated.
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil
	}
	return hostMounter.MountSensitiveWithoutSystemd("tmpfs", dir, "tmpfs", options, nil)
}

// setupEmptyDir is the kubelet's emptyDir SetUpAt (pkg/volume/emptydir):
// a 0777 directory, with a tmpfs mounted on it for medium Memory (sized
// as calculateEmptyDirMemorySize, noswap where the kernel has it), then
// the fsGroup. The kubelet's own SetUpAt of an adopted pod takes either as
// it is: setupDir leaves a 0777 directory and its content alone, and
// setupTmpfs returns at once when a tmpfs is mounted there already.
func setupEmptyDir(pod *v1.Pod, src *v1.EmptyDirVolumeSource, dir string, allocatable v1.ResourceList) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return err
	}
	switch src.Medium {
	case v1.StorageMediumDefault:
	case v1.StorageMediumMemory:
		var opts []string
		if size := emptyDirMemorySize(pod, src, allocatable); size > 0 {
			opts = append(opts, fmt.Sprintf("size=%d", size))
		}
		if swap.IsTmpfsNoswapOptionSupported(hostMounter, filepath.Dir(dir)) {
			opts = append(opts, swap.TmpfsNoswapOption)
		}
		if err := mountTmpfs(dir, opts...); err != nil {
			return err
		}
	default:
		return fmt.Errorf("emptyDir medium %q is not supported by bootlet", src.Medium)
	}
	return setOwnership(pod, dir, fsGroupPolicy(pod))
}

// emptyDirMemorySize is the kubelet's calculateEmptyDirMemorySize: the
// node's allocatable memory, lowered to the pod's memory limit (as its pod
// cgroup has it: cm.ResourceConfigForPod) and to the volume's sizeLimit.
// 0: no size option (the kernel's default, half the RAM).
func emptyDirMemorySize(pod *v1.Pod, src *v1.EmptyDirVolumeSource, allocatable v1.ResourceList) int64 {
	size := allocatable.Memory().Value()
	if limit, ok := podMemoryLimit(pod); ok && limit > 0 && (size == 0 || limit <= size) {
		size = limit
	}
	if src.SizeLimit != nil {
		if v := src.SizeLimit.Value(); v > 0 && (size == 0 || v <= size) {
			size = v
		}
	}
	return size
}

// podMemoryLimit is the memory limit cm.ResourceConfigForPod gives the
// pod's cgroup: the summed limits when the pod is Guaranteed, or Burstable
// with a memory limit on every container (or at pod level).
func podMemoryLimit(pod *v1.Pod) (int64, bool) {
	podLevel := utilfeature.DefaultFeatureGate.Enabled(features.PodLevelResources)
	declared := true
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{
		SkipPodLevelResources: !podLevel,
		ContainerFn: func(res v1.ResourceList, _ resourcehelper.ContainerType) {
			if res.Memory().IsZero() {
				declared = false
			}
		},
	})
	if podLevel && resourcehelper.IsPodLevelResourcesSet(pod) && !pod.Spec.Resources.Limits.Memory().IsZero() {
		declared = true
	}
	switch qos.GetPodQOS(pod) {
	case v1.PodQOSGuaranteed:
	case v1.PodQOSBurstable:
		if !declared {
			return 0, false
		}
	default:
		return 0, false
	}
	return limits.Memory().Value(), true
}

// unmountVolumes unmounts every volume directory of a pod directory that is
// a mount point (the tmpfs of secret, projected, downwardAPI and memory
// emptyDir volumes) before the directory is removed; an error leaves the
// directory alone. A volume directory that is no mount point is left to the
// removal: content an older bootlet wrote to disk, or a disk emptyDir.
func unmountVolumes(podDir string) error {
	plugins, err := os.ReadDir(filepath.Join(podDir, "volumes"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, p := range plugins {
		entries, err := os.ReadDir(filepath.Join(podDir, "volumes", p.Name()))
		if err != nil {
			return err
		}
		for _, e := range entries {
			dir := filepath.Join(podDir, "volumes", p.Name(), e.Name())
			notMnt, err := hostMounter.IsLikelyNotMountPoint(dir)
			if err != nil {
				return err
			}
			if notMnt {
				continue
			}
			if err := hostMounter.Unmount(dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// fsGroupPolicy is the pod's fsGroupChangePolicy (emptyDir honours it; the
// AtomicWriter plugins pass none, as the kubelet's).
func fsGroupPolicy(pod *v1.Pod) *v1.PodFSGroupChangePolicy {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroupChangePolicy
	}
	return nil
}

// setOwnership applies the pod's fsGroup to a volume directory with the
// kubelet's own VolumeOwnership (group, setgid directories, group rw).
func setOwnership(pod *v1.Pod, dir string, policy *v1.PodFSGroupChangePolicy) error {
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.FSGroup == nil {
		return nil
	}
	return volume.NewVolumeOwnership(&ownershipMounter{dir: dir}, dir, sc.FSGroup, policy, nil).ChangePermissions()
}

// ownershipMounter is the little of a volume.Mounter VolumeOwnership reads:
// the volume's attributes (bootlet's volumes are writable).
type ownershipMounter struct {
	volume.MetricsNil
	dir string
}

func (m ownershipMounter) GetPath() string                          { return m.dir }
func (m ownershipMounter) SetUp(volume.MounterArgs) error           { return nil }
func (m ownershipMounter) SetUpAt(string, volume.MounterArgs) error { return nil }
func (m ownershipMounter) GetAttributes() volume.Attributes {
	return volume.Attributes{Managed: true, SELinuxRelabel: false}
}
