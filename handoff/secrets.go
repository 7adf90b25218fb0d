package handoff

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Secret values never go into the kubelet's static pod files: the kubelet
// posts each static pod as a mirror pod, so anyone who may get pods would
// read them. A pod that takes Secret values into env therefore has no
// static copy; a Secret mounted as a volume is fine (the copy mounts
// bootlet's materialised directory, the file holds only its path).

// SecretEnvRefs lists the fields of a pod spec that take Secret values into
// env (env[].valueFrom.secretKeyRef, envFrom[].secretRef), in every
// container, init container and ephemeral container, as field paths.
func SecretEnvRefs(spec *v1.PodSpec) field.ErrorList {
	var out field.ErrorList
	add := func(p *field.Path, env []v1.EnvVar, from []v1.EnvFromSource) {
		for i, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, field.Forbidden(p.Child("env").Index(i).Child("valueFrom", "secretKeyRef"), secretEnvReason))
			}
		}
		for i, f := range from {
			if f.SecretRef != nil {
				out = append(out, field.Forbidden(p.Child("envFrom").Index(i).Child("secretRef"), secretEnvReason))
			}
		}
	}
	spec0 := field.NewPath("spec")
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		add(spec0.Child("initContainers").Index(i), c.Env, c.EnvFrom)
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		add(spec0.Child("containers").Index(i), c.Env, c.EnvFrom)
	}
	for i := range spec.EphemeralContainers {
		c := &spec.EphemeralContainers[i]
		add(spec0.Child("ephemeralContainers").Index(i), c.Env, c.EnvFrom)
	}
	return out
}

const secretEnvReason = "Secret values in env would be written into the kubelet's static pod file and shown in its mirror pod to anyone who may get pods; mount the Secret as a volume instead"

// SecretEnvError is why a pod has no static copy: it takes Secret values
// into env.
type SecretEnvError struct{ Fields field.ErrorList }

func (e *SecretEnvError) Error() string {
	paths := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		paths[i] = f.Field
	}
	return fmt.Sprintf("no static copy for the kubelet: the pod takes Secret values into env (%s), which the static file and its mirror pod would show to anyone who may get pods; mount the Secret as a volume instead", strings.Join(paths, ", "))
}

// errSecretValueInFile is literalEnv's refusal: StaticPod checks the whole
// spec first, so reaching it means a path that skipped that check.
var errSecretValueInFile = errors.New("refusing to write a Secret value into a static pod file")
