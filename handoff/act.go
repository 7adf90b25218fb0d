package handoff

import (
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/checkpoint"
	btypes "github.com/bootlet/bootlet/types"
)

// Action: carrying out a Step's decision.

// act carries out the decision for one pod: the static copy, the owner,
// its record and events.
func (h *Handoff) act(pod *v1.Pod, st *handoffPod, f Facts, dec Decision, c staticCopy) {
	inPlace, writeFailed := f.FileInPlace, false
	switch {
	case dec.WriteFile:
		if !inPlace && c.data != nil {
			inPlace = h.writeFile(pod, c.data)
			writeFailed = !inPlace
		}
		h.warnNoStaticCopy(pod, st, c.refused)
	case dec.RemoveFile:
		h.removeFile(pod)
		inPlace = false
	}

	h.mu.Lock()
	old := st.owner
	st.owner, st.fileInPlace, st.writeFailed = dec.Owner, inPlace, writeFailed
	if old != dec.Owner && dec.Owner == btypes.OwnerKubeletStatic {
		st.adoptedAt = time.Now()
	}
	h.mu.Unlock()
	if old == dec.Owner {
		return
	}
	klog.InfoS("Pod owner changed", "pod", klog.KObj(pod), "uid", pod.UID, "from", old, "to", dec.Owner)
	switch dec.Owner {
	case btypes.OwnerKubeletStatic:
		h.event(pod, v1.EventTypeNormal, "AdoptedByKubelet", "The kubelet adopted the pod as a static pod with the same UID; bootlet no longer acts on it")
	case btypes.OwnerReleased:
		h.event(pod, v1.EventTypeNormal, "ReleasedToKubelet", "bootlet withdrew the pod's static copy; the kubelet stops it")
	}
	if h.cfg.Owners != nil {
		h.cfg.Owners.PodOwner(btypes.KeyOf(pod), pod.UID, dec.Owner)
	}
}

// writeFile puts the pod's static copy on disk and reports whether it is
// there. The content goes to a dotfile (which the kubelet's file source
// ignores), is fsynced and renamed over the final name: the kubelet never
// reads half a file, which would remove the pod from its source and kill
// it. The file is 0600 (it shows the pod's ConfigMap values).
func (h *Handoff) writeFile(pod *v1.Pod, data []byte) bool {
	path := h.path(pod)
	if renamed, err := checkpoint.WriteFileAtomic(path, data); err != nil {
		klog.ErrorS(err, "Writing the static copy of a pod failed", "pod", klog.KObj(pod), "path", path)
		if !renamed {
			return false
		}
	}
	klog.InfoS("Wrote the static copy of a pod for the kubelet", "pod", klog.KObj(pod), "uid", pod.UID, "path", path)
	return true
}

// warnNoStaticCopy reports, once per pod, that a pod gets no static copy
// because it takes Secret values into env: such a pod can only come from
// before the API refused them (an older checkpoint). It stays bootlet's.
// A copy an older bootlet wrote is left alone (withdrawing it would stop a
// pod the kubelet may run), but the event says so.
func (h *Handoff) warnNoStaticCopy(pod *v1.Pod, st *handoffPod, refused *SecretEnvError) {
	h.mu.Lock()
	first := refused != nil && !st.noStaticCopy
	st.noStaticCopy = refused != nil
	h.mu.Unlock()
	if !first {
		return
	}
	msg := refused.Error() + ". The pod stays bootlet's; a kubelet that starts does not know it and may stop its containers"
	if _, err := os.Stat(h.path(pod)); err == nil {
		msg += "; a static copy an older bootlet wrote is still at " + h.path(pod) + " and may hold Secret values: remove it once the pod is recreated without Secret env"
	}
	klog.InfoS("No static copy for a pod that takes Secret values into env", "pod", klog.KObj(pod), "uid", pod.UID, "reason", refused.Error())
	h.event(pod, v1.EventTypeWarning, "NoStaticCopy", msg)
}

func (h *Handoff) removeFile(pod *v1.Pod) {
	path := h.path(pod)
	err := os.Remove(path)
	switch {
	case err == nil:
		klog.InfoS("Withdrew the static copy of a pod", "pod", klog.KObj(pod), "path", path)
	case !os.IsNotExist(err):
		klog.ErrorS(err, "Removing the static copy of a pod failed", "pod", klog.KObj(pod), "path", path)
	}
}
