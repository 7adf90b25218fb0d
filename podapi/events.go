package podapi

import (
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// EventLog keeps the newest core/v1 Events in a bounded ring, compacting
// repeats into a count the way the kubelet's event correlator does.
type EventLog struct {
	mu     sync.Mutex
	max    int
	events []v1.Event
	seq    int
	Source string
}

// NewEventLog keeps at most max events.
func NewEventLog(max int) *EventLog { return &EventLog{max: max, Source: "bootlet"} }

// Event implements shim.EventSink.
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
	l.mu.Lock()
	defer l.mu.Unlock()
	now := metav1.NewTime(time.Now())
	for i := len(l.events) - 1; i >= 0 && i >= len(l.events)-20; i-- {
		e := &l.events[i]
		if e.InvolvedObject.UID == ref.UID && e.Reason == reason && e.Message == message {
			e.Count++
			e.LastTimestamp = now
			return
		}
	}
	l.seq++
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := v1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:      fmt.Sprintf("%s.%x%04d", ref.Name, now.UnixNano(), l.seq%10000),
			Namespace: ns, CreationTimestamp: now,
		},
		InvolvedObject: ref,
		Reason:         reason, Message: message, Type: eventType, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source: v1.EventSource{Component: l.Source},
	}
	l.events = append(l.events, ev)
	if len(l.events) > l.max {
		l.events = append([]v1.Event(nil), l.events[len(l.events)-l.max:]...)
	}
}

// List returns events in ns ("" for all), oldest first.
func (l *EventLog) List(ns string) []v1.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []v1.Event
	for _, e := range l.events {
		if ns == "" || e.Namespace == ns {
			out = append(out, e)
		}
	}
	return out
}
