package checkpointer

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/utils/ptr"

	btypes "github.com/bootlet/bootlet/types"
)

var testTiming = Timing{ActivateAfter: 10 * time.Second, ActivateAfterStart: 2 * time.Second, WithdrawAfter: 20 * time.Second,
	FlapWindow: 10 * time.Minute, MaxWithdrawAfter: 5 * time.Minute}

func TestDecideCheckpoint(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	up := World{Now: now, Reachable: true, Fresh: true}
	upStale := World{Now: now, Reachable: true, Fresh: false}
	down := func(d time.Duration) World { return World{Now: now, UnreachableSince: ago(d)} }
	yes, no := ptr.To(true), ptr.To(false)
	// An active checkpoint started 2 min ago; the self-hosted pod turned
	// Ready 1 min ago (after it).
	active := Facts{Stored: "h1", Active: true, ActiveSince: ago(2 * time.Minute), SelfHosted: true, SelfHostedReadySince: ago(time.Minute)}

	for _, tc := range []struct {
		name    string
		w       World
		c       Facts
		mem     Memory
		want    []Action
		wantMem func(Memory) bool
	}{
		// 1. Store / advance.
		{name: "first Ready pod is stored", w: up, c: Facts{Candidate: "h1", SelfHosted: true}, want: []Action{ActionStore}},
		{name: "an upgrade moves the checkpoint forward", w: up, c: Facts{Stored: "h1", Candidate: "h2", SelfHosted: true}, want: []Action{ActionStore}},
		{name: "an upgrade step not through its gate: the checkpoint stays", w: up,
			c: Facts{Stored: "h1", Candidate: "h2", SelfHosted: true, CandidateUngated: "kube-apiserver on n1: v1.36.3 -> v1.37.2"}},
		{name: "an ungated version is stored when nothing else is", w: up,
			c: Facts{Candidate: "h2", SelfHosted: true, CandidateUngated: "kube-apiserver on n1: v1.36.3 -> v1.37.2"}, want: []Action{ActionStore}},
		{name: "same checkpoint: nothing to write", w: up, c: Facts{Stored: "h1", Candidate: "h1", SelfHosted: true}},
		{name: "no Ready pod (a broken upgrade): the checkpoint stays", w: up, c: Facts{Stored: "h1", SelfHosted: true}},
		{name: "a list that failed stores nothing", w: upStale, c: Facts{Stored: "h1", Candidate: "h2"}},
		{name: "unreachable stores nothing", w: down(time.Second), c: Facts{Stored: "h1", Candidate: "h2"}},
		{name: "an active checkpoint still moves forward (its pod keeps running)", w: up,
			c:    Facts{Stored: "h1", Candidate: "h2", Active: true, ActiveSince: ago(time.Minute), SelfHosted: true, SelfHostedReadySince: ago(30 * time.Second)},
			want: []Action{ActionStore}},

		// 2. Activate.
		{name: "unreachable past the grace period: activate", w: down(11 * time.Second), c: Facts{Stored: "h1"}, want: []Action{ActionActivate}},
		{name: "unreachable exactly the grace period: activate", w: down(10 * time.Second), c: Facts{Stored: "h1"}, want: []Action{ActionActivate}},
		{name: "unreachable within the grace period: wait (a restarting apiserver)", w: down(5 * time.Second), c: Facts{Stored: "h1"}},
		{name: "unreachable but nothing stored", w: down(time.Hour), c: Facts{}},
		{name: "never reachable since start (a reboot): the short delay", w: World{Now: now, UnreachableSince: ago(2 * time.Second), NeverReachable: true},
			c: Facts{Stored: "h1"}, want: []Action{ActionActivate}},
		{name: "never reachable since start, within the short delay", w: World{Now: now, UnreachableSince: ago(time.Second), NeverReachable: true},
			c: Facts{Stored: "h1"}},
		{name: "reachable once since start: the full delay again", w: World{Now: now, UnreachableSince: ago(5 * time.Second)},
			c: Facts{Stored: "h1"}},
		{name: "unreachable, but the runtime runs a verified self-hosted pod that answers", w: down(time.Hour), c: Facts{Stored: "h1", LocalReady: yes}},
		{name: "unreachable, the runtime runs none that answers: activate", w: down(time.Hour), c: Facts{Stored: "h1", LocalReady: no}, want: []Action{ActionActivate}},
		{name: "reachable: never activate", w: up, c: Facts{Stored: "h1"}},
		{name: "reachable but the list failed: never activate", w: upStale, c: Facts{Stored: "h1"}},
		{name: "already active: nothing more", w: down(time.Hour), c: Facts{Stored: "h1", Active: true, ActiveSince: ago(time.Minute)}},

		// 3. Withdraw.
		{name: "self-hosted Ready long enough: withdraw", w: up, c: active, mem: Memory{ReadySince: ago(21 * time.Second)},
			want: []Action{ActionWithdraw}, wantMem: func(m Memory) bool {
				return len(m.Withdrawals) == 1 && m.Withdrawals[0].Equal(now) && m.ReadySince.IsZero()
			}},
		{name: "self-hosted Ready, not long enough: wait", w: up, c: active, mem: Memory{ReadySince: ago(5 * time.Second)},
			wantMem: func(m Memory) bool { return m.ReadySince.Equal(ago(5 * time.Second)) }},
		{name: "first corroborated tick starts the clock", w: up, c: active,
			wantMem: func(m Memory) bool { return m.ReadySince.Equal(now) }},
		{name: "only instance (no Ready self-hosted pod): keep", w: up, c: Facts{Stored: "h1", Active: true, ActiveSince: ago(time.Hour), SelfHosted: true},
			mem: Memory{ReadySince: ago(time.Hour)}, wantMem: func(m Memory) bool { return m.ReadySince.IsZero() }},
		{name: "no self-hosted pod at all: keep", w: up, c: Facts{Stored: "h1", Active: true, ActiveSince: ago(time.Hour)}},
		{name: "Ready status from before the checkpoint (stale etcd after a reboot), kubelet silent: keep",
			w: up, c: Facts{Stored: "h1", Active: true, ActiveSince: ago(time.Minute), SelfHosted: true, SelfHostedReadySince: ago(time.Hour)},
			mem: Memory{ReadySince: ago(time.Hour)}, wantMem: func(m Memory) bool { return m.ReadySince.IsZero() }},
		{name: "stale Ready status, the local view (asked only while unreachable) does not corroborate: keep",
			w: up, c: Facts{Stored: "h1", Active: true, ActiveSince: ago(time.Minute), SelfHosted: true, SelfHostedReadySince: ago(time.Hour), LocalReady: yes},
			mem: Memory{ReadySince: ago(30 * time.Second)}, wantMem: func(m Memory) bool { return m.ReadySince.IsZero() }},
		{name: "Ready status from before the checkpoint, the runtime runs the pod: withdraw",
			w: up, c: Facts{Stored: "h1", Active: true, ActiveSince: ago(time.Minute), SelfHosted: true, SelfHostedReadySince: ago(time.Hour), RuntimeRunning: yes},
			mem: Memory{ReadySince: ago(30 * time.Second)}, want: []Action{ActionWithdraw}},
		{name: "Ready status from before the checkpoint, the runtime does not run the pod (a reboot): keep",
			w: up, c: Facts{Stored: "h1", Active: true, ActiveSince: ago(time.Minute), SelfHosted: true, SelfHostedReadySince: ago(time.Hour), RuntimeRunning: no},
			mem: Memory{ReadySince: ago(30 * time.Second)}, wantMem: func(m Memory) bool { return m.ReadySince.IsZero() }},
		{name: "the runtime runs it but the API has no Ready pod: keep (Ready comes from the API)",
			w: up, c: Facts{Stored: "h1", Active: true, ActiveSince: ago(time.Minute), SelfHosted: true, RuntimeRunning: yes},
			mem: Memory{ReadySince: ago(time.Hour)}},
		// A shared readiness port (the apiserver, SO_REUSEPORT): only the
		// self-hosted pod's own answer counts.
		{name: "shared port, the pod's own process does not answer: keep, the clock stops",
			w: up, c: func() Facts {
				c := active
				c.RuntimeRunning, c.SelfHostedServes = yes, no
				return c
			}(),
			mem: Memory{ReadySince: ago(time.Hour)}, wantMem: func(m Memory) bool { return m.ReadySince.IsZero() }},
		{name: "shared port, the pod's own process answers: withdraw after the wait",
			w: up, c: func() Facts { c := active; c.SelfHostedServes = yes; return c }(),
			mem: Memory{ReadySince: ago(21 * time.Second)}, want: []Action{ActionWithdraw}},
		{name: "shared port, own process answers, stale Ready status: its answer corroborates",
			w: up, c: Facts{Stored: "h1", Active: true, ActiveSince: ago(time.Minute), SelfHosted: true, SelfHostedReadySince: ago(time.Hour), SelfHostedServes: yes},
			mem: Memory{ReadySince: ago(30 * time.Second)}, want: []Action{ActionWithdraw}},
		{name: "active, apiserver unreachable: never withdraw", w: down(time.Hour), c: active, mem: Memory{ReadySince: ago(time.Hour)},
			wantMem: func(m Memory) bool { return m.ReadySince.IsZero() }},
		{name: "active, list failed: never withdraw", w: upStale, c: active, mem: Memory{ReadySince: ago(time.Hour)}},
		{name: "active and terminating: nothing", w: up, c: Facts{Stored: "h1", Active: true, ActiveTerminating: true, ActiveSince: ago(2 * time.Minute), SelfHosted: true, SelfHostedReadySince: ago(time.Minute)},
			mem: Memory{ReadySince: ago(time.Hour)}},

		// Activated at bootlet's start (a reboot): nothing flapped, the
		// self-hosted pod's own answer withdraws it at once.
		{name: "activated at start, shared port, its own process answers: withdraw at once",
			w: up, c: func() Facts { c := active; c.ActiveCause = CauseStart; c.SelfHostedServes = yes; return c }(),
			want: []Action{ActionWithdraw}, wantMem: func(m Memory) bool {
				return len(m.Withdrawals) == 1 && m.Withdrawals[0].Equal(now) && m.ReadySince.IsZero()
			}},
		{name: "activated at start, own process answers, stale Ready status: withdraw at once",
			w: up, c: Facts{Stored: "h1", Active: true, ActiveSince: ago(time.Minute), ActiveCause: CauseStart, SelfHosted: true,
				SelfHostedReadySince: ago(time.Hour), SelfHostedServes: yes},
			want: []Action{ActionWithdraw}},
		{name: "activated at start, its own process does not answer: keep",
			w: up, c: func() Facts {
				c := active
				c.ActiveCause, c.RuntimeRunning, c.SelfHostedServes = CauseStart, yes, no
				return c
			}(),
			mem: Memory{ReadySince: ago(time.Hour)}, wantMem: func(m Memory) bool { return m.ReadySince.IsZero() }},
		{name: "activated at start, no Ready self-hosted pod: keep (the only instance)",
			w: up, c: Facts{Stored: "h1", Active: true, ActiveSince: ago(time.Minute), ActiveCause: CauseStart, SelfHosted: true}},
		{name: "activated at start, apiserver unreachable: never withdraw",
			w: down(time.Hour), c: func() Facts { c := active; c.ActiveCause = CauseStart; c.SelfHostedServes = yes; return c }()},
		{name: "activated at start, list failed: never withdraw",
			w: upStale, c: func() Facts { c := active; c.ActiveCause = CauseStart; c.SelfHostedServes = yes; return c }()},
		{name: "activated at start, port not shared (no own answer to ask): the usual wait",
			w: up, c: func() Facts { c := active; c.ActiveCause = CauseStart; c.RuntimeRunning = yes; return c }(),
			mem: Memory{ReadySince: ago(5 * time.Second)}, wantMem: func(m Memory) bool { return m.ReadySince.Equal(ago(5 * time.Second)) }},
		{name: "activated at start, port not shared, Ready long enough: withdraw",
			w: up, c: func() Facts { c := active; c.ActiveCause = CauseStart; c.RuntimeRunning = yes; return c }(),
			mem: Memory{ReadySince: ago(21 * time.Second)}, want: []Action{ActionWithdraw}},
		{name: "activated by an outage, own process answers: the wait stays",
			w: up, c: func() Facts { c := active; c.ActiveCause = CauseOutage; c.SelfHostedServes = yes; return c }(),
			mem: Memory{ReadySince: ago(5 * time.Second)}},
		{name: "activated by an outage, two recent withdrawals: still doubled",
			w: up, c: func() Facts { c := active; c.ActiveCause = CauseOutage; c.SelfHostedServes = yes; return c }(),
			mem: Memory{ReadySince: ago(30 * time.Second), Withdrawals: []time.Time{ago(5 * time.Minute), ago(2 * time.Minute)}}},
		{name: "activated at start, two recent withdrawals: the own answer still suffices",
			w: up, c: func() Facts { c := active; c.ActiveCause = CauseStart; c.SelfHostedServes = yes; return c }(),
			mem:  Memory{Withdrawals: []time.Time{ago(5 * time.Minute), ago(2 * time.Minute)}},
			want: []Action{ActionWithdraw}, wantMem: func(m Memory) bool { return len(m.Withdrawals) == 3 }},

		// Flapping: each recent withdrawal doubles the wait.
		{name: "two recent withdrawals: 80 s needed, 30 s is not enough", w: up, c: active,
			mem: Memory{ReadySince: ago(30 * time.Second), Withdrawals: []time.Time{ago(5 * time.Minute), ago(2 * time.Minute)}}},
		{name: "two recent withdrawals: 81 s is enough", w: up, c: active,
			mem:  Memory{ReadySince: ago(81 * time.Second), Withdrawals: []time.Time{ago(5 * time.Minute), ago(2 * time.Minute)}},
			want: []Action{ActionWithdraw}, wantMem: func(m Memory) bool { return len(m.Withdrawals) == 3 }},
		{name: "withdrawals older than the window are forgotten", w: up, c: active,
			mem:  Memory{ReadySince: ago(21 * time.Second), Withdrawals: []time.Time{ago(time.Hour), ago(11 * time.Minute)}},
			want: []Action{ActionWithdraw}, wantMem: func(m Memory) bool { return len(m.Withdrawals) == 1 }},

		// 4. Remove.
		{name: "owner deleted, nothing on the node: remove", w: up, c: Facts{Stored: "h1", OwnerGone: true}, want: []Action{ActionRemove}},
		{name: "an empty list alone never removes", w: up, c: Facts{Stored: "h1"}},
		{name: "owner gone but a self-hosted pod is still on the node: keep", w: up, c: Facts{Stored: "h1", SelfHosted: true, OwnerGone: true}},
		{name: "owner gone while the checkpoint is the only instance: keep", w: up, c: Facts{Stored: "h1", OwnerGone: true, Active: true, ActiveSince: ago(time.Minute)}},
		{name: "owner gone, list failed: keep", w: upStale, c: Facts{Stored: "h1", OwnerGone: true}},
		{name: "owner gone, apiserver unreachable: activate, never remove", w: down(time.Hour), c: Facts{Stored: "h1", OwnerGone: true}, want: []Action{ActionActivate}},
		{name: "owner replaced (another UID), its Ready pod's checkpoint replaces it", w: up,
			c: Facts{Stored: "h1", OwnerGone: true, Candidate: "h2", CandidateConflicts: true}, want: []Action{ActionRemove, ActionStore}},

		// Ownership: a stored record the rule book refuses by itself.
		{name: "disallowed (bare pod, unknown kind, namespace not served): removed, even unreachable", w: down(time.Hour),
			c: Facts{Stored: "h1", Disallowed: true}, want: []Action{ActionRemove}},
		{name: "disallowed: removed while reachable", w: up, c: Facts{Stored: "h1", Disallowed: true}, want: []Action{ActionRemove}},
		{name: "disallowed and active: withdrawn once the apiserver answers", w: up,
			c: Facts{Stored: "h1", Disallowed: true, Active: true, ActiveSince: ago(time.Minute)}, want: []Action{ActionWithdraw}},
		{name: "disallowed and active, unreachable: nothing yet", w: down(time.Hour),
			c: Facts{Stored: "h1", Disallowed: true, Active: true, ActiveSince: ago(time.Minute)}},
		{name: "disallowed record, a verified candidate of the component: replaced", w: up,
			c: Facts{Stored: "h1", Disallowed: true, Candidate: "h2", SelfHosted: true}, want: []Action{ActionRemove, ActionStore}},
		// Ownership: another controller of the same name.
		{name: "a candidate of another owner never replaces one whose owner stands", w: up,
			c: Facts{Stored: "h1", Candidate: "h2", CandidateConflicts: true}},
		{name: "a conflicting candidate, owner unknown (read failed): keep", w: up,
			c: Facts{Stored: "h1", Candidate: "h2", CandidateConflicts: true, OwnerGone: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.w, tc.c, tc.mem, testTiming)
			if !slices.Equal(d.Actions, tc.want) {
				t.Fatalf("actions = %v, want %v (why: %s)", d.Actions, tc.want, d.Why)
			}
			if d.Why == "" && len(d.Actions) > 0 {
				t.Errorf("an action without a reason")
			}
			if tc.wantMem != nil && !tc.wantMem(d.Memory) {
				t.Errorf("memory = %+v", d.Memory)
			}
		})
	}
}

