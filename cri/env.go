package cri

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	v1resource "k8s.io/kubernetes/pkg/api/v1/resource"
	podshelper "k8s.io/kubernetes/pkg/apis/core/pods"
	"k8s.io/kubernetes/pkg/fieldpath"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"
)

// ObjectSource gives the Secrets and ConfigMaps a pod may reference. A
// missing object is reported with an apierrors NotFound error so that
// `optional` references can be skipped exactly as the kubelet does.
type ObjectSource interface {
	GetSecret(namespace, name string) (*v1.Secret, error)
	GetConfigMap(namespace, name string) (*v1.ConfigMap, error)
}

// EnvFacts are the node and pod facts environment variables may refer to.
type EnvFacts struct {
	PodIPs          []string
	HostIPs         []string
	NodeAllocatable v1.ResourceList
}

// MakeEnvironment is the kubelet's makeEnvironmentVariables for a node with
// no Services: envFrom first, then env in order with $(VAR) expansion against
// what came before, resolving fieldRef, resourceFieldRef, configMapKeyRef and
// secretKeyRef.
func MakeEnvironment(pod *v1.Pod, c *v1.Container, facts EnvFacts, objects ObjectSource) ([]kubecontainer.EnvVar, error) {
	configMaps := map[string]*v1.ConfigMap{}
	secrets := map[string]*v1.Secret{}
	getConfigMap := func(name string) (*v1.ConfigMap, error) {
		if cm, ok := configMaps[name]; ok {
			return cm, nil
		}
		cm, err := objects.GetConfigMap(pod.Namespace, name)
		if err == nil {
			configMaps[name] = cm
		}
		return cm, err
	}
	getSecret := func(name string) (*v1.Secret, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		s, err := objects.GetSecret(pod.Namespace, name)
		if err == nil {
			secrets[name] = s
		}
		return s, err
	}

	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := getConfigMap(from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, err
			}
			for k, v := range cm.Data {
				set(from.Prefix+k, v)
			}
		case from.SecretRef != nil:
			s, err := getSecret(from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.SecretRef.Optional) {
					continue
				}
				return nil, err
			}
			for k, v := range s.Data {
				set(from.Prefix+k, string(v))
			}
		}
	}

	mapping := expansion.MappingFuncFor(env)
	for _, e := range c.Env {
		val := e.Value
		if val != "" {
			val = expansion.Expand(val, mapping)
		} else if e.ValueFrom != nil {
			var err error
			var skip bool
			val, skip, err = resolveEnvSource(pod, c, e.ValueFrom, facts, getConfigMap, getSecret)
			if err != nil {
				return nil, err
			}
			if skip {
				continue
			}
		}
		set(e.Name, val)
	}

	out := make([]kubecontainer.EnvVar, 0, len(order))
	for _, k := range order {
		out = append(out, kubecontainer.EnvVar{Name: k, Value: env[k]})
	}
	return out, nil
}

func resolveEnvSource(pod *v1.Pod, c *v1.Container, src *v1.EnvVarSource, facts EnvFacts,
	getConfigMap func(string) (*v1.ConfigMap, error), getSecret func(string) (*v1.Secret, error)) (val string, skip bool, err error) {
	switch {
	case src.FieldRef != nil:
		v, err := PodFieldValue(pod, src.FieldRef, facts)
		return v, false, err
	case src.ResourceFieldRef != nil:
		v, err := v1resource.ExtractResourceValueByContainerNameAndNodeAllocatable(src.ResourceFieldRef, pod, c.Name, facts.NodeAllocatable)
		return v, false, err
	case src.ConfigMapKeyRef != nil:
		ref := src.ConfigMapKeyRef
		cm, err := getConfigMap(ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, err
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("couldn't find key %v in ConfigMap %v/%v", ref.Key, pod.Namespace, ref.Name)
		}
		return v, false, nil
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		s, err := getSecret(ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, err
		}
		v, ok := s.Data[ref.Key]
		if !ok {
			if isTrue(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("couldn't find key %v in Secret %v/%v", ref.Key, pod.Namespace, ref.Name)
		}
		return string(v), false, nil
	}
	return "", false, nil
}

// PodFieldValue is the kubelet's podFieldSelectorRuntimeValue, shared by
// env fieldRef and the downwardAPI volume.
func PodFieldValue(pod *v1.Pod, fs *v1.ObjectFieldSelector, facts EnvFacts) (string, error) {
	path, _, err := podshelper.ConvertDownwardAPIFieldLabel(fs.APIVersion, fs.FieldPath, "")
	if err != nil {
		return "", err
	}
	switch path {
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		if len(facts.HostIPs) == 0 {
			return "", fmt.Errorf("node has no IP address")
		}
		return facts.HostIPs[0], nil
	case "status.hostIPs":
		return strings.Join(facts.HostIPs, ","), nil
	case "status.podIP":
		if len(facts.PodIPs) == 0 {
			return "", nil
		}
		return facts.PodIPs[0], nil
	case "status.podIPs":
		return strings.Join(facts.PodIPs, ","), nil
	}
	return fieldpath.ExtractFieldPathAsString(pod, path)
}

func isTrue(b *bool) bool { return b != nil && *b }
