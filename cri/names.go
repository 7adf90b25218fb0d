package cri

import (
	"fmt"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kubetypes "k8s.io/kubelet/pkg/types"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
)

// Label and annotation keys the kubelet puts on CRI objects
// (pkg/kubelet/kuberuntime/labels.go). The kubelet matches containers to its
// pods by these, so they are part of the adoption contract.
const (
	LabelPodName       = kubetypes.KubernetesPodNameLabel
	LabelPodNamespace  = kubetypes.KubernetesPodNamespaceLabel
	LabelPodUID        = kubetypes.KubernetesPodUIDLabel
	LabelContainerName = kubetypes.KubernetesContainerNameLabel

	AnnotationContainerHash            = "io.kubernetes.container.hash"
	AnnotationRestartCount             = "io.kubernetes.container.restartCount"
	AnnotationTerminationMessagePath   = "io.kubernetes.container.terminationMessagePath"
	AnnotationTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	AnnotationDeletionGracePeriod      = "io.kubernetes.pod.deletionGracePeriod"
	AnnotationTerminationGracePeriod   = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationPreStopHandler           = "io.kubernetes.container.preStopHandler"
	AnnotationContainerPorts           = "io.kubernetes.container.ports"
)

// ContainerLogPath is the kubelet's buildContainerLogsPath, relative to the
// sandbox log directory: NAME/ATTEMPT.log.
func ContainerLogPath(containerName string, restartCount int) (string, error) {
	if err := PathElement("container name", containerName); err != nil {
		return "", err
	}
	return filepath.Join(containerName, fmt.Sprintf("%d.log", restartCount)), nil
}

// PathElement refuses anything but one clean path element: not empty, not
// "." or "..", no '/', no NUL. Every path bootlet builds from a pod's
// namespace, name, UID, container or volume name goes through it: such a
// path is created, written and removed (RemoveAll) as root, and one
// element that climbs or splits would reach other pods' directories or
// bootlet's root. The API validates all of these already; this is the
// second line, for records from older versions and for code paths that
// skip the API.
func PathElement(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s must not be empty", what)
	case s == "." || s == "..":
		return fmt.Errorf("%s %q is not a file name", what, s)
	case strings.ContainsAny(s, "/\x00"):
		return fmt.Errorf("%s %q must not contain '/' or NUL", what, s)
	}
	return nil
}

// ValidPodUID refuses a UID that is not one clean path element, or that the
// kubelet's cgroup naming refuses (it panics on '_' and '/').
func ValidPodUID(uid types.UID) error {
	if err := PathElement("pod uid", string(uid)); err != nil {
		return err
	}
	_, err := newCgroupName(nil, podCgroupNameSuffix(uid))
	return err
}

// PathElements runs PathElement on (what, value) pairs.
func PathElements(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := PathElement(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// Cgroup drivers accepted by --cgroup-driver.
const (
	CgroupDriverCgroupfs = "cgroupfs"
	CgroupDriverSystemd  = "systemd"
)

// PodCgroupParent returns the cgroup the kubelet (cgroupsPerQOS=true, default
// cgroupRoot) puts a pod in, named as the kubelet's CgroupName does (cgroupName, kubelet.go).
// Anything else would make the kubelet's orphan-cgroup cleanup SIGKILL
// bootlet's pods once it starts.
func PodCgroupParent(pod *v1.Pod, driver string) (string, error) {
	if err := PathElement("pod uid", string(pod.UID)); err != nil {
		return "", err
	}
	parent := cgroupName{"kubepods"}
	switch v1qos.GetPodQOS(pod) {
	case v1.PodQOSBurstable:
		parent = append(parent, strings.ToLower(string(v1.PodQOSBurstable)))
	case v1.PodQOSBestEffort:
		parent = append(parent, strings.ToLower(string(v1.PodQOSBestEffort)))
	}
	name, err := newCgroupName(parent, podCgroupNameSuffix(pod.UID))
	if err != nil {
		return "", err
	}
	if driver == CgroupDriverSystemd {
		return name.toSystemd()
	}
	return name.toCgroupfs(), nil
}