// TestDecideActivationCause: an activation before the apiserver answered
// once since bootlet's start is a start's, any other an outage's; a pod's
// annotation reads back only "start" as a start.
func TestDecideActivationCause(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		w    World
		want Cause
	}{
		{"never reachable since bootlet started (a reboot)", World{Now: now, UnreachableSince: now.Add(-3 * time.Second), NeverReachable: true}, CauseStart},
		{"reachable once, then gone (an outage)", World{Now: now, UnreachableSince: now.Add(-11 * time.Second)}, CauseOutage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.w, Facts{Stored: "h1"}, Memory{}, testTiming)
			if !slices.Equal(d.Actions, []Action{ActionActivate}) || d.Cause != tc.want {
				t.Fatalf("actions %v cause %q, want activate %q (why: %s)", d.Actions, d.Cause, tc.want, d.Why)
			}
		})
	}
	if d := Decide(World{Now: now, Reachable: true, Fresh: true}, Facts{Stored: "h1"}, Memory{}, testTiming); d.Cause != "" {
		t.Errorf("a decision that does not activate has cause %q", d.Cause)
	}
	for in, want := range map[string]Cause{"start": CauseStart, "outage": CauseOutage, "": CauseOutage, "reboot": CauseOutage} {
		if got := CauseOf(in); got != want {
			t.Errorf("CauseOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWithdrawAfter(t *testing.T) {
	for n, want := range []time.Duration{20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute} {
		if got := withdrawAfter(testTiming, n); got != want {
			t.Errorf("withdrawAfter(%d) = %s, want %s", n, got, want)
		}
	}
}

func ctrlRef(kind, name string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: "owner-uid", Controller: ptr.To(true)}}
}

