package podapi

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/core/validation"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/bootlet/bootlet/checkpoint"
	btypes "github.com/bootlet/bootlet/types"
)

// The per-kind hooks of the generic Store: what the apiserver keeps in each
// resource's registry strategy.

func (r *Registry) podKind() *kind[*v1.Pod] {
	gvk := v1.SchemeGroupVersion.WithKind("Pod")
	// As the apiserver's pod strategy: status is not written through the main resource.
	reset := map[fieldpath.APIVersion]fieldpath.Filter{"v1": fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status")))}
	return &kind[*v1.Pod]{
		resource: "pods", gvk: gvk, checkpoint: checkpoint.KindPod, writable: true,
		newObj:  func() *v1.Pod { return &v1.Pod{} },
		newList: func() runtime.Object { return &v1.PodList{} },
		fields:  podFields,
		fm:      lazyFieldManager(gvk, reset),
		prepareCreate: func(in *v1.Pod) (*v1.Pod, error) {
			if in.Name == "" && in.GenerateName != "" {
				in.Name = in.GenerateName + string(uuid.NewUUID())[:5]
			}
			// A new pod is bootlet's, whatever an exported copy says.
			delete(in.Annotations, btypes.AnnotationOwner)
			p, err := DefaultPod(in, r.nodeName)
			if err != nil {
				return nil, err
			}
			if err := r.secretEnvErrors(p); err != nil {
				return nil, err
			}
			p.Generation = 1
			return p, nil
		},
		checkCreate: func(p *v1.Pod, items map[objKey]*v1.Pod) error {
			if err := r.checkMaxPods(p.Name, len(items)); err != nil {
				return err
			}
			for _, other := range items {
				if other.UID == p.UID {
					return apierrors.NewConflict(podsGR, p.Name, fmt.Errorf("metadata.uid %s is already used by pod %s/%s", p.UID, other.Namespace, other.Name))
				}
			}
			return nil
		},
		prepareUpdate: r.preparePodUpdate,
		stored: func(p *v1.Pod) *v1.Pod {
			c := p.DeepCopy()
			c.Status = v1.PodStatus{}
			return c
		},
		graceful: gracefulPodDelete,
		afterGraceful: func(p *v1.Pod) {
			if !r.runtime.Terminate(p.UID, gracePeriod(p)) {
				// No worker (never started): nothing runs, finish at once.
				go r.PodTerminated(btypes.KeyOf(p), p.UID)
			}
		},
		afterWrite: func(typ watch.EventType, p *v1.Pod) {
			if typ != watch.Deleted {
				r.runtime.Sync(p)
			}
		},
	}
}

// preparePodUpdate is the apiserver's pod update: most of the spec is
// immutable, status is not written here, identity annotations stay.
func (r *Registry) preparePodUpdate(updated, old *v1.Pod) (*v1.Pod, error) {
	updated.Generation = old.Generation
	updated.Status = old.Status
	legacyscheme.Scheme.Default(updated)
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	for _, a := range []string{"kubernetes.io/config.hash", btypes.AnnotationManagedBy, btypes.AnnotationOwner} {
		if v, ok := old.Annotations[a]; ok {
			updated.Annotations[a] = v
		} else {
			delete(updated.Annotations, a)
		}
	}
	updated.Spec.NodeName = old.Spec.NodeName
	newInt, oldInt := &api.Pod{}, &api.Pod{}
	if err := legacyscheme.Scheme.Convert(updated, newInt, nil); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if err := legacyscheme.Scheme.Convert(old, oldInt, nil); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	opts := podutil.GetValidationOptionsFromPodSpecAndMeta(&newInt.Spec, &oldInt.Spec, &newInt.ObjectMeta, &oldInt.ObjectMeta)
	if errs := validation.ValidatePodUpdate(newInt, oldInt, opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, updated.Name, errs)
	}
	if err := r.secretEnvErrors(updated); err != nil {
		return nil, err
	}
	if !apiequality.Semantic.DeepEqual(updated.Spec, old.Spec) {
		updated.Generation++
	}
	return updated, nil
}

// gracefulPodDelete marks a pod Terminating with the grace period the
// delete asks for; a pod already terminating sooner stays as it is.
func gracefulPodDelete(p *v1.Pod, opts *metav1.DeleteOptions) (*v1.Pod, bool) {
	grace := gracePeriod(p)
	if opts != nil && opts.GracePeriodSeconds != nil {
		grace = time.Duration(*opts.GracePeriodSeconds) * time.Second
	}
	if p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil &&
		time.Duration(*p.DeletionGracePeriodSeconds)*time.Second <= grace {
		return p, false
	}
	secs := int64(grace / time.Second)
	now := metav1.Now()
	p.DeletionTimestamp = &now
	p.DeletionGracePeriodSeconds = &secs
	return p, true
}

