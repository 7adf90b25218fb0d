package podapi

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/checkpoint"
	btypes "github.com/bootlet/bootlet/types"
)

// PodRuntime is what the registry drives: runner.Manager.
type PodRuntime interface {
	Sync(pod *v1.Pod)
	Terminate(uid types.UID, gracePeriod time.Duration) bool
	Refresh()
	Logs(ctx context.Context, pod *v1.Pod, opts *v1.PodLogOptions, out io.Writer) error
}

// Registry holds the API objects: one generic Store per kind (kinds.go
// holds the per-kind hooks), sharing one lock, one resourceVersion counter
// and one watch hub. Every accepted write is durable in the checkpoint
// store before it is visible or acknowledged.
type Registry struct {
	nodeName string
	store    *checkpoint.Store
	runtime  PodRuntime

	c          *core
	pods       *Store[*v1.Pod]
	secrets    *Store[*v1.Secret]
	configMaps *Store[*v1.ConfigMap]
	Events     *EventLog
	resources  map[string]resource // by URL resource name
	policy     PodPolicy           // podpolicy.go
}

// NewRegistry loads every stored object. Call SetRuntime, then Start.
func NewRegistry(nodeName string, store *checkpoint.Store) (*Registry, error) {
	c := &core{store: store, hwm: &highWater{reserve: store.Reserve}}
	r := &Registry{nodeName: nodeName, store: store, c: c}
	c.failed = r.checkpointFailed
	r.pods = newStore(c, r.podKind())
	r.secrets = newStore(c, r.secretKind())
	r.configMaps = newStore(c, r.configMapKind())
	r.Events = newEventLog(c, DefaultEventLimit, DefaultEventTTL)
	r.resources = map[string]resource{"pods": r.pods, "secrets": r.secrets, "configmaps": r.configMaps, "events": r.Events.store}
	// Status is not checkpointed: a stored pod is Pending until its worker
	// reports.
	if err := loadKind(store, r.pods, func(p *v1.Pod) { p.Status = v1.PodStatus{Phase: v1.PodPending} }); err != nil {
		return nil, err
	}
	if err := loadKind(store, r.secrets, func(*v1.Secret) {}); err != nil {
		return nil, err
	}
	if err := loadKind(store, r.configMaps, func(*v1.ConfigMap) {}); err != nil {
		return nil, err
	}
	// The store's counter covers every resourceVersion handed out before,
	// status-only ones included (rv.go). Start one above it: every version
	// a client holds from before the restart is older than this
	// incarnation's watch history, so its watch gets 410 Gone and its
	// reflector relists (statuses were reset to Pending above).
	if rev := store.Revision(); rev > c.rv {
		c.rv = rev
	}
	c.rv++
	c.hwm.reserved = store.Revision()
	if err := c.hwm.cover(c.rv); err != nil {
		// A read-only or full disk: serve what is stored; writes retry.
		klog.ErrorS(err, "Reserving resourceVersions failed")
	}
	c.hub = newWatchHub(c.rv)
	return r, nil
}

// loadKind puts every stored object of st's kind back (no events).
func loadKind[T object](store *checkpoint.Store, st *Store[T], fix func(T)) error {
	for _, rec := range store.List(st.checkpoint) {
		o := st.newObj()
		if ok, err := decodeRecord(store, rec, o); err != nil {
			return err
		} else if ok {
			fix(o)
			st.load(o)
		}
	}
	return nil
}

// SetRuntime connects the registry to the pod runtime.
func (r *Registry) SetRuntime(rt PodRuntime) { r.runtime = rt }

// Start hands every stored pod to the runtime: pods marked for deletion
// resume their termination.
func (r *Registry) Start() {
	pods, _ := r.pods.List("")
	for _, p := range pods {
		r.runtime.Sync(p)
		if p.DeletionTimestamp != nil {
			r.runtime.Terminate(p.UID, gracePeriod(p))
		}
	}
}

// DesiredUIDs lists the UIDs of every stored pod.
func (r *Registry) DesiredUIDs() map[types.UID]bool {
	pods, _ := r.pods.List("")
	out := map[types.UID]bool{}
	for _, p := range pods {
		out[p.UID] = true
	}
	return out
}

// checkpointFailed turns a store failure (disk full, read-only, I/O error)
// into a 500 Status and a node Event. The store guarantees nothing visible
// changed, so the client may simply retry once the disk is healthy. It is
// called with the registry's writers' lock held: the event is recorded as soon as it
// is released, before the client gets its answer.
func (r *Registry) checkpointFailed(op string, err error) error {
	msg := fmt.Sprintf("checkpoint %s failed: %v", op, err)
	r.c.afterUnlock = append(r.c.afterUnlock, func() {
		r.Events.NodeEvent(r.nodeName, v1.EventTypeWarning, "CheckpointWriteFailed", msg)
	})
	return apierrors.NewInternalError(fmt.Errorf("checkpoint %s failed, nothing was changed: %w", op, err))
}

// WarmUp builds what the first write of each kind would otherwise build
// under the client's request: the managed-fields type converter and field
// managers (about 0.1 s here, over 1 s in a -race build). The daemon runs it
// while the runtime connects, and /readyz waits for it.
func (r *Registry) WarmUp() {
	r.pods.fm()
	r.secrets.fm()
	r.configMaps.fm()
	r.Events.store.fm()
}

