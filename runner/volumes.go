package runner

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	v1resource "k8s.io/kubernetes/pkg/api/v1/resource"
	"k8s.io/kubernetes/pkg/fieldpath"
	"k8s.io/kubernetes/pkg/volume/configmap"
	"k8s.io/kubernetes/pkg/volume/secret"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"

	"github.com/bootlet/bootlet/cri"
)

// SetupVolumes materialises every volume of the pod and returns volume name →
// host path. Secret, ConfigMap, projected and downwardAPI contents are
// (re)written with the kubelet's AtomicWriter, so calling it again refreshes
// them in place the way the kubelet's volume manager sync does.
func SetupVolumes(dirs PodDirs, pod *v1.Pod, objects cri.ObjectSource, facts cri.EnvFacts) (map[string]string, error) {
	uid := string(pod.UID)
	paths := map[string]string{}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var (
			path string
			err  error
		)
		switch {
		case vol.HostPath != nil:
			path = vol.HostPath.Path
			err = checkHostPath(path, vol.HostPath.Type)
		case vol.EmptyDir != nil:
			path, err = dirs.Volume(uid, pluginEmptyDir, vol.Name)
			if err != nil {
				break
			}
			err = setupEmptyDir(pod, vol.EmptyDir, path, facts.NodeAllocatable)
		case vol.Secret != nil:
			path, err = dirs.Volume(uid, pluginSecret, vol.Name)
			if err != nil {
				break
			}
			err = writeProjection(pod, path, true, func() (map[string]volumeutil.FileProjection, error) {
				s, err := objects.GetSecret(pod.Namespace, vol.Secret.SecretName)
				optional := vol.Secret.Optional != nil && *vol.Secret.Optional
				if err != nil {
					if apierrors.IsNotFound(err) && optional {
						return map[string]volumeutil.FileProjection{}, nil
					}
					return nil, err
				}
				return secret.MakePayload(vol.Secret.Items, s, vol.Secret.DefaultMode, optional)
			})
		case vol.ConfigMap != nil:
			path, err = dirs.Volume(uid, pluginConfigMap, vol.Name)
			if err != nil {
				break
			}
			err = writeProjection(pod, path, false, func() (map[string]volumeutil.FileProjection, error) {
				cm, err := objects.GetConfigMap(pod.Namespace, vol.ConfigMap.Name)
				optional := vol.ConfigMap.Optional != nil && *vol.ConfigMap.Optional
				if err != nil {
					if apierrors.IsNotFound(err) && optional {
						return map[string]volumeutil.FileProjection{}, nil
					}
					return nil, err
				}
				return configmap.MakePayload(vol.ConfigMap.Items, cm, vol.ConfigMap.DefaultMode, optional)
			})
		case vol.DownwardAPI != nil:
			path, err = dirs.Volume(uid, pluginDownwardAPI, vol.Name)
			if err != nil {
				break
			}
			err = writeProjection(pod, path, true, func() (map[string]volumeutil.FileProjection, error) {
				return downwardAPIPayload(vol.DownwardAPI.Items, pod, vol.DownwardAPI.DefaultMode, facts)
			})
		case vol.Projected != nil:
			path, err = dirs.Volume(uid, pluginProjected, vol.Name)
			if err != nil {
				break
			}
			err = writeProjection(pod, path, true, func() (map[string]volumeutil.FileProjection, error) {
				return projectedPayload(vol.Projected, pod, objects, facts)
			})
		default:
			err = fmt.Errorf("volume type is not supported by bootlet")
		}
		if err == nil && vol.HostPath == nil {
			err = privateVolumeParents(path)
		}
		if err != nil {
			return nil, fmt.Errorf("MountVolume.SetUp failed for volume %q: %w", vol.Name, err)
		}
		paths[vol.Name] = path
	}
	return paths, nil
}

// privateVolumeParents makes the directories above a volume (pods/UID,
// volumes, the plugin's directory) 0750, as the kubelet's makePodDataDirs
// makes them, also when an older bootlet made them 0755: a volume itself
// must stay readable for the container's users (an emptyDir is 0777), so
// only these parents keep other host users out of Secret contents and
// emptyDir data. MkdirAll of the volume created them with its own mode.
func privateVolumeParents(volumeDir string) error {
	plugin := filepath.Dir(volumeDir)
	for _, dir := range []string{plugin, filepath.Dir(plugin), filepath.Dir(filepath.Dir(plugin))} {
		if err := os.Chmod(dir, 0o750); err != nil {
			return err
		}
	}
	return nil
}

// writeProjection (re)writes an AtomicWriter volume. memory puts it on a
// tmpfs first, as the kubelet's secret, projected and downwardAPI plugins
// wrap a memory-medium emptyDir: their contents never reach a disk.
// fsGroup ownership is applied to each new payload before it is swapped in,
// as those plugins' setPerms.
func writeProjection(pod *v1.Pod, dir string, memory bool, payload func() (map[string]volumeutil.FileProjection, error)) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if memory {
		if err := mountTmpfs(dir); err != nil {
			return err
		}
	}
	p, err := payload()
	if err != nil {
		return err
	}
	w, err := volumeutil.NewAtomicWriter(dir, "bootlet")
	if err != nil {
		return err
	}
	// As the kubelet's plugins: the whole volume, since a first write also
	// creates files outside the timestamped directory.
	return w.Write(p, func(string) error { return setOwnership(pod, dir, nil) })
}