func TestSharesReadinessPort(t *testing.T) {
	pod := func(hostNetwork bool, probe *v1.Probe) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{HostNetwork: hostNetwork, Containers: []v1.Container{{Name: "c", ReadinessProbe: probe}}}}
	}
	httpOn := func(port int) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(int32(port)), Scheme: v1.URISchemeHTTPS}}}
	}
	named := func(port int32) *v1.Pod {
		p := pod(true, &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("probe-port")}}})
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{Name: "probe-port", ContainerPort: port}}
		return p
	}
	tcpOn := &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(6443)}}}
	for _, tc := range []struct {
		name         string
		ckpt, hosted *v1.Pod
		want         bool
	}{
		{"the apiserver: host network, same HTTPS port", pod(true, httpOn(6443)), pod(true, httpOn(6443)), true},
		{"different ports", pod(true, httpOn(6443)), pod(true, httpOn(6444)), false},
		{"the self-hosted pod in its own network namespace", pod(true, httpOn(6443)), pod(false, httpOn(6443)), false},
		{"the checkpoint in its own network namespace", pod(false, httpOn(6443)), pod(true, httpOn(6443)), false},
		{"no readiness probe", pod(true, nil), pod(true, nil), false},
		{"a TCP probe (not checked by HTTP)", pod(true, tcpOn), pod(true, tcpOn), false},
		{"no checkpoint pod", nil, pod(true, httpOn(6443)), false},
		{"a named port resolved against the container's ports", named(6443), pod(true, httpOn(6443)), true},
		{"a named port that resolves to another port", named(6444), pod(true, httpOn(6443)), false},
	} {
		if got := sharesReadinessPort(tc.ckpt, tc.hosted); got != tc.want {
			t.Errorf("%s: sharesReadinessPort = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestComponentOf(t *testing.T) {
	for _, tc := range []struct {
		name          string
		pod           *v1.Pod
		wantName      string
		wantOwnerKind string
	}{
		{"DaemonSet pod", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-x7k2p", Namespace: "kube-system", OwnerReferences: ctrlRef("DaemonSet", "kube-apiserver")}}, "kube-apiserver", "DaemonSet"},
		{"Deployment pod", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kube-scheduler-5d9f8-abcde", Namespace: "kube-system",
			Labels: map[string]string{"pod-template-hash": "5d9f8"}, OwnerReferences: ctrlRef("ReplicaSet", "kube-scheduler-5d9f8")}}, "kube-scheduler", "Deployment"},
		{"bare ReplicaSet pod", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rs-abcde", Namespace: "kube-system", OwnerReferences: ctrlRef("ReplicaSet", "rs")}}, "rs", "ReplicaSet"},
		{"bare pod", &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "lonely", Namespace: "default"}}, "lonely", ""},
	} {
		_, name, kind, _ := componentOf(tc.pod)
		if name != tc.wantName || kind != tc.wantOwnerKind {
			t.Errorf("%s: componentOf = %s (%s), want %s (%s)", tc.name, name, kind, tc.wantName, tc.wantOwnerKind)
		}
	}
}

