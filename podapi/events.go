package podapi

import (
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// Events are bounded like the apiserver's (--event-ttl, 1h by default):
// an event goes an hour after its last occurrence, and past the limit the
// oldest go first. Each removal is a DELETED watch event, as an etcd lease
// expiry is.
var (
	DefaultEventTTL   = time.Hour
	DefaultEventLimit = 1000
)

// EventLog records core/v1 Events in the generic Store (in memory only),
// compacting repeats into a count the way the kubelet's event correlator
// does.
type EventLog struct {
	store  *Store[*v1.Event]
	limit  int
	ttl    time.Duration
	now    func() time.Time
	seq    int
	order  []objKey // creation order, oldest first; guarded by the core lock
	Source string

	janitor sync.Once
}

func newEventLog(c *core, limit int, ttl time.Duration) *EventLog {
	gvk := v1.SchemeGroupVersion.WithKind("Event")
	k := &kind[*v1.Event]{
		resource: "events", gvk: gvk,
		newObj:  func() *v1.Event { return &v1.Event{} },
		newList: func() runtime.Object { return &v1.EventList{} },
		fields:  eventFields,
		fm:      lazyFieldManager(gvk, nil),
	}
	return &EventLog{store: newStore(c, k), limit: limit, ttl: ttl, now: time.Now, Source: "bootlet"}
}

// Event implements runner.EventSink.
func (l *EventLog) Event(pod *v1.Pod, eventType, reason, message string) {
	if pod == nil {
		return
	}
	klog.V(2).InfoS("Event", "pod", klog.KObj(pod), "type", eventType, "reason", reason, "message", message)
	l.record(v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}, eventType, reason, message)
}

// NodeEvent records an event about the node itself (runtime and disk
// health, quarantined checkpoints), in the default namespace as the kubelet
// does for its Node events.
func (l *EventLog) NodeEvent(node, eventType, reason, message string) {
	klog.InfoS("Node event", "type", eventType, "reason", reason, "message", message)
	l.record(v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: node, UID: types.UID(node)}, eventType, reason, message)
}

func (l *EventLog) record(ref v1.ObjectReference, eventType, reason, message string) {
	l.janitor.Do(func() { go l.expireEvery(time.Minute) })
	c := l.store.c
	c.lock()
	defer c.unlock()
	now := metav1.NewTime(l.now())
	l.expireLocked(now.Time)
	// A repeat of one of the last 20 events counts up instead.
	for i := len(l.order) - 1; i >= 0 && i >= len(l.order)-20; i-- {
		old := l.store.items[l.order[i]]
		if old.InvolvedObject.UID == ref.UID && old.Reason == reason && old.Message == message {
			e := old.DeepCopy()
			e.Count++
			e.LastTimestamp = now
			l.putLocked(watch.Modified, old, e)
			return
		}
	}
	l.seq++
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	e := &v1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x%04d", ref.Name, now.UnixNano(), l.seq%10000),
			Namespace: ns, CreationTimestamp: now, UID: uuid.NewUUID(),
		},
		InvolvedObject: ref,
		Reason:         reason, Message: message, Type: eventType, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source: v1.EventSource{Component: l.Source},
	}
	if !l.putLocked(watch.Added, nil, e) {
		return
	}
	l.order = append(l.order, keyOf(e))
	for len(l.order) > l.limit {
		l.removeLocked(0)
	}
}

// putLocked stores an event, or drops it with a log line. A failed store
// write queues a CheckpointWriteFailed event; for an event's own write that
// is dropped too, or a full disk would record events about failing to
// record events for ever. Call with the core's writer lock (wmu) held.
func (l *EventLog) putLocked(typ watch.EventType, old, e *v1.Event) bool {
	c := l.store.c
	queued := len(c.afterUnlock)
	if err := l.store.put(typ, old, e, false); err != nil {
		c.afterUnlock = c.afterUnlock[:queued]
		klog.ErrorS(err, "Dropping an event", "reason", e.Reason)
		return false
	}
	return true
}

// expireLocked removes the events whose last occurrence is older than the
// TTL. Call with the core's writer lock (wmu) held.
func (l *EventLog) expireLocked(now time.Time) {
	for i := 0; i < len(l.order); {
		if e := l.store.items[l.order[i]]; e != nil && now.Sub(e.LastTimestamp.Time) < l.ttl {
			i++
			continue
		}
		l.removeLocked(i)
	}
}

func (l *EventLog) removeLocked(i int) {
	k := l.order[i]
	l.order = append(l.order[:i], l.order[i+1:]...)
	if e, ok := l.store.items[k]; ok {
		if _, err := l.store.remove(e); err != nil {
			klog.ErrorS(err, "Removing an expired event", "event", k)
		}
	}
}

func (l *EventLog) expireEvery(d time.Duration) {
	for range time.Tick(d) {
		c := l.store.c
		c.lock()
		l.expireLocked(l.now())
		c.unlock()
	}
}

func eventFields(e *v1.Event) fields.Set {
	return fields.Set{
		"metadata.name": e.Name, "metadata.namespace": e.Namespace,
		"involvedObject.kind": e.InvolvedObject.Kind, "involvedObject.namespace": e.InvolvedObject.Namespace,
		"involvedObject.name": e.InvolvedObject.Name, "involvedObject.uid": string(e.InvolvedObject.UID),
		"involvedObject.apiVersion": e.InvolvedObject.APIVersion, "involvedObject.resourceVersion": e.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath": e.InvolvedObject.FieldPath, "reason": e.Reason, "reportingComponent": e.ReportingController,
		"source": e.Source.Component, "type": e.Type,
	}
}