func projectedPayload(src *v1.ProjectedVolumeSource, pod *v1.Pod, objects cri.ObjectSource, facts cri.EnvFacts) (map[string]volumeutil.FileProjection, error) {
	out := map[string]volumeutil.FileProjection{}
	merge := func(p map[string]volumeutil.FileProjection) {
		for k, v := range p {
			out[k] = v
		}
	}
	for _, s := range src.Sources {
		switch {
		case s.Secret != nil:
			optional := s.Secret.Optional != nil && *s.Secret.Optional
			obj, err := objects.GetSecret(pod.Namespace, s.Secret.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional {
					continue
				}
				return nil, err
			}
			p, err := secret.MakePayload(s.Secret.Items, obj, src.DefaultMode, optional)
			if err != nil {
				return nil, err
			}
			merge(p)
		case s.ConfigMap != nil:
			optional := s.ConfigMap.Optional != nil && *s.ConfigMap.Optional
			obj, err := objects.GetConfigMap(pod.Namespace, s.ConfigMap.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && optional {
					continue
				}
				return nil, err
			}
			p, err := configmap.MakePayload(s.ConfigMap.Items, obj, src.DefaultMode, optional)
			if err != nil {
				return nil, err
			}
			merge(p)
		case s.DownwardAPI != nil:
			p, err := downwardAPIPayload(s.DownwardAPI.Items, pod, src.DefaultMode, facts)
			if err != nil {
				return nil, err
			}
			merge(p)
		default:
			return nil, fmt.Errorf("projected source needs an apiserver")
		}
	}
	return out, nil
}

// downwardAPIPayload is downwardapi.CollectData without a VolumeHost: node
// allocatable comes from facts.
func downwardAPIPayload(items []v1.DownwardAPIVolumeFile, pod *v1.Pod, defaultMode *int32, facts cri.EnvFacts) (map[string]volumeutil.FileProjection, error) {
	out := map[string]volumeutil.FileProjection{}
	for _, item := range items {
		mode := int32(0o644)
		if defaultMode != nil {
			mode = *defaultMode
		}
		if item.Mode != nil {
			mode = *item.Mode
		}
		var val string
		var err error
		switch {
		case item.FieldRef != nil:
			val, err = fieldpath.ExtractFieldPathAsString(pod, item.FieldRef.FieldPath)
		case item.ResourceFieldRef != nil:
			val, err = v1resource.ExtractResourceValueByContainerNameAndNodeAllocatable(item.ResourceFieldRef, pod, item.ResourceFieldRef.ContainerName, facts.NodeAllocatable)
		}
		if err != nil {
			return nil, fmt.Errorf("downward API item %q: %w", item.Path, err)
		}
		out[filepath.Clean(item.Path)] = volumeutil.FileProjection{Data: []byte(val), Mode: mode}
	}
	return out, nil
}

// checkHostPath applies the hostPath `type` checks and creations of the
// kubelet's hostpath plugin.
func checkHostPath(path string, t *v1.HostPathType) error {
	if t == nil || *t == v1.HostPathUnset {
		return nil
	}
	fi, statErr := os.Stat(path)
	switch *t {
	case v1.HostPathDirectoryOrCreate:
		if os.IsNotExist(statErr) {
			return os.MkdirAll(path, 0o755)
		}
		if statErr == nil && !fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", path)
		}
		return statErr
	case v1.HostPathFileOrCreate:
		if os.IsNotExist(statErr) {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		if statErr == nil && fi.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", path)
		}
		return statErr
	}
	if statErr != nil {
		return fmt.Errorf("hostPath type check failed: %s does not exist", path)
	}
	mode := fi.Mode()
	ok := map[v1.HostPathType]bool{
		v1.HostPathDirectory: mode.IsDir(),
		v1.HostPathFile:      mode.IsRegular(),
		v1.HostPathSocket:    mode&os.ModeSocket != 0,
		v1.HostPathCharDev:   mode&os.ModeCharDevice != 0,
		v1.HostPathBlockDev:  mode&os.ModeDevice != 0 && mode&os.ModeCharDevice == 0,
	}[*t]
	if !ok {
		return fmt.Errorf("hostPath type check failed: %s is not a %s", path, *t)
	}
	return nil
}

// RemovePodDir removes the pod's directories once its containers are gone:
// bootlet's own (its materialised volumes, and everything of a pod of the
// layout before the data root), and the data directory unless keepData.
// Each is cleaned as the kubelet's cleanupOrphanedPodDirs/CleanSubPaths
// does: subPath bind mounts and tmpfs volumes are unmounted first, since
// removing through a bind mount would delete the files of the volume behind
// it (a hostPath, even). If that fails the directory is left alone.
func RemovePodDir(dirs PodDirs, pod *v1.Pod, keepData bool) error {
	uid := string(pod.UID)
	data, err := dirs.Pod(uid)
	if err != nil {
		return err
	}
	objects, err := dirs.Objects(uid)
	if err != nil {
		return err
	}
	if data == objects {
		if keepData {
			return nil
		}
		return removeOnePodDir(data)
	}
	var errs []error
	if !keepData {
		errs = append(errs, removeOnePodDir(data))
	}
	errs = append(errs, removeOnePodDir(objects))
	return errors.Join(errs...)
}

func removeOnePodDir(podDir string) error {
	entries, err := os.ReadDir(filepath.Join(podDir, "volume-subpaths"))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, e := range entries {
		if err := subpather.CleanSubPaths(podDir, e.Name()); err != nil {
			return err
		}
	}
	if err := unmountVolumes(podDir); err != nil {
		return err
	}
	return os.RemoveAll(podDir)
}

// randomID is the kubelet's makeUID: 8 hex characters.
func randomID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
