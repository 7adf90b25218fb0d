package shim

import (
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
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
func mountTmpfs(dir string) error {
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
	return hostMounter.MountSensitiveWithoutSystemd("tmpfs", dir, "tmpfs", nil, nil)
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