func TestWantsCheckpoint(t *testing.T) {
	ann := func(kv ...string) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		for i := 0; i < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"annotated", ann(btypes.AnnotationCheckpoint, "true"), true},
		{"not annotated", ann(), false},
		{"annotated false", ann(btypes.AnnotationCheckpoint, "false"), false},
		{"a checkpoint's own mirror pod", ann(btypes.AnnotationCheckpoint, "true", kubetypes.ConfigMirrorAnnotationKey, "abc"), false},
		{"a pod run from a checkpoint", ann(btypes.AnnotationCheckpoint, "true", btypes.AnnotationCheckpointOf, "kube-system/kube-apiserver"), false},
	} {
		if got := wantsCheckpoint(tc.pod); got != tc.want {
			t.Errorf("%s: wantsCheckpoint = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func readyPod(name string, created time.Time, ready bool) *v1.Pod {
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)},
		Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(created.Add(time.Second))}}}}
}

func TestLatestReady(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	old := readyPod("old", t0, true)
	newer := readyPod("new", t0.Add(time.Minute), true)
	newest := readyPod("newest", t0.Add(2*time.Minute), false) // a broken upgrade
	terminating := readyPod("terminating", t0.Add(3*time.Minute), true)
	terminating.DeletionTimestamp = ptr.To(metav1.NewTime(t0.Add(4 * time.Minute)))
	if got := latestReady([]*v1.Pod{old, newest, newer, terminating}); got != newer {
		t.Errorf("latestReady = %v, want the newest Ready, not terminating pod", got)
	}
	if got := latestReady([]*v1.Pod{newest}); got != nil {
		t.Errorf("latestReady of a never-Ready pod = %s, want none", got.Name)
	}
	if got := readySinceOf(newer); !got.Equal(t0.Add(time.Minute + time.Second)) {
		t.Errorf("readySinceOf = %s", got)
	}
}

