package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/volume/util/subpath"
	volumevalidation "k8s.io/kubernetes/pkg/volume/validation"
	"k8s.io/mount-utils"

	"github.com/bootlet/bootlet/cri"
)

// A container's mounts: its volumes, subPaths, /etc/hosts and the
// termination-log file, as the kubelet's makeMounts builds them.

// ContainerMounts is the kubelet's makeMounts plus the termination-log mount
// of kuberuntime's makeMounts, with /etc/hosts when the kubelet would.
func ContainerMounts(dirs PodDirs, pod *v1.Pod, c *v1.Container, volumes map[string]string, envs []kubecontainer.EnvVar, podIPs []string, hostname string) ([]*runtimeapi.Mount, error) {
	var mounts []*runtimeapi.Mount
	mountHosts := len(podIPs) > 0 || pod.Spec.HostNetwork
	for i, m := range c.VolumeMounts {
		if m.MountPath == "/etc/hosts" {
			mountHosts = false
		}
		hostPath, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("cannot find volume %q to mount into container %q", m.Name, c.Name)
		}
		subPath := m.SubPath
		if m.SubPathExpr != "" {
			var err error
			subPath, err = kubecontainer.ExpandContainerVolumeMounts(m, envs)
			if err != nil {
				return nil, err
			}
		}
		if subPath != "" {
			p, err := prepareSubPath(dirs, pod, c, i, m.Name, hostPath, subPath)
			if err != nil {
				return nil, err
			}
			hostPath = p
		}
		mount := &runtimeapi.Mount{
			HostPath:      hostPath,
			ContainerPath: m.MountPath,
			Readonly:      m.ReadOnly,
			Propagation:   propagation(m.MountPropagation),
		}
		if m.RecursiveReadOnly != nil && *m.RecursiveReadOnly == v1.RecursiveReadOnlyEnabled {
			mount.RecursiveReadOnly = true
		}
		mounts = append(mounts, mount)
	}
	if mountHosts {
		hosts, err := dirs.EtcHosts(string(pod.UID))
		if err != nil {
			return nil, err
		}
		if err := writeHostsFile(hosts, pod, podIPs, hostname); err != nil {
			return nil, err
		}
		mounts = append(mounts, &runtimeapi.Mount{HostPath: hosts, ContainerPath: "/etc/hosts"})
	}
	if c.TerminationMessagePath != "" {
		dir, err := dirs.Container(string(pod.UID), c.Name)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, err
		}
		p := filepath.Join(dir, randomID())
		f, err := os.Create(p)
		if err != nil {
			return nil, fmt.Errorf("create termination-log file: %w", err)
		}
		f.Close()
		if err := os.Chmod(p, 0o666); err != nil {
			return nil, err
		}
		mounts = append(mounts, &runtimeapi.Mount{HostPath: p, ContainerPath: c.TerminationMessagePath})
	}
	return mounts, nil
}

// subpather is the kubelet's subpath implementation, on the host's mounts.
var subpather = subpath.New(mount.New(""))

// prepareSubPath is the subPath branch of the kubelet's makeMounts
// (pkg/kubelet/kubelet_pods.go): validate, create the directory inside the
// volume without following symlinks out of it (SafeMakeDir, with the
// volume's mode), then bind-mount it, opened safely, to
// POD/volume-subpaths/VOLUME/CONTAINER/INDEX (PrepareSafeSubpath), which is
// what the container gets. RemovePodDir unmounts these.
func prepareSubPath(dirs PodDirs, pod *v1.Pod, c *v1.Container, index int, volumeName, volumePath, subPath string) (string, error) {
	if filepath.IsAbs(subPath) {
		return "", fmt.Errorf("error SubPath `%s` must not be an absolute path", subPath)
	}
	if err := volumevalidation.ValidatePathNoBacksteps(subPath); err != nil {
		return "", fmt.Errorf("unable to provision SubPath `%s`: %w", subPath, err)
	}
	hostPath := filepath.Join(volumePath, subPath)
	if _, err := os.Stat(hostPath); os.IsNotExist(err) {
		fi, err := os.Stat(volumePath)
		if err != nil {
			return "", err
		}
		if err := subpather.SafeMakeDir(subPath, volumePath, fi.Mode()); err != nil {
			return "", fmt.Errorf("failed to create subPath directory for volumeMount %q of container %q", volumeName, c.Name)
		}
	}
	podDir, err := dirs.Pod(string(pod.UID))
	if err != nil {
		return "", err
	}
	if err := cri.PathElements("volume name", volumeName, "container name", c.Name); err != nil {
		return "", err
	}
	p, _, err := subpather.PrepareSafeSubpath(subpath.Subpath{
		VolumeMountIndex: index,
		Path:             hostPath,
		VolumeName:       volumeName,
		VolumePath:       volumePath,
		PodDir:           podDir,
		ContainerName:    c.Name,
	})
	if err != nil {
		return "", fmt.Errorf("failed to prepare subPath for volumeMount %q of container %q: %w", volumeName, c.Name, err)
	}
	return p, nil
}

func propagation(p *v1.MountPropagationMode) runtimeapi.MountPropagation {
	if p == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	}
	switch *p {
	case v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
	case v1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
	}
	return runtimeapi.MountPropagation_PROPAGATION_PRIVATE
}

// writeHostsFile is the kubelet's ensureHostsFile.
func writeHostsFile(path string, pod *v1.Pod, podIPs []string, hostname string) error {
	var b strings.Builder
	if pod.Spec.HostNetwork {
		content, err := os.ReadFile("/etc/hosts")
		if err != nil {
			return err
		}
		b.WriteString("# Kubernetes-managed hosts file (host network).\n")
		b.Write(content)
	} else {
		b.WriteString("# Kubernetes-managed hosts file.\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		for _, ip := range podIPs {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Chmod(path, 0o644)
}
