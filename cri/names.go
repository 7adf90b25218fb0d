package cri

import (
	"fmt"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
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
func ContainerLogPath(containerName string, restartCount int) string {
	return filepath.Join(containerName, fmt.Sprintf("%d.log", restartCount))
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
func PodCgroupParent(pod *v1.Pod, driver string) string {
	parent := newCgroupName(nil, "kubepods")
	switch v1qos.GetPodQOS(pod) {
	case v1.PodQOSBurstable:
		parent = newCgroupName(parent, strings.ToLower(string(v1.PodQOSBurstable)))
	case v1.PodQOSBestEffort:
		parent = newCgroupName(parent, strings.ToLower(string(v1.PodQOSBestEffort)))
	}
	name := newCgroupName(parent, podCgroupNameSuffix(pod.UID))
	if driver == CgroupDriverSystemd {
		return name.toSystemd()
	}
	return name.toCgroupfs()
}
