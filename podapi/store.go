package podapi

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/checkpoint"
)

// object is what a Store holds: a pointer to a typed core/v1 object.
type object interface {
	runtime.Object
	metav1.Object
}

// objKey is an object's place in a Store: namespace and name.
type objKey struct{ ns, name string }

func (k objKey) String() string { return "/" + k.ns + "/" + k.name }

func keyOf(o metav1.Object) objKey { return objKey{o.GetNamespace(), o.GetName()} }

// kind is what differs between the resources a Store serves: the types,
// and the hooks the apiserver's registry strategies would hold (defaulting
// and validation, the stored form, side effects). Everything else (RVs,
// optimistic concurrency, durability, watch fan-out) is the Store's.
type kind[T object] struct {
	resource   string
	gvk        schema.GroupVersionKind
	checkpoint checkpoint.Kind // "" keeps the kind in memory only (events)
	writable   bool            // served create/update/patch/delete
	newObj     func() T
	newList    func() runtime.Object
	fields     func(T) fields.Set
	fm         func() *managedfields.FieldManager

	// prepareCreate defaults and validates a new object; it runs before the
	// store lock is taken. The store then fills resourceVersion and the
	// creation timestamp.
	prepareCreate func(T) (T, error)
	// checkCreate sees every stored object of the kind under the lock, for
	// rules across objects (a pod UID is used once).
	checkCreate func(obj T, items map[objKey]T) error
	// prepareUpdate merges and validates an update against the stored
	// object (under the lock: it must be pure CPU).
	prepareUpdate func(obj, old T) (T, error)
	// stored is the form the checkpoint keeps (pods drop their status).
	stored func(T) T
	// graceful, when set, turns a delete into an update that marks the
	// object terminating (pods): it returns the new state, or ok=false when
	// the object already terminates sooner.
	graceful func(old T, opts *metav1.DeleteOptions) (T, bool)
	// afterGraceful runs the side effects of a graceful delete (pods:
	// the runtime terminates the pod), under the lock.
	afterGraceful func(obj T)
	// afterWrite runs the kind's side effects, in resourceVersion order
	// (under the lock; it must not block: it hands work to the runtime).
	afterWrite func(typ watch.EventType, obj T)
}

// core is what every Store of a Registry shares: one lock, so a watch or a
// list sees one consistent state across kinds and events are published in
// resourceVersion order, one resourceVersion counter, and one watch hub.
//
// Writers and readers take different locks, so a slow disk holds writers
// only. wmu serialises writers (lock/unlock) and is held across their
// checkpoint writes and fsyncs. mu guards what readers see (items, rv, the
// hub's order) and a writer takes it only to make a durable change visible
// (publish), never across I/O. A writer holding wmu may read items and rv
// without mu: only writers change them, under both locks.
type core struct {
	wmu   sync.Mutex
	mu    sync.RWMutex
	rv    uint64
	hub   *watchHub
	store *checkpoint.Store
	hwm   *highWater
	// unreservedLogged: nextRV logged that reservations fail (once per outage).
	unreservedLogged bool
	// failed reports a checkpoint failure (a node Event); set by Registry.
	failed func(op string, err error) error
	// afterUnlock runs once the writer releases wmu (recording an Event
	// takes it itself).
	afterUnlock []func()
}

// lock takes the writers' lock.
func (c *core) lock() { c.wmu.Lock() }

// unlock releases the writers' lock, then runs what was deferred while it
// was held.
func (c *core) unlock() {
	fns := c.afterUnlock
	c.afterUnlock = nil
	c.wmu.Unlock()
	for _, f := range fns {
		f()
	}
}

// publish makes a write visible to readers: fn changes items and rv and
// emits watch events under the readers' lock. It must be pure CPU. Call
// with wmu held.
func (c *core) publish(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn()
}

// nextRV hands out the next resourceVersion; the caller makes it the
// current one (c.rv) when it publishes. Call with wmu held.
//
// A durable write needs the version reserved first. A change that lives
// only in memory (a status update, an event) gets its version even when the
// reservation cannot be written (disk full, read-only): refusing it would
// freeze every pod's status and hide the very CheckpointWriteFailed event
// that says why. Such a version is still above every durable one; only a
// daemon restarted before the disk recovers may hand it out again, and it
// then serves nothing that had it.
func (c *core) nextRV(durable bool) (uint64, error) {
	if c.hwm != nil {
		if err := c.hwm.cover(c.rv + 1); err != nil {
			if durable {
				return 0, c.failed("resourceVersion reservation", err)
			}
			if !c.unreservedLogged {
				c.unreservedLogged = true
				klog.ErrorS(err, "Reserving resourceVersions failed; in-memory changes (status, events) go on with unreserved versions until the checkpoint can be written")
			}
		} else {
			c.unreservedLogged = false
		}
	}
	return c.rv + 1, nil
}

// Store is the one generic resource store: the objects of one kind, their
// resourceVersions, durability through the checkpoint before a write is
// visible, and watch events.
type Store[T object] struct {
	*kind[T]
	c     *core
	items map[objKey]T // stored objects are never mutated, only replaced
}

