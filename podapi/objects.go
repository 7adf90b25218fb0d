package podapi

import (
	"fmt"
	"sort"
	"strconv"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/core/validation"

	"github.com/bootlet/bootlet/checkpoint"
)

// GetSecret implements cri.ObjectSource.
func (r *Registry) GetSecret(ns, name string) (*v1.Secret, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.secrets[objKey{ns, name}]
	if !ok {
		return nil, apierrors.NewNotFound(secretsGR, name)
	}
	return s.DeepCopy(), nil
}

// GetConfigMap implements cri.ObjectSource.
func (r *Registry) GetConfigMap(ns, name string) (*v1.ConfigMap, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	c, ok := r.configMaps[objKey{ns, name}]
	if !ok {
		return nil, apierrors.NewNotFound(configMapsGR, name)
	}
	return c.DeepCopy(), nil
}

// ListSecrets returns secrets in ns ("" for all).
func (r *Registry) ListSecrets(ns string) ([]v1.Secret, string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []v1.Secret
	for k, s := range r.secrets {
		if ns == "" || k.ns == ns {
			out = append(out, *s.DeepCopy())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, strconv.FormatUint(r.rv, 10)
}

// ListConfigMaps returns configmaps in ns ("" for all).
func (r *Registry) ListConfigMaps(ns string) ([]v1.ConfigMap, string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []v1.ConfigMap
	for k, c := range r.configMaps {
		if ns == "" || k.ns == ns {
			out = append(out, *c.DeepCopy())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, strconv.FormatUint(r.rv, 10)
}

func validateSecret(s, old *v1.Secret) field.ErrorList {
	in, oldIn := &api.Secret{}, &api.Secret{}
	legacyscheme.Scheme.Default(s)
	if err := legacyscheme.Scheme.Convert(s, in, nil); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), "", err.Error())}
	}
	if old == nil {
		return validation.ValidateSecret(in)
	}
	_ = legacyscheme.Scheme.Convert(old, oldIn, nil)
	return validation.ValidateSecretUpdate(in, oldIn)
}

func validateConfigMap(c, old *v1.ConfigMap) field.ErrorList {
	in, oldIn := &api.ConfigMap{}, &api.ConfigMap{}
	if err := legacyscheme.Scheme.Convert(c, in, nil); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath(""), "", err.Error())}
	}
	if old == nil {
		return validation.ValidateConfigMap(in)
	}
	_ = legacyscheme.Scheme.Convert(old, oldIn, nil)
	return validation.ValidateConfigMapUpdate(in, oldIn)
}

// prepareCreate fills the server-side metadata of a new object.
func prepareCreate(m *metav1.ObjectMeta) {
	if m.Name == "" && m.GenerateName != "" {
		m.Name = m.GenerateName + string(uuid.NewUUID())[:5]
	}
	if m.Namespace == "" {
		m.Namespace = metav1.NamespaceDefault
	}
	m.UID = uuid.NewUUID()
	m.CreationTimestamp = metav1.Now()
	m.ResourceVersion = ""
	m.DeletionTimestamp, m.DeletionGracePeriodSeconds = nil, nil
}

