package podapi

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/handoff"
	btypes "github.com/bootlet/bootlet/types"
)

var _ handoff.OwnerSink = (*Registry)(nil)

// PodOwner implements handoff.OwnerSink: the pod's owner (bootlet,
// kubelet-static, released) is recorded as the bootlet.dev/owner annotation
// of the stored pod, durably in its checkpoint record, so a restarted
// daemon keeps its hands off a pod the kubelet adopted. Updates keep it
// (preparePodUpdate), as they keep the other identity annotations.
func (r *Registry) PodOwner(key btypes.PodKey, uid types.UID, owner btypes.Owner) {
	_, changed := r.pods.Mutate(objKey{key.Namespace, key.Name}, uid, true, func(p *v1.Pod) (*v1.Pod, bool) {
		if p.Annotations[btypes.AnnotationOwner] == string(owner) {
			return nil, false
		}
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[btypes.AnnotationOwner] = string(owner)
		return p, true
	})
	if changed {
		klog.V(2).InfoS("Recorded pod owner", "pod", key.String(), "owner", owner)
	}
}