// ---- typed entry points for the daemon (and the runner's sinks)

// ListPods returns pods in ns ("" for all), sorted by namespace and name.
func (r *Registry) ListPods(ns string) ([]v1.Pod, string) {
	pods, rv := r.pods.List(ns)
	out := make([]v1.Pod, len(pods))
	for i, p := range pods {
		out[i] = *p
	}
	return out, strconv.FormatUint(rv, 10)
}

// GetPod returns a copy of a pod.
func (r *Registry) GetPod(ns, name string) (*v1.Pod, error) { return r.pods.Get(ns, name) }

// CreatePod validates, defaults, persists and starts a pod.
func (r *Registry) CreatePod(in *v1.Pod, dryRun bool) (*v1.Pod, error) {
	return r.pods.Create(in, dryRun)
}

// UpdatePod replaces a pod as the API's PUT does (resourceVersion and UID
// preconditions, the pod update's validation: most of the spec is
// immutable, a container's image is not).
func (r *Registry) UpdatePod(in *v1.Pod) (*v1.Pod, error) {
	return r.pods.Update(in, false)
}

// DeletePod deletes a pod as the API's DELETE does (gracefully; a
// kubelet-static pod is released). The pivot withdraws bootstrap pods with it.
func (r *Registry) DeletePod(ns, name string, opts *metav1.DeleteOptions) (*v1.Pod, error) {
	return r.pods.Delete(ns, name, opts, false)
}

// DeleteSecret deletes a secret.
func (r *Registry) DeleteSecret(ns, name string) error {
	_, err := r.secrets.Delete(ns, name, nil, false)
	return err
}

// DeleteConfigMap deletes a configmap.
func (r *Registry) DeleteConfigMap(ns, name string) error {
	_, err := r.configMaps.Delete(ns, name, nil, false)
	return err
}

// PutSecret creates (create=true) or replaces a secret.
func (r *Registry) PutSecret(s *v1.Secret, create, dryRun bool) (*v1.Secret, error) {
	if create {
		return r.secrets.Create(s, dryRun)
	}
	return r.secrets.Update(s, dryRun)
}

// PutConfigMap creates (create=true) or replaces a configmap.
func (r *Registry) PutConfigMap(c *v1.ConfigMap, create, dryRun bool) (*v1.ConfigMap, error) {
	if create {
		return r.configMaps.Create(c, dryRun)
	}
	return r.configMaps.Update(c, dryRun)
}

// GetSecret implements cri.ObjectSource.
func (r *Registry) GetSecret(ns, name string) (*v1.Secret, error) { return r.secrets.Get(ns, name) }

// GetConfigMap implements cri.ObjectSource.
func (r *Registry) GetConfigMap(ns, name string) (*v1.ConfigMap, error) {
	return r.configMaps.Get(ns, name)
}

// PodStatus implements runner.StatusSink. Status is kept in memory only (the
// kubelet does not checkpoint it either); its resourceVersion is covered
// by the durable high-water mark.
func (r *Registry) PodStatus(key btypes.PodKey, uid types.UID, st v1.PodStatus) {
	r.pods.Mutate(objKey{key.Namespace, key.Name}, uid, false, func(p *v1.Pod) (*v1.Pod, bool) {
		if apiequality.Semantic.DeepEqual(p.Status, st) {
			return nil, false
		}
		p.Status = st
		return p, true
	})
}

// PodTerminated implements runner.StatusSink: the pod's runtime objects are
// gone, so the API object goes too.
func (r *Registry) PodTerminated(key btypes.PodKey, uid types.UID) {
	if err := r.pods.Remove(objKey{key.Namespace, key.Name}, uid); err != nil {
		// The pod stays Terminating in the API and in the checkpoint, so a
		// restart finishes the deletion; nothing runs any more.
		klog.ErrorS(err, "Removing terminated pod from the checkpoint failed", "pod", key.String())
	}
}

// PodLogs streams a pod's container log.
func (r *Registry) PodLogs(ctx context.Context, ns, name string, opts *v1.PodLogOptions, out io.Writer) error {
	p, err := r.GetPod(ns, name)
	if err != nil {
		return err
	}
	return r.runtime.Logs(ctx, btypes.RuntimePod(p, r.nodeName), opts, out)
}

// Namespaces lists the namespaces in use plus default and kube-system.
func (r *Registry) Namespaces() []string {
	r.c.mu.RLock()
	set := map[string]bool{metav1.NamespaceDefault: true, metav1.NamespaceSystem: true}
	for _, res := range []resource{r.pods, r.secrets, r.configMaps} {
		for k := range res.snapshot() {
			set[k.ns] = true
		}
	}
	r.c.mu.RUnlock()
	out := make([]string, 0, len(set))
	for ns := range set {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// prepareMeta fills the server-side metadata of a new object.
func prepareMeta(m metav1.Object) {
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(m.GetGenerateName() + string(uuid.NewUUID())[:5])
	}
	if m.GetNamespace() == "" {
		m.SetNamespace(metav1.NamespaceDefault)
	}
}

var podsGR = schema.GroupResource{Resource: "pods"}