func gracePeriod(p *v1.Pod) time.Duration {
	if p.DeletionGracePeriodSeconds != nil {
		return time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
	}
	if p.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

func podFields(p *v1.Pod) fields.Set {
	return fields.Set{
		"metadata.name": p.Name, "metadata.namespace": p.Namespace, "spec.nodeName": p.Spec.NodeName,
		"spec.restartPolicy": string(p.Spec.RestartPolicy), "status.phase": string(p.Status.Phase), "status.podIP": p.Status.PodIP,
	}
}

// configKind is what Secrets and ConfigMaps share: apiserver metadata on
// create, internal-version validation, and a runtime refresh after a write
// (env and volumes of running pods read them).
func configKind[T object](r *Registry, res string, gvk schema.GroupVersionKind, ck checkpoint.Kind, newObj func() T, newList func() runtime.Object,
	fieldsOf func(T) fields.Set, normalize func(T), validate func(obj, old T) field.ErrorList) *kind[T] {
	check := func(obj, old T) (T, error) {
		normalize(obj)
		if errs := validate(obj, old); len(errs) > 0 {
			var zero T
			return zero, apierrors.NewInvalid(gvk.GroupKind(), obj.GetName(), errs)
		}
		return obj, nil
	}
	return &kind[T]{
		resource: res, gvk: gvk, checkpoint: ck, writable: true,
		newObj: newObj, newList: newList, fields: fieldsOf, fm: lazyFieldManager(gvk, nil),
		prepareCreate: func(obj T) (T, error) {
			prepareMeta(obj)
			obj.SetUID(uuid.NewUUID())
			var none T
			return check(obj, none)
		},
		prepareUpdate: check,
		afterWrite:    func(watch.EventType, T) { go r.runtime.Refresh() },
	}
}

func (r *Registry) secretKind() *kind[*v1.Secret] {
	return configKind(r, "secrets", v1.SchemeGroupVersion.WithKind("Secret"), checkpoint.KindSecret,
		func() *v1.Secret { return &v1.Secret{} }, func() runtime.Object { return &v1.SecretList{} },
		func(s *v1.Secret) fields.Set {
			return fields.Set{"metadata.name": s.Name, "metadata.namespace": s.Namespace, "type": string(s.Type)}
		},
		func(s *v1.Secret) {
			// stringData is write-only, merged into data as the apiserver does.
			for key, v := range s.StringData {
				if s.Data == nil {
					s.Data = map[string][]byte{}
				}
				s.Data[key] = []byte(v)
			}
			s.StringData = nil
			legacyscheme.Scheme.Default(s)
		},
		internalValidation[*v1.Secret](func() *api.Secret { return &api.Secret{} }, validation.ValidateSecret, validation.ValidateSecretUpdate))
}

func (r *Registry) configMapKind() *kind[*v1.ConfigMap] {
	return configKind(r, "configmaps", v1.SchemeGroupVersion.WithKind("ConfigMap"), checkpoint.KindConfigMap,
		func() *v1.ConfigMap { return &v1.ConfigMap{} }, func() runtime.Object { return &v1.ConfigMapList{} },
		func(c *v1.ConfigMap) fields.Set {
			return fields.Set{"metadata.name": c.Name, "metadata.namespace": c.Namespace}
		},
		func(*v1.ConfigMap) {},
		internalValidation[*v1.ConfigMap](func() *api.ConfigMap { return &api.ConfigMap{} }, validation.ValidateConfigMap, validation.ValidateConfigMapUpdate))
}

// internalValidation runs the apiserver's validation of a kind, which is
// written against the internal version: create validation when old is nil,
// update validation otherwise.
func internalValidation[T object, I any](newInternal func() I, create func(I) field.ErrorList, update func(I, I) field.ErrorList) func(obj, old T) field.ErrorList {
	return func(obj, old T) field.ErrorList {
		in, oldIn := newInternal(), newInternal()
		if err := legacyscheme.Scheme.Convert(obj, in, nil); err != nil {
			return field.ErrorList{field.Invalid(field.NewPath(""), "", err.Error())}
		}
		if isNil(old) {
			return create(in)
		}
		_ = legacyscheme.Scheme.Convert(old, oldIn, nil)
		return update(in, oldIn)
	}
}
