package podapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/apis/core/validation"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/shim"
)

// PodRuntime is what the registry drives: shim.Manager.
type PodRuntime interface {
	Sync(pod *v1.Pod)
	Terminate(uid types.UID, gracePeriod time.Duration) bool
	Refresh()
	Logs(ctx context.Context, pod *v1.Pod, opts *v1.PodLogOptions, out io.Writer) error
}

var (
	podsGR       = schema.GroupResource{Resource: "pods"}
	secretsGR    = schema.GroupResource{Resource: "secrets"}
	configMapsGR = schema.GroupResource{Resource: "configmaps"}
)

type objKey struct{ ns, name string }

// Registry holds the API objects. Every accepted write is durable in the
// checkpoint store before it is visible or acknowledged.
type Registry struct {
	nodeName string
	store    *checkpoint.Store
	runtime  PodRuntime

	mu         sync.RWMutex
	rv         uint64
	pods       map[objKey]*v1.Pod
	secrets    map[objKey]*v1.Secret
	configMaps map[objKey]*v1.ConfigMap
	Events     *EventLog
	hub        *watchHub // watch history and subscribers (watch.go)
}

// NewRegistry loads every stored object. Call SetRuntime, then Start.
func NewRegistry(nodeName string, store *checkpoint.Store) (*Registry, error) {
	r := &Registry{
		nodeName: nodeName, store: store,
		pods: map[objKey]*v1.Pod{}, secrets: map[objKey]*v1.Secret{}, configMaps: map[objKey]*v1.ConfigMap{},
		Events: NewEventLog(1000),
	}
	for _, rec := range store.List(checkpoint.KindPod) {
		p := &v1.Pod{}
		if ok, err := decodeRecord(store, rec, p); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		p.Status = v1.PodStatus{Phase: v1.PodPending}
		r.pods[objKey{p.Namespace, p.Name}] = p
		r.bumpFrom(p.ResourceVersion)
	}
	for _, rec := range store.List(checkpoint.KindSecret) {
		s := &v1.Secret{}
		if ok, err := decodeRecord(store, rec, s); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		r.secrets[objKey{s.Namespace, s.Name}] = s
		r.bumpFrom(s.ResourceVersion)
	}
	for _, rec := range store.List(checkpoint.KindConfigMap) {
		c := &v1.ConfigMap{}
		if ok, err := decodeRecord(store, rec, c); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		r.configMaps[objKey{c.Namespace, c.Name}] = c
		r.bumpFrom(c.ResourceVersion)
	}
	r.hub = newWatchHub(r.rv)
	return r, nil
}

func (r *Registry) bumpFrom(rv string) {
	if n, err := strconv.ParseUint(rv, 10, 64); err == nil && n > r.rv {
		r.rv = n
	}
}

func (r *Registry) nextRV() string {
	r.rv++
	return strconv.FormatUint(r.rv, 10)
}

// SetRuntime connects the registry to the pod runtime.
func (r *Registry) SetRuntime(rt PodRuntime) { r.runtime = rt }

// Start hands every stored pod to the runtime: pods marked for deletion
// resume their termination.
func (r *Registry) Start() {
	r.mu.RLock()
	pods := make([]*v1.Pod, 0, len(r.pods))
	for _, p := range r.pods {
		pods = append(pods, p.DeepCopy())
	}
	r.mu.RUnlock()
	for _, p := range pods {
		r.runtime.Sync(p)
		if p.DeletionTimestamp != nil {
			r.runtime.Terminate(p.UID, gracePeriod(p))
		}
	}
}

// DesiredUIDs lists the UIDs of every stored pod.
func (r *Registry) DesiredUIDs() map[types.UID]bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := map[types.UID]bool{}
	for _, p := range r.pods {
		out[p.UID] = true
	}
	return out
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

func (r *Registry) persist(kind checkpoint.Kind, ns, name string, obj runtime.Object) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if _, err := r.store.Put(kind, ns, name, data); err != nil {
		return r.checkpointFailed("write", err)
	}
	return nil
}

