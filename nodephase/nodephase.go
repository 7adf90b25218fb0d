package nodephase

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/checkpointer"
	"github.com/bootlet/bootlet/pivot"
	btypes "github.com/bootlet/bootlet/types"
)

// conditionReason is the phase as a condition reason: "self-hosted" →
// "SelfHosted".
func conditionReason(p btypes.NodePhase) string {
	var b strings.Builder
	for _, w := range strings.Split(string(p), "-") {
		if w != "" {
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
		}
	}
	return b.String()
}

// Source gathers the phase's facts from the daemon's parts at
// each call (the facts are cheap: a registry list, an atomic, a small
// file) and remembers when the phase last changed, for the condition's
// lastTransitionTime. Any field may be nil.
type Source struct {
	HandoffConfigured, PivotConfigured, CheckpointerConfigured bool
	// Pods lists bootlet's registry (podapi.Registry.ListPods).
	Pods func(ns string) ([]v1.Pod, string)
	// KubeletUp is the handoff's last healthz answer (Manager.KubeletUp;
	// nil until the runtime answered and the manager exists).
	KubeletUp func() bool
	// PivotDoneFile is the pivot record's path (PivotDoneFile of the root
	// dir; "" none).
	PivotDoneFile string
	// Checkpointer is the checkpointer's status (Checkpointer.Status).
	Checkpointer func() checkpointer.Status
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Events records each change as a Normal node event NodePhaseChanged
	// on NodeName (nil: none).
	Events   checkpointer.NodeEventSink
	NodeName string

	mu    sync.Mutex // leaf, never held across the facts' I/O or Events
	last  btypes.NodePhase
	since time.Time
}

// Run observes the phase every period until ctx ends, so that its
// lastTransitionTime is when it changed, not when someone first asked, and
// each change is logged and recorded as an event while nobody asks.
func (s *Source) Run(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		s.Observe()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Observe gathers the facts and decides. It also returns when the phase
// last changed (the first Observe counts as a change).
func (s *Source) Observe() (Decision, time.Time) {
	f := Facts{HandoffConfigured: s.HandoffConfigured, PivotConfigured: s.PivotConfigured, CheckpointerConfigured: s.CheckpointerConfigured}
	if s.Pods != nil {
		f.Pods, _ = s.Pods("")
	}
	if s.KubeletUp != nil {
		f.KubeletUp = s.KubeletUp()
	}
	if s.PivotDoneFile != "" {
		f.PivotDone, f.PivotDoneErr = pivot.ReadDone(s.PivotDoneFile)
	}
	if s.Checkpointer != nil {
		f.Checkpointer = s.Checkpointer()
	}
	r := Decide(f)
	now := s.now()
	s.mu.Lock()
	from, changed := s.last, r.Phase != s.last || s.since.IsZero()
	if changed {
		s.last, s.since = r.Phase, now
	}
	since := s.since
	s.mu.Unlock()
	switch {
	case changed && s.Events != nil: // the sink logs it too
		msg := fmt.Sprintf("%s: %s", r.Phase, r.Reason)
		if from != "" {
			msg = fmt.Sprintf("%s (was %s): %s", r.Phase, from, r.Reason)
		}
		s.Events.NodeEvent(s.NodeName, v1.EventTypeNormal, "NodePhaseChanged", msg)
	case changed:
		klog.InfoS("Node phase changed", "from", from, "to", r.Phase, "reason", r.Reason)
	}
	return r, since
}

func (s *Source) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// UpdateNode records the phase on bootlet's Node object: the annotation
// bootlet.dev/phase and the BootletPhase condition (podapi serves the
// object; podapi.Server.SetNodeStatus).
func (s *Source) UpdateNode(n *v1.Node) {
	r, since := s.Observe()
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[btypes.AnnotationPhase] = string(r.Phase)
	n.Status.Conditions = append(n.Status.Conditions, v1.NodeCondition{
		Type: btypes.NodeConditionPhase, Status: v1.ConditionTrue, Reason: conditionReason(r.Phase), Message: r.Reason,
		LastHeartbeatTime: metav1.NewTime(s.now()), LastTransitionTime: metav1.NewTime(since),
	})
}