func newStore[T object](c *core, k *kind[T]) *Store[T] {
	return &Store[T]{kind: k, c: c, items: map[objKey]T{}}
}

func (s *Store[T]) gr() schema.GroupResource { return schema.GroupResource{Resource: s.resource} }

func (s *Store[T]) copyOf(o T) T { return o.DeepCopyObject().(T) }

// load puts a stored object back at start (no event, no write).
func (s *Store[T]) load(o T) {
	s.items[keyOf(o)] = o
	if n, err := strconv.ParseUint(o.GetResourceVersion(), 10, 64); err == nil && n > s.c.rv {
		s.c.rv = n
	}
}

// Get returns a copy of an object.
func (s *Store[T]) Get(ns, name string) (T, error) {
	s.c.mu.RLock()
	defer s.c.mu.RUnlock()
	o, ok := s.items[objKey{ns, name}]
	if !ok {
		var zero T
		return zero, apierrors.NewNotFound(s.gr(), name)
	}
	return s.copyOf(o), nil
}

// List returns copies of the objects in ns ("" for all), sorted by
// namespace and name, and the list's resourceVersion.
func (s *Store[T]) List(ns string) ([]T, uint64) {
	s.c.mu.RLock()
	defer s.c.mu.RUnlock()
	var out []T
	for _, k := range s.sortedKeys(ns) {
		out = append(out, s.copyOf(s.items[k]))
	}
	return out, s.c.rv
}

func (s *Store[T]) sortedKeys(ns string) []objKey {
	keys := make([]objKey, 0, len(s.items))
	for k := range s.items {
		if ns == "" || k.ns == ns {
			keys = append(keys, k)
		}
	}
	sortKeys(keys)
	return keys
}

// sortKeys orders keys as etcd orders its keys (list pages and continue
// tokens rely on it).
func sortKeys(keys []objKey) {
	slices.SortFunc(keys, func(a, b objKey) int { return strings.Compare(a.String(), b.String()) })
}

// put makes obj (with a new resourceVersion) the stored state of its key:
// durable first, then visible, then published. Call with wmu held.
func (s *Store[T]) put(typ watch.EventType, old, obj T, persist bool) error {
	rv, err := s.c.nextRV(persist && s.checkpoint != "")
	if err != nil {
		return err
	}
	obj.SetResourceVersion(strconv.FormatUint(rv, 10))
	if persist && s.checkpoint != "" {
		if err := s.persist(obj); err != nil {
			// The record may have reached the disk: never hand rv out again.
			s.c.publish(func() { s.c.rv = rv })
			return err
		}
	}
	s.c.publish(func() {
		s.c.rv = rv
		s.items[keyOf(obj)] = obj
		s.emit(typ, old, obj)
	})
	return nil
}

func (s *Store[T]) persist(obj T) error {
	stored := obj
	if s.stored != nil {
		stored = s.stored(obj)
	}
	data, err := json.Marshal(stored)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if _, err := s.c.store.Put(s.checkpoint, obj.GetNamespace(), obj.GetName(), data); err != nil {
		return s.c.failed("write", err)
	}
	return nil
}

// remove deletes a stored object durably and publishes DELETED with a new
// resourceVersion. Call with wmu held.
func (s *Store[T]) remove(old T) (T, error) {
	if s.checkpoint != "" {
		if err := s.c.store.Delete(s.checkpoint, old.GetNamespace(), old.GetName()); err != nil {
			var zero T
			return zero, s.c.failed("delete", err)
		}
	}
	gone := s.copyOf(old)
	// The counter may refuse only when the disk fails; the object is gone
	// durably, so publish the deletion with the current version then.
	rv, err := s.c.nextRV(s.checkpoint != "")
	if err == nil {
		gone.SetResourceVersion(strconv.FormatUint(rv, 10))
	} else {
		rv = s.c.rv
		klog.ErrorS(err, "Publishing a deletion without a new resourceVersion", "resource", s.resource, "object", keyOf(old))
	}
	s.c.publish(func() {
		s.c.rv = rv
		delete(s.items, keyOf(old))
		s.emit(watch.Deleted, old, gone)
	})
	if s.afterWrite != nil {
		s.afterWrite(watch.Deleted, gone)
	}
	return s.copyOf(gone), nil
}

// emit publishes a change to watches. Call inside publish.
func (s *Store[T]) emit(typ watch.EventType, prev, obj T) {
	rv, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	ev := watchEvent{rv: rv, typ: typ, resource: s.resource, obj: obj}
	if !isNil(prev) {
		ev.prev = prev
	}
	s.c.hub.publish(ev)
	observeWrite(ev)
}

func isNil[T object](o T) bool {
	var zero T
	return any(o) == any(zero)
}