// selfHostedPod is a kube-apiserver pod as the DaemonSet controller makes
// it: owner, service account volume, Secret and ConfigMap uses.
func selfHostedPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-abcde", Namespace: "kube-system", UID: "selfhosted-uid",
			Labels:          map[string]string{"k8s-app": "kube-apiserver", "controller-revision-hash": "7c9"},
			Annotations:     map[string]string{btypes.AnnotationCheckpoint: "true", "example.com/keep": "yes"},
			OwnerReferences: ctrlRef("DaemonSet", "kube-apiserver")},
		Spec: v1.PodSpec{
			NodeName: "node-1", HostNetwork: true, ServiceAccountName: "default", PriorityClassName: "system-node-critical", Priority: ptr.To[int32](2000001000),
			ImagePullSecrets: []v1.LocalObjectReference{{Name: "pull"}},
			// What render's DaemonSet and its controller set.
			NodeSelector: map[string]string{btypes.LabelControlPlane: ""},
			Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
				NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{
					{Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{"node-1"}}}}}}}},
			Containers: []v1.Container{{
				Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:v1.36.3",
				Command: []string{"kube-apiserver", "--permit-port-sharing=true", "--secure-port=6443"},
				Env: []v1.EnvVar{{Name: "TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "env-secret"}, Key: "k"}}},
					{Name: "MODE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Key: "mode"}}}},
				EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "more"}}}},
				VolumeMounts: []v1.VolumeMount{{Name: "kubernetes", MountPath: "/etc/kubernetes"}, {Name: "ca-certs", MountPath: "/etc/ssl/certs"},
					{Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
			}},
			Volumes: []v1.Volume{
				{Name: "kubernetes", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "kube-apiserver"}}},
				{Name: "ca-certs", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc/ssl/certs"}}},
				{Name: "kube-api-access-x", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
					{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token"}},
					{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
				}}}},
			},
		},
		Status: v1.PodStatus{Phase: v1.PodRunning},
	}
}

