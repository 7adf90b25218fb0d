package handoff

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	btypes "github.com/bootlet/bootlet/types"
)

// Observation: what a Step looks at before Decide.

// staticCopy is the pod's static copy as observe rendered it: data nil
// when there is none, refused when that is because the pod takes Secret
// values into env.
type staticCopy struct {
	data    []byte
	refused *SecretEnvError
}

// observe fills in the facts Step did not have: whether the kubelet knows
// the pod, whether the static copy renders and whether the file on disk
// holds it. A deleted or released pod gets no copy, so none is rendered.
func (h *Handoff) observe(pod *v1.Pod, volumeDirs map[string]string, f *Facts) staticCopy {
	f.KubeletKnows = h.kubeletKnows(pod.UID)
	if f.Terminating || f.Owner == btypes.OwnerReleased {
		return staticCopy{}
	}
	c := h.render(pod, volumeDirs)
	f.CopyRenders = c.data != nil
	cur, err := os.ReadFile(h.path(pod))
	f.FileInPlace = c.data != nil && err == nil && bytes.Equal(cur, c.data)
	return c
}

// render is the pod's static copy, encoded. A pod that takes Secret values
// into env has none: that refusal is returned, and the pod stays
// bootlet's.
func (h *Handoff) render(pod *v1.Pod, volumeDirs map[string]string) staticCopy {
	static, err := StaticPod(pod, volumeDirs, h.cfg.Objects)
	var refused *SecretEnvError
	if errors.As(err, &refused) {
		return staticCopy{refused: refused}
	}
	if err != nil {
		klog.ErrorS(err, "Cannot render the static copy of a pod", "pod", klog.KObj(pod))
		return staticCopy{}
	}
	data, err := yaml.Marshal(static)
	if err != nil {
		klog.ErrorS(err, "Cannot encode the static copy of a pod", "pod", klog.KObj(pod))
		return staticCopy{}
	}
	return staticCopy{data: data}
}

// kubeletKnows reports whether the kubelet made the pod's plugins
// directory (ROOT/pods/UID/plugins), which it does in SyncPod
// (makePodDataDirs) once it admitted the pod from a source. bootlet's own
// pod directory layout never has it, so this holds even when bootlet's
// --root-dir is the kubelet's.
func (h *Handoff) kubeletKnows(uid types.UID) bool {
	fi, err := os.Stat(filepath.Join(h.cfg.KubeletRootDir, "pods", string(uid), "plugins"))
	return err == nil && fi.IsDir()
}

func (h *Handoff) path(pod *v1.Pod) string {
	return filepath.Join(h.cfg.StaticPodPath, StaticPodFileName(pod.Namespace, pod.Name))
}
