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
	getConfigMap := memo(func(name string) (*v1.ConfigMap, error) { return objects.GetConfigMap(pod.Namespace, name) })
	getSecret := memo(func(name string) (*v1.Secret, error) { return objects.GetSecret(pod.Namespace, name) })

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
			data, skip, err := ConfigMapEnvFrom(from.ConfigMapRef, getConfigMap)
			if err != nil {
				return nil, err
			}
			if skip {
				continue
			}
			for k, v := range data {
				set(from.Prefix+k, v)
			}
		case from.SecretRef != nil:
			s, skip, err := optionalObject(from.SecretRef.Name, from.SecretRef.Optional, getSecret)
			if err != nil {
				return nil, err
			}
			if skip {
				continue
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
		return ConfigMapKey(pod.Namespace, src.ConfigMapKeyRef, getConfigMap)
	case src.SecretKeyRef != nil:
		ref := src.SecretKeyRef
		return objectKey("Secret", pod.Namespace, ref.Name, ref.Key, ref.Optional, getSecret, func(s *v1.Secret, k string) (string, bool) {
			v, ok := s.Data[k]
			return string(v), ok
		})
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

// memo remembers what get found, so a container reads each object once.
func memo[T any](get func(name string) (T, error)) func(name string) (T, error) {
	found := map[string]T{}
	return func(name string) (T, error) {
		if v, ok := found[name]; ok {
			return v, nil
		}
		v, err := get(name)
		if err == nil {
			found[name] = v
		}
		return v, err
	}
}

// ConfigMapKey resolves an env configMapKeyRef as the kubelet does: a
// missing ConfigMap or key is skipped (skip) when the reference is
// optional, an error when it is not. The handoff's static copy resolves
// its literal env with it too, so both agree by construction.
func ConfigMapKey(namespace string, ref *v1.ConfigMapKeySelector, get func(name string) (*v1.ConfigMap, error)) (val string, skip bool, err error) {
	return objectKey("ConfigMap", namespace, ref.Name, ref.Key, ref.Optional, get, func(cm *v1.ConfigMap, k string) (string, bool) {
		v, ok := cm.Data[k]
		return v, ok
	})
}

// ConfigMapEnvFrom is the data an envFrom configMapRef brings in: a missing
// optional ConfigMap is skipped, a missing required one is an error.
func ConfigMapEnvFrom(ref *v1.ConfigMapEnvSource, get func(name string) (*v1.ConfigMap, error)) (data map[string]string, skip bool, err error) {
	cm, skip, err := optionalObject(ref.Name, ref.Optional, get)
	if err != nil || skip {
		return nil, skip, err
	}
	return cm.Data, false, nil
}

// optionalObject gets an object a reference names: skip when it is
// missing and the reference is optional.
func optionalObject[T any](name string, optional *bool, get func(string) (T, error)) (obj T, skip bool, err error) {
	obj, err = get(name)
	if err != nil && apierrors.IsNotFound(err) && isTrue(optional) {
		return obj, true, nil
	}
	return obj, false, err
}

// objectKey resolves one key of a referenced object with the kubelet's
// optional semantics.
func objectKey[T any](kind, namespace, name, key string, optional *bool, get func(string) (T, error), lookup func(T, string) (string, bool)) (string, bool, error) {
	obj, skip, err := optionalObject(name, optional, get)
	if err != nil || skip {
		return "", skip, err
	}
	v, ok := lookup(obj, key)
	if !ok {
		if isTrue(optional) {
			return "", true, nil
		}
		return "", false, fmt.Errorf("couldn't find key %v in %s %v/%v", key, kind, namespace, name)
	}
	return v, false, nil
}