func TestObjectNames(t *testing.T) {
	secrets, cms := objectNames(selfHostedPod())
	if want := []string{"env-secret", "kube-apiserver"}; !slices.Equal(secrets, want) {
		t.Errorf("secrets = %v, want %v (imagePullSecrets are left out)", secrets, want)
	}
	if want := []string{"more", "settings"}; !slices.Equal(cms, want) {
		t.Errorf("configMaps = %v, want %v (kube-root-ca.crt is in the service account volume, which is dropped)", cms, want)
	}
}

func TestCheckpointPod(t *testing.T) {
	src := selfHostedPod()
	ck := NewCheckpoint(src, []v1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system", ResourceVersion: "9"}, Data: map[string][]byte{"a": []byte("b")}}}, nil, time.Unix(100, 0))
	if ck.Key() != "kube-system/kube-apiserver" || ck.OwnerKind != "DaemonSet" || ck.SourceUID != "selfhosted-uid" {
		t.Fatalf("checkpoint identity: %s %s/%s %s", ck.Key(), ck.OwnerKind, ck.OwnerName, ck.SourceUID)
	}
	if ck.Secrets[0].ResourceVersion != "" {
		t.Errorf("stored Secret keeps bookkeeping metadata: %+v", ck.Secrets[0].ObjectMeta)
	}
	p := CheckpointPod(ck)
	if p.Name != "kube-apiserver-checkpoint" || p.Namespace != "kube-system" || p.UID != "" {
		t.Errorf("identity = %s/%s uid %q, want kube-system/kube-apiserver-checkpoint with no UID", p.Namespace, p.Name, p.UID)
	}
	if len(p.Labels) != 1 || p.Labels[btypes.LabelCheckpointOf] != "kube-apiserver" {
		t.Errorf("labels = %v, want only %s", p.Labels, btypes.LabelCheckpointOf)
	}
	if _, ok := p.Annotations[btypes.AnnotationCheckpoint]; ok || p.Annotations[btypes.AnnotationCheckpointOf] != "kube-system/kube-apiserver" || p.Annotations["example.com/keep"] != "yes" {
		t.Errorf("annotations = %v", p.Annotations)
	}
	if len(p.OwnerReferences) != 0 || p.Spec.NodeName != "" || p.Spec.ServiceAccountName != "" || p.Spec.ImagePullSecrets != nil || p.Spec.Priority != nil ||
		p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken {
		t.Errorf("bookkeeping left: %+v", p.Spec)
	}
	if p.Spec.NodeSelector != nil || p.Spec.Affinity != nil {
		t.Errorf("node selection left (the kubelet would reject the static copy on a Node without the label): %v %v", p.Spec.NodeSelector, p.Spec.Affinity)
	}
	if !p.Spec.HostNetwork || !slices.Equal(p.Spec.Containers[0].Command, src.Spec.Containers[0].Command) {
		t.Errorf("hostNetwork and the command line (--permit-port-sharing) must stay: %v %v", p.Spec.HostNetwork, p.Spec.Containers[0].Command)
	}
	var vols []string
	for _, v := range p.Spec.Volumes {
		vols = append(vols, v.Name)
	}
	if !slices.Equal(vols, []string{"kubernetes", "ca-certs"}) {
		t.Errorf("volumes = %v, want the service account volume dropped", vols)
	}
	var mounts []string
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		mounts = append(mounts, m.Name)
	}
	if !slices.Equal(mounts, []string{"kubernetes", "ca-certs"}) {
		t.Errorf("mounts = %v", mounts)
	}
	c := p.Spec.Containers[0]
	if got := p.Spec.Volumes[0].Secret.SecretName; got != "kube-apiserver-checkpoint-kube-apiserver" {
		t.Errorf("secret volume = %s", got)
	}
	if c.Env[0].ValueFrom.SecretKeyRef.Name != "kube-apiserver-checkpoint-env-secret" || c.Env[1].ValueFrom.ConfigMapKeyRef.Name != "kube-apiserver-checkpoint-settings" ||
		c.EnvFrom[0].ConfigMapRef.Name != "kube-apiserver-checkpoint-more" {
		t.Errorf("env references not renamed: %+v %+v", c.Env, c.EnvFrom)
	}
	// The source is untouched.
	if src.Spec.Volumes[0].Secret.SecretName != "kube-apiserver" || len(src.Spec.Volumes) != 3 {
		t.Errorf("CheckpointPod changed its input")
	}
	ss, _ := CheckpointObjects(ck)
	if len(ss) != 1 || ss[0].Name != "kube-apiserver-checkpoint-kube-apiserver" || ss[0].Labels[btypes.LabelCheckpointOf] != "kube-apiserver" || string(ss[0].Data["a"]) != "b" {
		t.Errorf("checkpoint objects = %+v", ss)
	}
}

