package upgrade

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	btypes "github.com/bootlet/bootlet/types"
)

// drive runs the state machine to its end as a controller would, with a
// cluster that does what each step says; fail makes the gate of the
// steps it matches never pass. It returns the actions taken.
func drive(t *testing.T, c Cluster, desired Versions, gen int64, p Progress, fail func(Step) bool) ([]Action, Cluster, Progress) {
	t.Helper()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var acts []Action
	for i := 0; i < 200; i++ {
		var g Gate
		if s := p.InFlight; s != nil {
			g.Passed = runs(c, s.Component, s.Node, s.To) && !(fail != nil && fail(*s))
			g.Why = "not ready"
		}
		a, err := Decide(Round{Cluster: c, Desired: desired, Generation: gen, Progress: p, Gate: g, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		acts = append(acts, a)
		switch a.Kind {
		case DoBegin:
			c = Apply(c, *a.Step)
			if v := SkewViolations(c); len(v) > 0 {
				t.Fatalf("after %s: %v", a.Step, v)
			}
		case DoRollBack:
			back := *a.Step
			back.From, back.To = a.Step.To, a.Step.From
			c = Apply(c, back)
		case DoWait:
			now = now.Add(time.Minute)
		case DoNothing, DoStop, DoRefuse:
			return acts, c, a.Progress
		}
		p = a.Progress
	}
	t.Fatal("the upgrade did not end in 200 rounds")
	return nil, c, p
}

func kinds(acts []Action) string {
	var out []string
	for _, a := range acts {
		s := string(a.Kind)
		if a.Step != nil {
			s += " " + string(a.Step.Component) + "@" + a.Step.Node
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

func TestDecideWholeUpgrade(t *testing.T) {
	from, to := Releases["v1.36.3"], Releases["v1.37.2"]
	c := cluster(from, master("m1", from), master("m2", from), master("m3", from), worker("w1", from))
	acts, end, _ := drive(t, c, to, 1, Progress{}, nil)
	var begun []string
	for _, a := range acts {
		if a.Kind == DoBegin {
			begun = append(begun, string(a.Step.Component)+"@"+a.Step.Node)
		}
	}
	want := "etcd@m1 etcd@m2 etcd@m3 kube-apiserver@m1 kube-apiserver@m2 kube-apiserver@m3 " +
		"kube-controller-manager@m1 kube-controller-manager@m2 kube-controller-manager@m3 " +
		"kube-scheduler@m1 kube-scheduler@m2 kube-scheduler@m3 kube-proxy@ coredns@ kubelet@m1 kubelet@m2 kubelet@m3 kubelet@w1"
	if got := strings.Join(begun, " "); got != want {
		t.Errorf("steps begun:\n got %s\nwant %s", got, want)
	}
	if last := acts[len(acts)-1]; last.Kind != DoNothing || !strings.Contains(last.Message, "runs v1.37.2") {
		t.Errorf("the last action %+v", last)
	}
	if steps, _ := Plan(end, to, EtcdReleases()); len(steps) != 0 {
		t.Errorf("left to do: %v", steps)
	}
}

func TestDecideResumes(t *testing.T) {
	from, to := Releases["v1.36.3"], Releases["v1.37.2"]
	c := cluster(from, master("m1", from), worker("w1", from))
	// Midway: the apiserver's step was begun (its spec changed) and the
	// leader died; the new one reads the progress from the object.
	s := Step{Component: APIServer, Node: "m1", From: "v1.36.3", To: "v1.37.2"}
	c = Apply(Apply(c, Step{Component: Etcd, Node: "m1", From: "3.6.8", To: "3.7.0"}), s)
	began := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p := Progress{InFlight: &s, Began: began}
	a, err := Decide(Round{Cluster: c, Desired: to, Generation: 1, Progress: p, Gate: Gate{Why: "not serving yet"}, Now: began.Add(2 * time.Minute)})
	if err != nil || a.Kind != DoWait || a.Progress.InFlight == nil || !a.Progress.Began.Equal(began) {
		t.Fatalf("resumed mid-gate: %+v, %v; want Wait with the step's start kept", a, err)
	}
	// The gate's timeout counts from the step's start, not the restart.
	a, _ = Decide(Round{Cluster: c, Desired: to, Generation: 1, Progress: p, Gate: Gate{Why: "not serving yet"}, Now: began.Add(GateTimeout)})
	if a.Kind != DoRollBack {
		t.Errorf("after the timeout since the step began: %s, want RollBack", a.Kind)
	}
	acts, _, _ := drive(t, c, to, 1, p, nil)
	if got := kinds(acts); !strings.HasPrefix(got, "Complete kube-apiserver@m1, Begin kube-controller-manager@m1") {
		t.Errorf("resumed: %s", got)
	}
}

func TestDecideRollsBackAndStops(t *testing.T) {
	from, to := Releases["v1.36.3"], Releases["v1.37.2"]
	c := cluster(from, master("m1", from), master("m2", from), master("m3", from))
	badAPIServer := func(s Step) bool { return s.Component == APIServer && s.Node == "m2" }
	acts, end, p := drive(t, c, to, 1, Progress{}, badAPIServer)
	got := kinds(acts)
	if !strings.Contains(got, "Begin kube-apiserver@m2, Wait kube-apiserver@m2") || !strings.HasSuffix(got, "RollBack kube-apiserver@m2, Stop kube-apiserver@m2") {
		t.Errorf("actions: %s", got)
	}
	last := acts[len(acts)-1]
	if !strings.Contains(last.Message, "kube-apiserver on m2") || !strings.Contains(last.Message, "putting it back to v1.36.3") {
		t.Errorf("the stop's message %q does not name the component, the node and the cause", last.Message)
	}
	if end.Nodes[1].Running[APIServer] != "v1.36.3" || end.Nodes[0].Running[APIServer] != "v1.37.2" {
		t.Errorf("after the rollback: %v %v", end.Nodes[0].Running, end.Nodes[1].Running)
	}
	// Until the component runs its old version again, the rollback waits.
	bad := Step{Component: APIServer, Node: "m2", From: "v1.36.3", To: "v1.37.2"}
	if a, _ := Decide(Round{Cluster: Apply(end, bad), Desired: to, Generation: 1, Progress: Progress{RollingBack: &bad}}); a.Kind != DoWait {
		t.Errorf("a rollback not through yet: %s", a.Kind)
	}
	// Stopped stays stopped for this generation, however often asked.
	a, _ := Decide(Round{Cluster: end, Desired: to, Generation: 1, Progress: p, Now: time.Now()})
	if a.Kind != DoStop {
		t.Errorf("a stopped upgrade, same generation: %s", a.Kind)
	}
	// Set again (a new generation), it goes on from what runs.
	acts, _, _ = drive(t, end, to, 2, p, nil)
	if got := kinds(acts); !strings.HasPrefix(got, "Begin kube-apiserver@m2") {
		t.Errorf("set again: %s", got)
	}
}

func TestDecideHoldsEtcd(t *testing.T) {
	from, to := Releases["v1.36.3"], Releases["v1.37.2"]
	c := cluster(from, master("m1", from))
	acts, _, p := drive(t, c, to, 1, Progress{}, func(s Step) bool { return s.Component == Etcd })
	last := acts[len(acts)-1]
	if last.Kind != DoStop || p.Stopped == nil || p.Stopped.Verdict != Hold || !strings.Contains(last.Message, "cannot go back") {
		t.Errorf("a single etcd member's failed step: %s; %+v", kinds(acts), last)
	}
}

func TestDecideRefuses(t *testing.T) {
	from, to := Releases["v1.36.3"], Releases["v1.37.2"]
	w := worker("w1", from)
	w.MissingImages = []string{"bootlet.dev/kubelet:v1.37.2"}
	c := cluster(from, master("m1", from), w)
	a, err := Decide(Round{Cluster: c, Desired: to, Generation: 1})
	if err != nil || a.Kind != DoRefuse || len(a.Refusals) != 1 || a.Refusals[0].Reason != ReasonImagesMissing {
		t.Fatalf("missing images: %+v, %v", a, err)
	}
	// Halfway (every apiserver through), "already runs" is no refusal.
	half := c
	half.Nodes[1].MissingImages = nil
	for _, s := range []Step{{Component: Etcd, Node: "m1", To: "3.7.0"}, {Component: APIServer, Node: "m1", To: "v1.37.2"}} {
		half = Apply(half, s)
	}
	if a, err := Decide(Round{Cluster: half, Desired: to, Generation: 1}); err != nil || a.Kind != DoBegin || a.Step.Component != ControllerManager {
		t.Errorf("halfway: %+v, %v", a, err)
	}
	if a, _ := Decide(Round{Cluster: c}); a.Kind != DoNothing {
		t.Errorf("nothing desired: %s", a.Kind)
	}
}

func TestDecideEdges(t *testing.T) {
	from, to := Releases["v1.36.3"], Releases["v1.37.2"]
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := cluster(from, master("m1", from), worker("w1", from))
	api := Step{Component: APIServer, Node: "m1", From: "v1.36.3", To: "v1.37.2"}

	// A gate that says passed while the component is not seen at the
	// target waits: completing it would begin the same step again.
	a, _ := Decide(Round{Cluster: c, Desired: to, Generation: 1, Progress: Progress{InFlight: &api, Began: now}, Gate: Gate{Passed: true}, Now: now.Add(time.Minute)})
	if a.Kind != DoWait || !strings.Contains(a.Message, "not yet seen running v1.37.2") {
		t.Errorf("passed but not seen: %s %q", a.Kind, a.Message)
	}

	// Stopped on generation 0 stays stopped.
	d := Decision{RollBack, "x"}
	if a, _ := Decide(Round{Cluster: c, Desired: to, Generation: 0, Progress: Progress{Stopped: &d}}); a.Kind != DoStop {
		t.Errorf("stopped on generation 0: %s", a.Kind)
	}

	// A rollback that does not converge stops for a person.
	up := Apply(c, api)
	a, _ = Decide(Round{Cluster: up, Desired: to, Generation: 1, Progress: Progress{RollingBack: &api, Began: now, Stopped: &d}, Now: now.Add(GateTimeout)})
	if a.Kind != DoStop || a.Progress.Stopped.Verdict != Hold || !strings.Contains(a.Message, "did not come back") {
		t.Errorf("a rollback past its timeout: %s %+v", a.Kind, a.Progress.Stopped)
	}

	// A plan that would strand a component later is refused before its
	// first step: kube-proxy three minors behind is fine at v1.36 and
	// four behind once the apiserver moves.
	old := cluster(from, master("m1", from))
	old.Addons[KubeProxy] = "v1.33.0"
	a, _ = Decide(Round{Cluster: old, Desired: to, Generation: 1, Now: now})
	if a.Kind != DoRefuse || !strings.Contains(a.Refusals[0].Message, "kube-proxy runs 1.33.0, more than 3 minors older") {
		t.Errorf("a plan that strands kube-proxy: %s %+v", a.Kind, a.Refusals)
	}

	// The desired version set back while a master already runs the
	// target is no downgrade: refused, naming it.
	half := Apply(Apply(c, Step{Component: Etcd, Node: "m1", From: "3.6.8", To: "3.7.0"}), api)
	a, _ = Decide(Round{Cluster: half, Desired: from, Generation: 2, Now: now})
	if a.Kind != DoRefuse || !strings.Contains(a.Refusals[0].Message, "goes down") {
		t.Errorf("set back after etcd moved: %s %+v", a.Kind, a.Refusals)
	}
	apiOnly := Apply(c, api)
	a, _ = Decide(Round{Cluster: apiOnly, Desired: from, Generation: 2, Now: now})
	if a.Kind != DoRefuse || !strings.Contains(a.Refusals[0].Message, "does not downgrade") {
		t.Errorf("set back after the apiserver moved: %s %+v", a.Kind, a.Refusals)
	}
}

func TestPlanEtcdMixedPatches(t *testing.T) {
	to := Releases["v1.37.2"]
	m1 := master("m1", Releases["v1.36.3"])
	m2 := master("m2", Releases["v1.36.3"])
	m2.Running[Etcd] = "3.6.5"
	steps, err := Plan(cluster(Releases["v1.36.3"], m1, m2), to, EtcdReleases())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range steps {
		if s.Component == Etcd {
			got = append(got, s.Node+" "+s.From+"->"+s.To)
		}
	}
	// Both members on 3.6's newest patch before either moves to 3.7.
	if want := "m2 3.6.5->3.6.8, m1 3.6.8->3.7.0, m2 3.6.8->3.7.0"; strings.Join(got, ", ") != want {
		t.Errorf("etcd steps %v, want %s", got, want)
	}
}

func TestSkewByMinor(t *testing.T) {
	v := Releases["v1.36.3"]
	tests := []struct {
		name string
		set  func(c *Cluster)
		want string
	}{
		{"a kubelet a patch ahead", func(c *Cluster) { c.Nodes[1].Running[Kubelet] = "v1.36.4" }, ""},
		{"a kubelet a minor ahead", func(c *Cluster) { c.Nodes[1].Running[Kubelet] = "v1.37.0" }, "kubelet on w1 runs 1.37.0, newer"},
		{"a controller-manager two minors behind", func(c *Cluster) { c.Nodes[0].Running[ControllerManager] = "v1.34.0" }, "more than one minor older"},
		{"a scheduler one minor behind", func(c *Cluster) { c.Nodes[0].Running[Scheduler] = "v1.35.0" }, ""},
	}
	for _, tt := range tests {
		c := cluster(v, master("m1", v), worker("w1", v))
		tt.set(&c)
		got := strings.Join(SkewViolations(c), "; ")
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// A one-member step's helpers: while they run the version the member
// left, it may still go back; the rollback is through only once they are
// gone, and the step's gate passes only then too.
func TestDecideEtcdHelpers(t *testing.T) {
	from, to := Releases["v1.36.3"], Releases["v1.37.2"]
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := cluster(from, master("m1", from))
	s := Step{Component: Etcd, Node: "m1", From: from.Etcd, To: to.Etcd}
	helpers := []EtcdMember{{Name: "m1-upgrade-helper-1", Version: from.Etcd, Healthy: true, Helper: true}, {Name: "m1-upgrade-helper-2", Version: from.Etcd, Healthy: true, Helper: true}}
	withHelpers := c
	withHelpers.EtcdMembers = append(append([]EtcdMember(nil), c.EtcdMembers...), helpers...)
	if n := withHelpers.EtcdHelpersNeeded(); n != 2 {
		t.Fatalf("one member and two helpers: %d helpers needed, want 2: %+v", n, withHelpers.EtcdMembers)
	}
	if stepTimeout(Round{Cluster: withHelpers}, s) != EtcdHelpedTimeoutFactor*GateTimeout {
		t.Errorf("a step with helpers has %s, want %d gate timeouts", stepTimeout(Round{Cluster: withHelpers}, s), EtcdHelpedTimeoutFactor)
	}
	if d := DecideGate(s, Gate{Why: "x", Elapsed: GateTimeout}, withHelpers.EtcdMembers); d.Verdict != RollBack {
		t.Errorf("a failed gate with the helpers at %s: %s, want RollBack", from.Etcd, d.Verdict)
	}
	d := Decision{RollBack, "x"}
	a, _ := Decide(Round{Cluster: withHelpers, Desired: to, Generation: 1, Progress: Progress{RollingBack: &s, Began: now, Stopped: &d}, Now: now.Add(time.Minute)})
	if a.Kind != DoWait || !strings.Contains(a.Message, "helpers are being removed") {
		t.Errorf("put back with helpers left: %s %q, want Wait", a.Kind, a.Message)
	}
	a, _ = Decide(Round{Cluster: c, Desired: to, Generation: 1, Progress: Progress{RollingBack: &s, Began: now, Stopped: &d}, Now: now.Add(time.Minute)})
	if a.Kind != DoStop {
		t.Errorf("put back, helpers gone: %s %q, want Stop", a.Kind, a.Message)
	}
	// Its timeout is EtcdHelpedTimeoutFactor gates': three steps' work.
	g := Gate{Why: "the member runs 3.6.8"}
	if a, _ := Decide(Round{Cluster: withHelpers, Desired: to, Generation: 1, Progress: Progress{InFlight: &s, Began: now}, Gate: g, Now: now.Add(GateTimeout + time.Minute)}); a.Kind != DoWait {
		t.Errorf("one member's step after one gate timeout: %s, want Wait", a.Kind)
	}
	if a, _ := Decide(Round{Cluster: withHelpers, Desired: to, Generation: 1, Progress: Progress{InFlight: &s, Began: now}, Gate: g, Now: now.Add(EtcdHelpedTimeoutFactor * GateTimeout)}); a.Kind != DoRollBack {
		t.Errorf("one member's step after %d gate timeouts: %s, want RollBack", EtcdHelpedTimeoutFactor, a.Kind)
	}
	o := Observed{EtcdMembers: append([]EtcdMember{{Name: "m1", Version: to.Etcd, Healthy: true}}, helpers...), EtcdLeader: true}
	if g := ObserveGate(o, s); g.Passed || !strings.Contains(g.Why, "helper member m1-upgrade-helper-1 is still there") {
		t.Errorf("gate with helpers left: %+v", g)
	}
	o.EtcdMembers = o.EtcdMembers[:1]
	if g := ObserveGate(o, s); !g.Passed {
		t.Errorf("gate of the member alone at the target: %+v", g)
	}
}

// A member's step adds helpers up to three members: two beside one, one
// beside one of two, none from three on (nor where etcd lists none);
// where the members share their client address, one from three on too.
func TestEtcdHelpersFor(t *testing.T) {
	for _, tc := range []struct {
		members int
		shared  bool
		want    int
	}{
		{0, false, 0}, {1, false, 2}, {2, false, 1}, {3, false, 0}, {4, false, 0}, {5, false, 0},
		{0, true, 0}, {1, true, 2}, {2, true, 1}, {3, true, 1}, {4, true, 1}, {5, true, 1},
	} {
		if got := EtcdHelpersFor(tc.members, tc.shared); got != tc.want {
			t.Errorf("EtcdHelpersFor(%d, shared %v) = %d, want %d", tc.members, tc.shared, got, tc.want)
		}
		c := Cluster{EtcdSharesClientAddress: tc.shared}
		for i := range tc.members {
			c.EtcdMembers = append(c.EtcdMembers, EtcdMember{Name: fmt.Sprintf("m%d", i+1)})
		}
		c.EtcdMembers = append(c.EtcdMembers, EtcdMember{Name: "h", Helper: true})
		if c.EtcdNeedsHelpers() != (tc.want > 0) || c.EtcdHelpersNeeded() != tc.want {
			t.Errorf("%d members (shared %v) and a helper: needs %v, %d; want %d (a helper is no member)", tc.members, tc.shared, c.EtcdNeedsHelpers(), c.EtcdHelpersNeeded(), tc.want)
		}
	}
}

// The members share their client address only where every member's pod
// says so; a helper's pod does not count.
func TestEtcdSharesClientAddress(t *testing.T) {
	pod := func(name string, helper bool, args ...string) v1.Pod {
		p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "etcd", Command: append([]string{"etcd", "--name=" + name}, args...)}}}}
		if helper {
			p.Labels = map[string]string{btypes.LabelEtcdUpgradeHelper: name}
		}
		return p
	}
	for _, tc := range []struct {
		name string
		pods []v1.Pod
		want bool
	}{
		{"no etcd", nil, false},
		{"one member that shares", []v1.Pod{pod("m1", false, "--socket-reuse-port=true")}, true},
		{"the flag alone", []v1.Pod{pod("m1", false, "--socket-reuse-port")}, true},
		{"false", []v1.Pod{pod("m1", false, "--socket-reuse-port=false")}, false},
		{"one of two does not", []v1.Pod{pod("m1", false, "--socket-reuse-port=true"), pod("m2", false)}, false},
		{"a helper does not count", []v1.Pod{pod("m1", false, "--socket-reuse-port=true"), pod("h", true)}, true},
	} {
		if got := EtcdSharesClientAddress(tc.pods); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// etcd goes back only while a member of the old minor holds the cluster
// version there; a helper counts only while Ready (one being removed no
// longer does).
func TestEtcdCanGoBack(t *testing.T) {
	s := Step{Component: Etcd, Node: "m1", From: "3.6.8", To: "3.7.0"}
	tests := []struct {
		name    string
		members []EtcdMember
		want    bool
	}{
		{"alone", []EtcdMember{{Name: "m1", Version: "3.7.0"}}, false},
		{"another member at the old minor", []EtcdMember{{Name: "m1", Version: "3.7.0"}, {Name: "m2", Version: "3.6.8", Healthy: true}}, true},
		{"every other member at the new minor", []EtcdMember{{Name: "m1", Version: "3.7.0"}, {Name: "m2", Version: "3.7.0", Healthy: true}}, false},
		{"a Ready helper at the old minor", []EtcdMember{{Name: "m1", Version: "3.7.0"}, {Name: "m1-upgrade-helper-1", Version: "3.6.8", Healthy: true, Helper: true}}, true},
		{"a helper being removed", []EtcdMember{{Name: "m1", Version: "3.7.0"}, {Name: "m1-upgrade-helper-1", Version: "3.6.8", Helper: true}}, false},
	}
	for _, tt := range tests {
		if got := EtcdCanGoBack(tt.members, s); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	if !EtcdCanGoBack(nil, Step{Component: Etcd, Node: "m1", From: "3.6.7", To: "3.6.8"}) {
		t.Errorf("a patch step cannot go back")
	}
}