// checkpointFailed turns a store failure (disk full, read-only, I/O error)
// into a 500 Status and a node Event. The store guarantees nothing visible
// changed, so the client may simply retry once the disk is healthy.
func (r *Registry) checkpointFailed(op string, err error) error {
	r.Events.NodeEvent(r.nodeName, v1.EventTypeWarning, "CheckpointWriteFailed", fmt.Sprintf("checkpoint %s failed: %v", op, err))
	return apierrors.NewInternalError(fmt.Errorf("checkpoint %s failed, nothing was changed: %w", op, err))
}

// ---- pods

// ListPods returns pods in ns ("" for all), sorted by namespace and name.
func (r *Registry) ListPods(ns string) ([]v1.Pod, string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []v1.Pod
	for k, p := range r.pods {
		if ns == "" || k.ns == ns {
			out = append(out, *p.DeepCopy())
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, strconv.FormatUint(r.rv, 10)
}

// GetPod returns a copy of a pod.
func (r *Registry) GetPod(ns, name string) (*v1.Pod, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.pods[objKey{ns, name}]
	if !ok {
		return nil, apierrors.NewNotFound(podsGR, name)
	}
	return p.DeepCopy(), nil
}

// CreatePod validates, defaults, persists and starts a pod.
func (r *Registry) CreatePod(in *v1.Pod, dryRun bool) (*v1.Pod, error) {
	if in.Name == "" && in.GenerateName != "" {
		in.Name = in.GenerateName + string(uuid.NewUUID())[:5]
	}
	pod, err := shim.DefaultPod(in, r.nodeName)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := objKey{pod.Namespace, pod.Name}
	if _, ok := r.pods[k]; ok {
		return nil, apierrors.NewAlreadyExists(podsGR, pod.Name)
	}
	for _, other := range r.pods {
		if other.UID == pod.UID {
			return nil, apierrors.NewConflict(podsGR, pod.Name, fmt.Errorf("metadata.uid %s is already used by pod %s/%s", pod.UID, other.Namespace, other.Name))
		}
	}
	pod.ResourceVersion = ""
	pod.CreationTimestamp = metav1.Now()
	pod.Generation = 1
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = nil, nil
	if dryRun {
		return pod, nil
	}
	rv := r.nextRV()
	pod.ResourceVersion = rv
	if err := r.persist(checkpoint.KindPod, pod.Namespace, pod.Name, pod); err != nil {
		return nil, err
	}
	r.pods[k] = pod
	r.emit(watch.Added, nil, pod)
	r.runtime.Sync(pod.DeepCopy())
	return pod.DeepCopy(), nil
}

// UpdatePod replaces a pod's spec and metadata under the apiserver's update
// validation (most of the spec is immutable) and optimistic concurrency.
func (r *Registry) UpdatePod(in *v1.Pod, dryRun bool) (*v1.Pod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := objKey{in.Namespace, in.Name}
	old, ok := r.pods[k]
	if !ok {
		return nil, apierrors.NewNotFound(podsGR, in.Name)
	}
	if in.ResourceVersion != "" && in.ResourceVersion != old.ResourceVersion {
		return nil, apierrors.NewConflict(podsGR, in.Name, fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if in.UID != "" && in.UID != old.UID {
		//lint:ignore ST1005 the apiserver's exact message (apiserver/pkg/storage/interfaces.go)
		return nil, apierrors.NewConflict(podsGR, in.Name, fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", in.UID, old.UID))
	}
	updated := in.DeepCopy()
	updated.UID = old.UID
	updated.CreationTimestamp = old.CreationTimestamp
	updated.DeletionTimestamp, updated.DeletionGracePeriodSeconds = old.DeletionTimestamp, old.DeletionGracePeriodSeconds
	updated.Generation = old.Generation
	updated.Status = old.Status
	legacyscheme.Scheme.Default(updated)
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	for _, a := range []string{"kubernetes.io/config.hash", shim.AnnotationManagedBy} {
		updated.Annotations[a] = old.Annotations[a]
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
		return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, in.Name, errs)
	}
	if !apiequality.Semantic.DeepEqual(updated.Spec, old.Spec) {
		updated.Generation++
	}
	if dryRun {
		return updated, nil
	}
	updated.ResourceVersion = r.nextRV()
	if err := r.persist(checkpoint.KindPod, updated.Namespace, updated.Name, withoutStatus(updated)); err != nil {
		return nil, err
	}
	r.pods[k] = updated
	r.emit(watch.Modified, old, updated)
	r.runtime.Sync(updated.DeepCopy())
	return updated.DeepCopy(), nil
}

func withoutStatus(p *v1.Pod) *v1.Pod {
	c := p.DeepCopy()
	c.Status = v1.PodStatus{}
	return c
}

// DeletePod marks a pod for graceful deletion; the runtime finishes it.
func (r *Registry) DeletePod(ns, name string, opts *metav1.DeleteOptions, dryRun bool) (*v1.Pod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := objKey{ns, name}
	p, ok := r.pods[k]
	if !ok {
		return nil, apierrors.NewNotFound(podsGR, name)
	}
	if err := checkPreconditions(podsGR, name, opts, p.UID, p.ResourceVersion); err != nil {
		return nil, err
	}
	deleting := p.DeepCopy()
	grace := gracePeriod(deleting)
	if opts != nil && opts.GracePeriodSeconds != nil {
		grace = time.Duration(*opts.GracePeriodSeconds) * time.Second
	}
	if deleting.DeletionTimestamp != nil && deleting.DeletionGracePeriodSeconds != nil &&
		time.Duration(*deleting.DeletionGracePeriodSeconds)*time.Second <= grace {
		return deleting, nil // already terminating with a shorter grace
	}
	secs := int64(grace / time.Second)
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	deleting.DeletionGracePeriodSeconds = &secs
	if dryRun {
		return deleting, nil
	}
	deleting.ResourceVersion = r.nextRV()
	if err := r.persist(checkpoint.KindPod, ns, name, withoutStatus(deleting)); err != nil {
		return nil, err
	}
	r.pods[k] = deleting
	r.emit(watch.Modified, p, deleting)
	if !r.runtime.Terminate(deleting.UID, grace) {
		// No worker (never started): nothing runs, finish at once.
		go r.PodTerminated(shim.PodKey{Namespace: ns, Name: name}, deleting.UID)
	}
	return deleting.DeepCopy(), nil
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

// PodStatus implements shim.StatusSink.
func (r *Registry) PodStatus(key shim.PodKey, uid types.UID, st v1.PodStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[objKey{key.Namespace, key.Name}]
	if !ok || p.UID != uid || apiequality.Semantic.DeepEqual(p.Status, st) {
		return
	}
	c := p.DeepCopy()
	c.Status = st
	c.ResourceVersion = r.nextRV()
	r.pods[objKey{key.Namespace, key.Name}] = c
	r.emit(watch.Modified, p, c)
}

// PodTerminated implements shim.StatusSink: the pod's runtime objects are
// gone, so the API object goes too.
func (r *Registry) PodTerminated(key shim.PodKey, uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := objKey{key.Namespace, key.Name}
	p, ok := r.pods[k]
	if !ok || p.UID != uid {
		return
	}
	if err := r.store.Delete(checkpoint.KindPod, key.Namespace, key.Name); err != nil {
		// The pod stays Terminating in the API and in the checkpoint, so a
		// restart finishes the deletion; nothing runs any more.
		klog.ErrorS(err, "Removing terminated pod from the checkpoint failed", "pod", key.String())
		_ = r.checkpointFailed("delete", err)
		return
	}
	delete(r.pods, k)
	gone := p.DeepCopy()
	gone.ResourceVersion = r.nextRV()
	r.emit(watch.Deleted, p, gone)
}

// PodLogs streams a pod's container log.
func (r *Registry) PodLogs(ctx context.Context, ns, name string, opts *v1.PodLogOptions, out io.Writer) error {
	p, err := r.GetPod(ns, name)
	if err != nil {
		return err
	}
	return r.runtime.Logs(ctx, shim.RuntimePod(p, r.nodeName), opts, out)
}

// Namespaces lists the namespaces in use plus default and kube-system.
func (r *Registry) Namespaces() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	set := map[string]bool{metav1.NamespaceDefault: true, metav1.NamespaceSystem: true}
	for k := range r.pods {
		set[k.ns] = true
	}
	for k := range r.secrets {
		set[k.ns] = true
	}
	for k := range r.configMaps {
		set[k.ns] = true
	}
	out := make([]string, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}
