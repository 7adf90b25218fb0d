package nodephase

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootlet/bootlet/checkpointer"
	"github.com/bootlet/bootlet/pivot"
	btypes "github.com/bootlet/bootlet/types"
)

func phasePod(name string, owner btypes.Owner, checkpointOf string, deleting bool) v1.Pod {
	p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name, Annotations: map[string]string{}, Labels: map[string]string{}}}
	if owner != "" {
		p.Annotations[btypes.AnnotationOwner] = string(owner)
	}
	if checkpointOf != "" {
		p.Annotations[btypes.AnnotationCheckpointOf] = checkpointOf
		p.Labels[btypes.LabelCheckpointOf] = "x"
	}
	if deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

func TestDecideNodePhase(t *testing.T) {
	done := &pivot.DoneRecord{CompletedAt: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), Components: []string{"kube-apiserver", "kube-scheduler"}}
	stored := checkpointer.Status{Components: map[string]checkpointer.ComponentStatus{"kube-system/kube-apiserver": {StoredHash: "abc"}, "kube-system/other": {}}}
	all := Facts{HandoffConfigured: true, PivotConfigured: true, CheckpointerConfigured: true}
	with := func(mod func(*Facts)) Facts {
		f := all
		mod(&f)
		return f
	}
	etcd := phasePod("etcd", btypes.OwnerKubeletStatic, "", false)
	cases := []struct {
		name  string
		facts Facts
		want  btypes.NodePhase
		// reason must contain each of these.
		reason []string
	}{
		{"nothing configured", Facts{Pods: []v1.Pod{phasePod("a", "", "", false)}}, btypes.NodePhaseStandalone, []string{"1 bootlet"}},
		{"nothing configured, no pod", Facts{}, btypes.NodePhaseStandalone, []string{"(none)"}},
		{"first boot, no kubelet yet", with(func(f *Facts) {
			f.Pods = []v1.Pod{phasePod("etcd", "", "", false), phasePod("kube-apiserver", btypes.OwnerBootlet, "", false)}
		}), btypes.NodePhaseBootstrap, []string{"2 bootlet", "no kubelet answers yet"}},
		{"pivot and checkpointer but no handoff", with(func(f *Facts) {
			f.HandoffConfigured = false
			f.KubeletUp = true // cannot be: the handoff's poll is off; ignored
		}), btypes.NodePhaseBootstrap, []string{"no handoff to a kubelet configured"}},
		{"kubelet up, nothing adopted yet", with(func(f *Facts) {
			f.KubeletUp = true
			f.Pods = []v1.Pod{phasePod("etcd", "", "", false)}
		}), btypes.NodePhaseHandoff, []string{"the kubelet answers", "1 bootlet", "pivot not complete"}},
		{"adopted", with(func(f *Facts) {
			f.KubeletUp = true
			f.Pods = []v1.Pod{etcd, phasePod("kube-apiserver", btypes.OwnerKubeletStatic, "", false)}
		}), btypes.NodePhaseHandoff, []string{"2 kubelet-static"}},
		{"adopted, kubelet restarting", with(func(f *Facts) {
			f.Pods = []v1.Pod{etcd}
		}), btypes.NodePhaseHandoff, []string{"the kubelet does not answer"}},
		{"pivot under way: a bootstrap pod released", with(func(f *Facts) {
			f.KubeletUp = true
			f.Pods = []v1.Pod{etcd, phasePod("kube-scheduler", btypes.OwnerReleased, "", true)}
		}), btypes.NodePhaseHandoff, []string{"1 kubelet-static, 1 released"}},
		{"handoff without pivot", with(func(f *Facts) {
			f.PivotConfigured, f.CheckpointerConfigured = false, false
			f.KubeletUp = true
			f.Pods = []v1.Pod{etcd}
		}), btypes.NodePhaseHandoff, []string{"no pivot configured"}},
		{"pivot done, checkpoints held", with(func(f *Facts) {
			f.KubeletUp = true
			f.PivotDone = done
			f.Pods = []v1.Pod{etcd}
			f.Checkpointer = stored
		}), btypes.NodePhaseSelfHosted, []string{"kube-apiserver, kube-scheduler completed at 2026-11-23T10:00:00Z", "checkpointer only, holding checkpoints of kube-system/kube-apiserver;", "1 kubelet-static"}},
		{"pivot done, checkpointer not started yet", with(func(f *Facts) { f.PivotDone = done }), btypes.NodePhaseSelfHosted, []string{"holding no checkpoint yet"}},
		{"pivot done, no checkpointer", with(func(f *Facts) {
			f.PivotDone, f.CheckpointerConfigured = done, false
		}), btypes.NodePhaseSelfHosted, []string{"no checkpointer configured"}},
		{"pivot done, a checkpoint runs after a reboot", with(func(f *Facts) {
			f.PivotDone = done
			f.KubeletUp = true
			f.Pods = []v1.Pod{etcd, phasePod("kube-apiserver-checkpoint", btypes.OwnerKubeletStatic, "kube-system/kube-apiserver", false)}
			f.Checkpointer = stored
		}), btypes.NodePhaseCheckpointActive, []string{"kube-system/kube-apiserver (owner kubelet-static)", "the apiserver is unreachable"}},
		{"checkpoint runs, apiserver back", with(func(f *Facts) {
			f.PivotDone = done
			f.Pods = []v1.Pod{phasePod("kube-apiserver-checkpoint", "", "kube-system/kube-apiserver", false)}
			f.Checkpointer = checkpointer.Status{Reachable: true}
		}), btypes.NodePhaseCheckpointActive, []string{"(owner bootlet)", "the apiserver answers"}},
		{"checkpoint being withdrawn", with(func(f *Facts) {
			f.PivotDone = done
			f.Pods = []v1.Pod{etcd, phasePod("kube-apiserver-checkpoint", btypes.OwnerReleased, "kube-system/kube-apiserver", true)}
		}), btypes.NodePhaseSelfHosted, []string{"1 kubelet-static"}},
		{"annotation without the label is not a checkpoint pod", with(func(f *Facts) {
			p := phasePod("imposter", btypes.OwnerBootlet, "kube-system/kube-apiserver", false)
			delete(p.Labels, btypes.LabelCheckpointOf)
			f.Pods = []v1.Pod{p}
		}), btypes.NodePhaseBootstrap, []string{"1 bootlet"}},
		{"pivot elsewhere, checkpoints held", with(func(f *Facts) {
			f.PivotConfigured = false
			f.KubeletUp = true
			f.Pods = []v1.Pod{etcd}
			f.Checkpointer = stored
		}), btypes.NodePhaseSelfHosted, []string{"no pivot configured here"}},
		{"unreadable pivot record is none", with(func(f *Facts) {
			f.PivotDoneErr = errors.New("bad json")
			f.KubeletUp = true
		}), btypes.NodePhaseHandoff, []string{"unreadable, taken as none: bad json"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Decide(c.facts)
			if got.Phase != c.want {
				t.Fatalf("phase %q (%s), want %q", got.Phase, got.Reason, c.want)
			}
			for _, s := range c.reason {
				if !strings.Contains(got.Reason, s) {
					t.Errorf("reason %q lacks %q", got.Reason, s)
				}
			}
		})
	}
}