func checkUpdate(gr schema.GroupResource, in, old *metav1.ObjectMeta) error {
	if in.ResourceVersion != "" && in.ResourceVersion != old.ResourceVersion {
		return apierrors.NewConflict(gr, in.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if in.UID != "" && in.UID != old.UID {
		//lint:ignore ST1005 the apiserver's exact message (apiserver/pkg/storage/interfaces.go)
		return apierrors.NewConflict(gr, in.Name, fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", in.UID, old.UID))
	}
	in.UID, in.CreationTimestamp = old.UID, old.CreationTimestamp
	return nil
}

// PutSecret creates (create=true) or replaces a secret.
func (r *Registry) PutSecret(s *v1.Secret, create, dryRun bool) (*v1.Secret, error) {
	s = s.DeepCopy()
	r.mu.Lock()
	defer r.mu.Unlock()
	k := objKey{s.Namespace, s.Name}
	old, exists := r.secrets[k]
	switch {
	case create && exists:
		return nil, apierrors.NewAlreadyExists(secretsGR, s.Name)
	case !create && !exists:
		return nil, apierrors.NewNotFound(secretsGR, s.Name)
	case create:
		prepareCreate(&s.ObjectMeta)
		k = objKey{s.Namespace, s.Name}
		old = nil
	default:
		if err := checkUpdate(secretsGR, &s.ObjectMeta, &old.ObjectMeta); err != nil {
			return nil, err
		}
	}
	// stringData is write-only, merged into data as the apiserver does.
	for key, v := range s.StringData {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[key] = []byte(v)
	}
	s.StringData = nil
	if errs := validateSecret(s, old); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, s.Name, errs)
	}
	if dryRun {
		return s, nil
	}
	s.ResourceVersion = r.nextRV()
	if err := r.persist(checkpoint.KindSecret, s.Namespace, s.Name, s); err != nil {
		return nil, err
	}
	r.secrets[k] = s
	if old == nil {
		r.emit(watch.Added, nil, s)
	} else {
		r.emit(watch.Modified, old, s)
	}
	go r.runtime.Refresh()
	return s.DeepCopy(), nil
}

// PutConfigMap creates (create=true) or replaces a configmap.
func (r *Registry) PutConfigMap(c *v1.ConfigMap, create, dryRun bool) (*v1.ConfigMap, error) {
	c = c.DeepCopy()
	r.mu.Lock()
	defer r.mu.Unlock()
	k := objKey{c.Namespace, c.Name}
	old, exists := r.configMaps[k]
	switch {
	case create && exists:
		return nil, apierrors.NewAlreadyExists(configMapsGR, c.Name)
	case !create && !exists:
		return nil, apierrors.NewNotFound(configMapsGR, c.Name)
	case create:
		prepareCreate(&c.ObjectMeta)
		k = objKey{c.Namespace, c.Name}
		old = nil
	default:
		if err := checkUpdate(configMapsGR, &c.ObjectMeta, &old.ObjectMeta); err != nil {
			return nil, err
		}
	}
	if errs := validateConfigMap(c, old); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, c.Name, errs)
	}
	if dryRun {
		return c, nil
	}
	c.ResourceVersion = r.nextRV()
	if err := r.persist(checkpoint.KindConfigMap, c.Namespace, c.Name, c); err != nil {
		return nil, err
	}
	r.configMaps[k] = c
	if old == nil {
		r.emit(watch.Added, nil, c)
	} else {
		r.emit(watch.Modified, old, c)
	}
	go r.runtime.Refresh()
	return c.DeepCopy(), nil
}

// DeleteSecret removes a secret durably.
func (r *Registry) DeleteSecret(ns, name string, opts *metav1.DeleteOptions, dryRun bool) (*v1.Secret, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.secrets[objKey{ns, name}]
	if !ok {
		return nil, apierrors.NewNotFound(secretsGR, name)
	}
	if err := checkPreconditions(secretsGR, name, opts, s.UID, s.ResourceVersion); err != nil {
		return nil, err
	}
	if dryRun {
		return s.DeepCopy(), nil
	}
	if err := r.store.Delete(checkpoint.KindSecret, ns, name); err != nil {
		return nil, r.checkpointFailed("delete", err)
	}
	delete(r.secrets, objKey{ns, name})
	gone := s.DeepCopy()
	gone.ResourceVersion = r.nextRV()
	r.emit(watch.Deleted, s, gone)
	return gone, nil
}

// DeleteConfigMap removes a configmap durably.
func (r *Registry) DeleteConfigMap(ns, name string, opts *metav1.DeleteOptions, dryRun bool) (*v1.ConfigMap, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.configMaps[objKey{ns, name}]
	if !ok {
		return nil, apierrors.NewNotFound(configMapsGR, name)
	}
	if err := checkPreconditions(configMapsGR, name, opts, c.UID, c.ResourceVersion); err != nil {
		return nil, err
	}
	if dryRun {
		return c.DeepCopy(), nil
	}
	if err := r.store.Delete(checkpoint.KindConfigMap, ns, name); err != nil {
		return nil, r.checkpointFailed("delete", err)
	}
	delete(r.configMaps, objKey{ns, name})
	gone := c.DeepCopy()
	gone.ResourceVersion = r.nextRV()
	r.emit(watch.Deleted, c, gone)
	return gone, nil
}