func TestCheckpointHash(t *testing.T) {
	sec := func(v string) []v1.Secret {
		return []v1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver", Namespace: "kube-system"}, Data: map[string][]byte{"a": []byte(v)}}}
	}
	a := NewCheckpoint(selfHostedPod(), sec("1"), nil, time.Unix(1, 0))
	// A DaemonSet pod recreated with the same spec: same checkpoint.
	other := selfHostedPod()
	other.Name, other.UID = "kube-apiserver-zzzzz", "other-uid"
	if b := NewCheckpoint(other, sec("1"), nil, time.Unix(2, 0)); b.Hash != a.Hash {
		t.Errorf("same spec and objects, different hash")
	}
	if b := NewCheckpoint(selfHostedPod(), sec("2"), nil, time.Unix(1, 0)); b.Hash == a.Hash {
		t.Errorf("a Secret change must move the checkpoint")
	}
	upgraded := selfHostedPod()
	upgraded.Spec.Containers[0].Image = "registry.k8s.io/kube-apiserver:v1.36.4"
	if b := NewCheckpoint(upgraded, sec("1"), nil, time.Unix(1, 0)); b.Hash == a.Hash {
		t.Errorf("an image change must move the checkpoint")
	}
}

func TestCheckpointObjectName(t *testing.T) {
	long := CheckpointObjectName("c", string(make([]byte, 300)))
	if len(long) > 253 {
		t.Errorf("name of %d bytes", len(long))
	}
	if CheckpointObjectName("c", string(make([]byte, 300))) != long {
		t.Errorf("not deterministic")
	}
}

