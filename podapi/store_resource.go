package podapi

// The resource view of a Store, the one the HTTP handlers use: a Store seen
// without its type parameter, so one handler per verb serves every kind.

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// resource is a Store seen without its type parameter, so one handler per
// verb serves every kind.
type resource interface {
	name() string
	gvk() schema.GroupVersionKind
	newObject() runtime.Object
	newListObject() runtime.Object
	fieldManager() *managedfields.FieldManager
	isWritable() bool
	objectFields(runtime.Object) fields.Set
	getObject(ns, name string) (runtime.Object, error)
	createObject(obj runtime.Object, dryRun bool) (runtime.Object, error)
	updateObject(obj runtime.Object, dryRun bool) (runtime.Object, error)
	deleteObject(ns, name string, opts *metav1.DeleteOptions, dryRun bool) (runtime.Object, error)
	// snapshot returns the objects (not copies: read only) at the current
	// resourceVersion. Call with the core's mu (or wmu) held.
	snapshot() map[objKey]runtime.Object
}

func (s *Store[T]) name() string                              { return s.resource }
func (s *Store[T]) gvk() schema.GroupVersionKind              { return s.kind.gvk }
func (s *Store[T]) newObject() runtime.Object                 { return s.newObj() }
func (s *Store[T]) newListObject() runtime.Object             { return s.newList() }
func (s *Store[T]) fieldManager() *managedfields.FieldManager { return s.fm() }
func (s *Store[T]) isWritable() bool                          { return s.writable }

func (s *Store[T]) objectFields(o runtime.Object) fields.Set {
	if t, ok := o.(T); ok {
		return s.fields(t)
	}
	return fields.Set{}
}

func (s *Store[T]) getObject(ns, name string) (runtime.Object, error) {
	return nilIfErr(s.Get(ns, name))
}

func (s *Store[T]) createObject(o runtime.Object, dryRun bool) (runtime.Object, error) {
	t, ok := o.(T)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a %s", s.kind.gvk.Kind))
	}
	return nilIfErr(s.Create(t, dryRun))
}

func (s *Store[T]) updateObject(o runtime.Object, dryRun bool) (runtime.Object, error) {
	t, ok := o.(T)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a %s", s.kind.gvk.Kind))
	}
	return nilIfErr(s.Update(t, dryRun))
}

func (s *Store[T]) deleteObject(ns, name string, opts *metav1.DeleteOptions, dryRun bool) (runtime.Object, error) {
	return nilIfErr(s.Delete(ns, name, opts, dryRun))
}

func (s *Store[T]) snapshot() map[objKey]runtime.Object {
	out := make(map[objKey]runtime.Object, len(s.items))
	for k, o := range s.items {
		out[k] = o
	}
	return out
}

// nilIfErr keeps a typed nil pointer from becoming a non-nil interface.
func nilIfErr[T runtime.Object](o T, err error) (runtime.Object, error) {
	if err != nil {
		return nil, err
	}
	return o, nil
}

func checkPreconditions(gr schema.GroupResource, name string, opts *metav1.DeleteOptions, uid types.UID, rv string) error {
	if opts == nil || opts.Preconditions == nil {
		return nil
	}
	if p := opts.Preconditions.UID; p != nil && *p != uid {
		//lint:ignore ST1005 the apiserver's exact message (apiserver/pkg/storage/interfaces.go)
		return apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *p, uid))
	}
	if p := opts.Preconditions.ResourceVersion; p != nil && *p != rv {
		//lint:ignore ST1005 the apiserver's exact message (apiserver/pkg/storage/interfaces.go)
		return apierrors.NewConflict(gr, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", *p, rv))
	}
	return nil
}

// objectMeta is meta.Accessor for objects known to have metadata.
func objectMeta(o runtime.Object) metav1.Object {
	m, err := meta.Accessor(o)
	if err != nil {
		return &metav1.ObjectMeta{}
	}
	return m
}
