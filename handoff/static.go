package handoff

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"
	kubeutil "k8s.io/kubernetes/pkg/kubelet/util"

	"github.com/bootlet/bootlet/cri"
	btypes "github.com/bootlet/bootlet/types"
)

// StaticPodFileName is the file bootlet writes in the kubelet's
// staticPodPath for a pod. "_" never occurs in a namespace or pod name, so
// the name is unambiguous, and the prefix tells bootlet's files apart.
func StaticPodFileName(namespace, name string) string {
	return "bootlet_" + namespace + "_" + name + ".yaml"
}

// referencesObjects reports whether a volume needs a Secret or ConfigMap.
func referencesObjects(vol *v1.Volume) bool {
	switch {
	case vol.Secret != nil, vol.ConfigMap != nil:
		return true
	case vol.Projected != nil:
		for _, s := range vol.Projected.Sources {
			if s.Secret != nil || s.ConfigMap != nil {
				return true
			}
		}
	}
	return false
}

// StaticPod renders the static copy of an API pod that the kubelet adopts (volumeDirs: the runner's
// materialised volume directories); what changes and why:
// docs/design/handoff.md, "The static copy: Secrets and ConfigMaps".
func StaticPod(pod *v1.Pod, volumeDirs map[string]string, objects cri.ObjectSource) (*v1.Pod, error) {
	// The kubelet panics on a UID its cgroup naming refuses: never hand it one.
	if err := cri.ValidPodUID(pod.UID); err != nil {
		return nil, err
	}
	if refs := SecretEnvRefs(&pod.Spec); len(refs) > 0 {
		return nil, &SecretEnvError{Fields: refs}
	}
	out := &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
			Labels: pod.Labels,
		},
		Spec: *pod.Spec.DeepCopy(),
	}
	for k, v := range pod.Annotations {
		if k == btypes.AnnotationOwner || strings.HasPrefix(k, "kubernetes.io/config.") {
			continue
		}
		if out.Annotations == nil {
			out.Annotations = map[string]string{}
		}
		out.Annotations[k] = v
	}
	out.Spec.NodeName = ""
	out.Spec.ImagePullSecrets = nil
	for i := range out.Spec.Volumes {
		vol := &out.Spec.Volumes[i]
		if !referencesObjects(vol) {
			continue
		}
		dir, ok := volumeDirs[vol.Name]
		if !ok {
			return nil, fmt.Errorf("volume %s: no materialised directory to mount in the static copy", vol.Name)
		}
		dirType := v1.HostPathDirectory
		*vol = v1.Volume{Name: vol.Name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir, Type: &dirType}}}
	}
	for _, list := range [][]v1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range list {
			env, err := literalEnv(pod, &list[i], objects)
			if err != nil {
				return nil, fmt.Errorf("container %s: %w", list[i].Name, err)
			}
			list[i].Env, list[i].EnvFrom = env, nil
		}
	}
	return out, nil
}

// escapeExpansion makes a value survive the kubelet's $(VAR) expansion
// unchanged: "$$" expands to "$".
func escapeExpansion(s string) string { return strings.ReplaceAll(s, "$", "$$") }

// literalEnv is c's env with every ConfigMap reference replaced by its
// value, with the kubelet's semantics (makeEnvironmentVariables): a Secret
// reference is an error, as its value never goes into a file. envFrom
// sources first, in order, each key prefixed; then env in order, a
// later name overriding an earlier one. envFrom entries come first as
// literals so that $(VAR) in later values sees them, as it does in the
// kubelet; a name set twice stays twice (the kubelet applies them in
// order). Missing optional references are left out, missing required ones
// are an error (bootlet could not have started the container either).
func literalEnv(pod *v1.Pod, c *v1.Container, objects cri.ObjectSource) ([]v1.EnvVar, error) {
	getConfigMap := func(name string) (*v1.ConfigMap, error) { return objects.GetConfigMap(pod.Namespace, name) }
	var out []v1.EnvVar
	for _, from := range c.EnvFrom {
		if from.SecretRef != nil {
			return nil, errSecretValueInFile
		}
		if from.ConfigMapRef == nil {
			continue
		}
		data, skip, err := cri.ConfigMapEnvFrom(from.ConfigMapRef, getConfigMap)
		if err != nil {
			return nil, err
		}
		if skip {
			continue
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, v1.EnvVar{Name: from.Prefix + k, Value: escapeExpansion(data[k])})
		}
	}
	for _, e := range c.Env {
		src := e.ValueFrom
		if src != nil && src.SecretKeyRef != nil {
			return nil, errSecretValueInFile
		}
		if src == nil || src.ConfigMapKeyRef == nil {
			out = append(out, e)
			continue
		}
		val, skip, err := cri.ConfigMapKey(pod.Namespace, src.ConfigMapKeyRef, getConfigMap)
		if err != nil {
			return nil, err
		}
		if !skip {
			out = append(out, v1.EnvVar{Name: e.Name, Value: escapeExpansion(val)})
		}
	}
	return out, nil
}

// actuatedResources is what the kubelet's kuberuntime records for a
// container it started (setActuatedContainerResources): the container's
// resources, with the limits the pod-level resources imply when
// InPlacePodLevelResourcesVerticalScaling is on (beta, on by default in
// v1.36). Writing these for an adopted container is what keeps the kubelet
// from "resizing" it (see docs/handoff.md).
func actuatedResources(pod *v1.Pod, c *v1.Container) v1.ResourceRequirements {
	res := *c.Resources.DeepCopy()
	if utilfeature.DefaultFeatureGate.Enabled(features.InPlacePodLevelResourcesVerticalScaling) {
		res.Limits = kubeutil.GetLimits(&kubeutil.ResourceOpts{PodResources: pod.Spec.Resources, ContainerResources: &c.Resources})
	}
	return res
}