// TestCheckpointPodPreStop: a preStop sleep (the rolling update's drain) is
// dropped from the checkpoint pod, which bootlet's own hand-over drains;
// any other preStop action is the workload's and stays.
func TestCheckpointPodPreStop(t *testing.T) {
	sleep := &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 15}}
	exec := &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"flush"}}}
	post := &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"warm"}}}
	for _, tc := range []struct {
		name string
		in   *v1.Lifecycle
		want *v1.Lifecycle
	}{
		{"none", nil, nil},
		{"preStop sleep: dropped with the lifecycle", &v1.Lifecycle{PreStop: sleep}, nil},
		{"preStop sleep and a postStart: the postStart stays", &v1.Lifecycle{PreStop: sleep, PostStart: post}, &v1.Lifecycle{PostStart: post}},
		{"preStop exec: stays", &v1.Lifecycle{PreStop: exec}, &v1.Lifecycle{PreStop: exec}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := selfHostedPod()
			src.Spec.Containers[0].Lifecycle = tc.in
			p := CheckpointPod(NewCheckpoint(src, nil, nil, time.Unix(100, 0)))
			if got := p.Spec.Containers[0].Lifecycle; !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("lifecycle = %+v, want %+v", got, tc.want)
			}
			if !equality.Semantic.DeepEqual(src.Spec.Containers[0].Lifecycle, tc.in) {
				t.Errorf("CheckpointPod changed its input: %+v", src.Spec.Containers[0].Lifecycle)
			}
		})
	}
}

// TestCheckpointPodDropsReadinessGates: the self-hosted apiserver's pods
// declare the serving gate, which servinggate sets through the apiserver;
// the checkpoint pod, which bootlet runs and reports itself, does not carry
// it, and its source pod keeps it.
func TestCheckpointPodDropsReadinessGates(t *testing.T) {
	gates := []v1.PodReadinessGate{{ConditionType: btypes.PodConditionServing}}
	src := selfHostedPod()
	src.Spec.ReadinessGates = gates
	p := CheckpointPod(NewCheckpoint(src, nil, nil, time.Unix(100, 0)))
	if p.Spec.ReadinessGates != nil {
		t.Errorf("checkpoint pod readinessGates = %+v, want none", p.Spec.ReadinessGates)
	}
	if !equality.Semantic.DeepEqual(src.Spec.ReadinessGates, gates) {
		t.Errorf("CheckpointPod changed its input: %+v", src.Spec.ReadinessGates)
	}
}

// TestSettledComponent: what lets a tick skip the full read (quietTick).
func TestSettledComponent(t *testing.T) {
	stored := Facts{Stored: "h1", Candidate: "h1", SelfHosted: true}
	with := func(f func(*Facts)) Facts { c := stored; f(&c); return c }
	cases := []struct {
		name  string
		facts Facts
		dec   Decision
		want  bool
	}{
		{"stored and the newest Ready pod's", stored, Decision{}, true},
		{"stored, no pod of it on this node", with(func(c *Facts) { c.Candidate, c.SelfHosted = "", false }), Decision{}, true},
		{"nothing stored, nothing to store", Facts{}, Decision{}, true},
		{"an action this tick", stored, Decision{Actions: []Action{ActionStore}}, false},
		{"active", with(func(c *Facts) { c.Active = true }), Decision{}, false},
		{"owner gone, the pod still here", with(func(c *Facts) { c.OwnerGone = true }), Decision{}, false},
		{"disallowed", with(func(c *Facts) { c.Disallowed = true }), Decision{}, false},
		{"a candidate not stored (the registry refused it)", with(func(c *Facts) { c.Candidate = "h2" }), Decision{}, false},
		{"a candidate held at its gate", with(func(c *Facts) { c.Candidate, c.CandidateUngated = "h2", "kube-apiserver" }), Decision{}, false},
		{"another controller's candidate", with(func(c *Facts) { c.Candidate, c.CandidateConflicts = "h2", true }), Decision{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := settledComponent(tc.facts, tc.dec); got != tc.want {
				t.Fatalf("settledComponent = %v, want %v", got, tc.want)
			}
		})
	}
}
