package handoff

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	allocationstate "k8s.io/kubernetes/pkg/kubelet/allocation/state"

	btypes "github.com/bootlet/bootlet/types"
)

// The kubelet's actuated-resources checkpoint, kept while no kubelet runs.

// writeActuated records, in the kubelet's actuated_pods_state, the
// resources of every container of every pod bootlet owns, as the kubelet's
// kuberuntime does when it creates a container, with the kubelet's own
// checkpoint package (format and checksum are the kubelet's). Only while no
// kubelet answers: a running kubelet keeps that checkpoint in memory and
// rewrites it whole, and it reads it once, at its start.
func (h *Handoff) writeActuated(pods map[types.UID]*v1.Pod, terminating map[types.UID]bool) {
	want := map[types.UID]string{}
	var changed []types.UID
	h.mu.Lock()
	for uid, pod := range pods {
		if terminating[uid] {
			continue
		}
		if st := h.pods[uid]; st != nil && st.owner != btypes.OwnerBootlet {
			continue
		}
		want[uid] = actuatedKey(pod)
		if h.actuated[uid] != want[uid] {
			changed = append(changed, uid)
		}
	}
	h.mu.Unlock()
	if len(changed) == 0 {
		return
	}
	st, err := allocationstate.NewStateCheckpoint(h.cfg.KubeletRootDir, kubeletActuatedPodsStateFile)
	if err != nil {
		klog.ErrorS(err, "Opening the kubelet's actuated resources checkpoint failed", "dir", h.cfg.KubeletRootDir)
		return
	}
	for _, uid := range changed {
		pod := pods[uid]
		ok := true
		for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range list {
				if err := st.SetContainerResources(uid, list[i].Name, actuatedResources(pod, &list[i])); err != nil {
					klog.ErrorS(err, "Writing the kubelet's actuated resources checkpoint failed", "pod", klog.KObj(pod), "container", list[i].Name)
					ok = false
				}
			}
		}
		if pod.Spec.Resources != nil && (pod.Spec.Resources.Requests != nil || pod.Spec.Resources.Limits != nil) {
			if err := st.SetPodLevelResources(uid, pod.Spec.Resources); err != nil {
				klog.ErrorS(err, "Writing the kubelet's actuated pod resources failed", "pod", klog.KObj(pod))
				ok = false
			}
		}
		if ok {
			klog.V(2).InfoS("Recorded actuated resources for the kubelet", "pod", klog.KObj(pod), "file", filepath.Join(h.cfg.KubeletRootDir, kubeletActuatedPodsStateFile))
			h.mu.Lock()
			h.actuated[uid] = want[uid]
			h.mu.Unlock()
		}
	}
}

// actuatedKey identifies what writeActuated records for a pod.
func actuatedKey(pod *v1.Pod) string {
	var b bytes.Buffer
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			r := actuatedResources(pod, &list[i])
			fmt.Fprintf(&b, "%s=%v/%v;", list[i].Name, sortedList(r.Requests), sortedList(r.Limits))
		}
	}
	if pod.Spec.Resources != nil {
		fmt.Fprintf(&b, "pod=%v/%v", sortedList(pod.Spec.Resources.Requests), sortedList(pod.Spec.Resources.Limits))
	}
	return b.String()
}

func sortedList(l v1.ResourceList) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		q := l[v1.ResourceName(k)]
		fmt.Fprintf(&b, "%s:%s,", k, q.String())
	}
	return b.String()
}