func TestConditionReason(t *testing.T) {
	for p, want := range map[btypes.NodePhase]string{btypes.NodePhaseSelfHosted: "SelfHosted", btypes.NodePhaseCheckpointActive: "CheckpointActive", btypes.NodePhaseBootstrap: "Bootstrap"} {
		if got := conditionReason(p); got != want {
			t.Errorf("conditionReason(%q) = %q, want %q", p, got, want)
		}
	}
}

// TestNodePhaseSource checks the facts are read from the daemon's parts and
// that lastTransitionTime moves only when the phase changes.
func TestNodePhaseSource(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	up := false
	pods := []v1.Pod{phasePod("etcd", "", "", false)}
	events := &phaseEvents{}
	s := &Source{HandoffConfigured: true, PivotConfigured: true,
		Pods:          func(string) ([]v1.Pod, string) { return pods, "1" },
		KubeletUp:     func() bool { return up },
		PivotDoneFile: pivot.RecordPath(dir),
		Now:           func() time.Time { return now },
		Events:        events, NodeName: "node1"}
	n := &v1.Node{}
	s.UpdateNode(n)
	if n.Annotations[btypes.AnnotationPhase] != "bootstrap" || len(n.Status.Conditions) != 1 {
		t.Fatalf("node %+v", n)
	}
	c := n.Status.Conditions[0]
	if c.Type != btypes.NodeConditionPhase || c.Status != v1.ConditionTrue || c.Reason != "Bootstrap" || !c.LastTransitionTime.Time.Equal(now) {
		t.Fatalf("condition %+v", c)
	}

	now = now.Add(time.Minute)
	if r, since := s.Observe(); r.Phase != btypes.NodePhaseBootstrap || !since.Equal(now.Add(-time.Minute)) {
		t.Fatalf("unchanged phase: %v since %v", r, since)
	}
	up = true
	pods[0].Annotations[btypes.AnnotationOwner] = string(btypes.OwnerKubeletStatic)
	if r, since := s.Observe(); r.Phase != btypes.NodePhaseHandoff || !since.Equal(now) {
		t.Fatalf("adopted: %v since %v", r, since)
	}
	if err := pivot.WriteDone(pivot.RecordPath(dir), pivot.DoneRecord{CompletedAt: now, Components: []string{"kube-apiserver"}}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Observe(); r.Phase != btypes.NodePhaseSelfHosted {
		t.Fatalf("pivot recorded: %v", r)
	}
	s.Observe()
	want := []string{"node1 Normal NodePhaseChanged bootstrap: ", "node1 Normal NodePhaseChanged handoff (was bootstrap): ", "node1 Normal NodePhaseChanged self-hosted (was handoff): "}
	if len(events.got) != len(want) {
		t.Fatalf("events %q, want one per change", events.got)
	}
	for i := range want {
		if !strings.HasPrefix(events.got[i], want[i]) {
			t.Errorf("event %d: %q, want %q...", i, events.got[i], want[i])
		}
	}
}

type phaseEvents struct{ got []string }

func (e *phaseEvents) NodeEvent(node, eventType, reason, message string) {
	e.got = append(e.got, strings.Join([]string{node, eventType, reason, message}, " "))
}

// TestNodePhaseSourceRun: Run observes on its own until ctx ends, and
// may run beside requests (go test -race).
func TestNodePhaseSourceRun(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	s := &Source{Pods: func(string) ([]v1.Pod, string) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return nil, "1"
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx, time.Millisecond); close(done) }()
	for i := 0; i < 20; i++ {
		s.UpdateNode(&v1.Node{})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := calls
		mu.Unlock()
		if n >= 25 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Run observed %d times", n-20)
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if r, _ := s.Observe(); r.Phase != btypes.NodePhaseStandalone {
		t.Fatal(r)
	}
}
