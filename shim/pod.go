package shim

import (
	btypes "github.com/bootlet/bootlet/types"
	v1 "k8s.io/api/core/v1"

	// Register the core group into legacyscheme with its defaulters, as the
	// kubelet's config sources do.
	_ "k8s.io/kubernetes/pkg/apis/core/install"
)

// RuntimePod returns the pod as the runtime (and a kubelet adopting it) sees
// it: the static-pod name NAME-NODENAME.
func RuntimePod(pod *v1.Pod, nodeName string) *v1.Pod {
	rp := pod.DeepCopy()
	rp.Name = btypes.StaticPodName(pod.Name, nodeName)
	return rp
}