// Create validates, defaults, persists and publishes a new object.
func (s *Store[T]) Create(in T, dryRun bool) (T, error) {
	var zero T
	obj, err := s.prepareCreate(s.copyOf(in))
	if err != nil {
		return zero, err
	}
	obj.SetResourceVersion("")
	obj.SetCreationTimestamp(metav1.Now())
	obj.SetDeletionTimestamp(nil)
	obj.SetDeletionGracePeriodSeconds(nil)
	s.c.lock()
	defer s.c.unlock()
	if _, ok := s.items[keyOf(obj)]; ok {
		return zero, apierrors.NewAlreadyExists(s.gr(), obj.GetName())
	}
	if s.checkCreate != nil {
		if err := s.checkCreate(obj, s.items); err != nil {
			return zero, err
		}
	}
	return s.commit(watch.Added, zero, obj, dryRun)
}

// Update replaces an object under optimistic concurrency (resourceVersion
// and UID preconditions) and the kind's update validation.
func (s *Store[T]) Update(in T, dryRun bool) (T, error) {
	var zero T
	s.c.lock()
	defer s.c.unlock()
	old, ok := s.items[keyOf(in)]
	if !ok {
		return zero, apierrors.NewNotFound(s.gr(), in.GetName())
	}
	if rv := in.GetResourceVersion(); rv != "" && rv != old.GetResourceVersion() {
		return zero, apierrors.NewConflict(s.gr(), in.GetName(), fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if uid := in.GetUID(); uid != "" && uid != old.GetUID() {
		if errs := validateUID(uid, uidPath); len(errs) > 0 {
			return zero, apierrors.NewInvalid(s.gvk().GroupKind(), in.GetName(), errs)
		}
		//lint:ignore ST1005 the apiserver's exact message (apiserver/pkg/storage/interfaces.go)
		return zero, apierrors.NewConflict(s.gr(), in.GetName(), fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", uid, old.GetUID()))
	}
	obj := s.copyOf(in)
	obj.SetUID(old.GetUID())
	obj.SetCreationTimestamp(old.GetCreationTimestamp())
	obj.SetDeletionTimestamp(old.GetDeletionTimestamp())
	obj.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	obj, err := s.prepareUpdate(obj, old)
	if err != nil {
		return zero, err
	}
	return s.commit(watch.Modified, old, obj, dryRun)
}

// commit stores an accepted create or update (unless it is a dry run) and
// runs the kind's side effects. Call with the lock held.
func (s *Store[T]) commit(typ watch.EventType, old, obj T, dryRun bool) (T, error) {
	if dryRun {
		return obj, nil
	}
	if err := s.put(typ, old, obj, true); err != nil {
		var zero T
		return zero, err
	}
	if s.afterWrite != nil {
		s.afterWrite(typ, s.copyOf(obj))
	}
	return s.copyOf(obj), nil
}

// Delete removes an object, or for a kind with graceful deletion marks it
// terminating; the kind's afterWrite finishes it.
func (s *Store[T]) Delete(ns, name string, opts *metav1.DeleteOptions, dryRun bool) (T, error) {
	var zero T
	s.c.lock()
	defer s.c.unlock()
	old, ok := s.items[objKey{ns, name}]
	if !ok {
		return zero, apierrors.NewNotFound(s.gr(), name)
	}
	if err := checkPreconditions(s.gr(), name, opts, old.GetUID(), old.GetResourceVersion()); err != nil {
		return zero, err
	}
	if s.graceful == nil {
		if dryRun {
			return s.copyOf(old), nil
		}
		return s.remove(old)
	}
	deleting, changed := s.graceful(s.copyOf(old), opts)
	if !changed || dryRun {
		return deleting, nil
	}
	if err := s.put(watch.Modified, old, deleting, true); err != nil {
		return zero, err
	}
	if s.afterGraceful != nil {
		s.afterGraceful(s.copyOf(deleting))
	}
	return s.copyOf(deleting), nil
}

// Mutate changes a stored object from inside the daemon (pod status, event
// counts): fn gets a copy and returns the new state, or false to leave it.
// persist=false keeps the change in memory (status is not checkpointed, as
// the kubelet does not checkpoint it either).
func (s *Store[T]) Mutate(k objKey, uid types.UID, persist bool, fn func(T) (T, bool)) (T, bool) {
	var zero T
	s.c.lock()
	defer s.c.unlock()
	old, ok := s.items[k]
	if !ok || (uid != "" && old.GetUID() != uid) {
		return zero, false
	}
	obj, changed := fn(s.copyOf(old))
	if !changed {
		return zero, false
	}
	if err := s.put(watch.Modified, old, obj, persist); err != nil {
		klog.ErrorS(err, "Dropping an internal update", "resource", s.resource, "object", k)
		return zero, false
	}
	return s.copyOf(obj), true
}

// Remove deletes an object from inside the daemon (a terminated pod, an
// expired event) if it still has uid ("" for any).
func (s *Store[T]) Remove(k objKey, uid types.UID) error {
	s.c.lock()
	defer s.c.unlock()
	old, ok := s.items[k]
	if !ok || (uid != "" && old.GetUID() != uid) {
		return nil
	}
	_, err := s.remove(old)
	return err
}
