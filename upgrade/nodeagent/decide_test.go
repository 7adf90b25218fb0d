package nodeagent

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	btypes "github.com/bootlet/bootlet/types"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	drained := metav1.NewTime(now.Add(-time.Minute))
	step := func(node string, isDrained bool) *btypes.UpgradeStep {
		s := &btypes.UpgradeStep{Component: "kubelet", Node: node, From: "v1.36.3", To: "v1.37.2"}
		if isDrained {
			s.Drained = &drained
		}
		return s
	}
	apiserver := &btypes.UpgradeStep{Component: "kube-apiserver", Node: "m1", From: "v1.36.3", To: "v1.37.2"}
	tests := []struct {
		name string
		f    Facts
		want ActKind
		ver  string
	}{
		{"nothing in flight", Facts{Binary: "v1.36.3", Running: "v1.36.3"}, Nothing, ""},
		{"another component's step", Facts{InFlight: apiserver, Binary: "v1.36.3", Running: "v1.36.3"}, Nothing, ""},
		{"another node's kubelet", Facts{InFlight: step("m2", true), Binary: "v1.36.3", Running: "v1.36.3"}, Nothing, ""},
		{"not drained yet", Facts{InFlight: step("m1", false), Binary: "v1.36.3", Running: "v1.36.3"}, Nothing, ""},
		{"drained: install", Facts{InFlight: step("m1", true), Binary: "v1.36.3", Running: "v1.36.3"}, Install, "v1.37.2"},
		{"in place, never restarted (the agent restarted before it could)", Facts{InFlight: step("m1", true), Binary: "v1.37.2", Running: "v1.36.3"}, Restart, "v1.37.2"},
		{"in place, just restarted", Facts{InFlight: step("m1", true), Binary: "v1.37.2", Running: "v1.36.3", RestartedAt: now.Add(-10 * time.Second)}, Nothing, "v1.37.2"},
		{"restarted a while ago, still old", Facts{InFlight: step("m1", true), Binary: "v1.37.2", Running: "v1.36.3", RestartedAt: now.Add(-2 * RestartSettle)}, Restart, "v1.37.2"},
		{"runs the target", Facts{InFlight: step("m1", true), Binary: "v1.37.2", Running: "v1.37.2"}, Nothing, "v1.37.2"},
		{"rollback: restore the kept one", Facts{RollingBack: step("m1", true), Binary: "v1.37.2", Kept: "v1.36.3", Running: "v1.37.2"}, Restore, "v1.36.3"},
		{"rollback with nothing kept: install the old one", Facts{RollingBack: step("m1", true), Binary: "v1.37.2", Running: "v1.37.2"}, Install, "v1.36.3"},
		{"rollback, not drained: still restored", Facts{RollingBack: step("m1", false), Binary: "v1.37.2", Kept: "v1.36.3"}, Restore, "v1.36.3"},
		{"rollback done", Facts{RollingBack: step("m1", true), Binary: "v1.36.3", Running: "v1.36.3"}, Nothing, "v1.36.3"},
		// An agent without the kubelet (a promoted master's daemon) leaves
		// the kubelet's steps to the node's other agent, whatever it reads.
		{"etcd-only agent, drained", Facts{EtcdOnly: true, InFlight: step("m1", true)}, Nothing, ""},
		{"etcd-only agent, rollback", Facts{EtcdOnly: true, RollingBack: step("m1", true)}, Nothing, ""},
		{"etcd-only agent, its member's pod gone", Facts{EtcdOnly: true, InFlight: step("m1", true), Etcd: nil}, Nothing, ""},
	}
	for _, tt := range tests {
		tt.f.Node, tt.f.Now = "m1", now
		got := Decide(tt.f)
		if got.Kind != tt.want || got.Version != tt.ver {
			t.Errorf("%s: %s %q (%s), want %s %q", tt.name, got.Kind, got.Version, got.Why, tt.want, tt.ver)
		}
	}
}

func TestDecideEtcd(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	step := func(node string) *btypes.UpgradeStep {
		return &btypes.UpgradeStep{Component: "etcd", Node: node, From: "3.6.8", To: "3.7.0"}
	}
	three := []Member{{ID: 1, Name: "m1", Healthy: true}, {ID: 2, Name: "m2", Healthy: true}, {ID: 3, Name: "m3", Healthy: true}}
	member := func(stored, running, mirror string) *EtcdFacts {
		return &EtcdFacts{Stored: stored, Running: running, Mirror: mirror, Members: three}
	}
	unseen := func(stored, running, mirror string, members ...Member) *EtcdFacts {
		return &EtcdFacts{Stored: stored, Running: running, Mirror: mirror, Members: members}
	}
	tests := []struct {
		name string
		f    Facts
		want ActKind
		ver  string
	}{
		{"another node's member", Facts{InFlight: step("m2"), Etcd: member("3.6.8", "3.6.8", "3.6.8")}, Nothing, ""},
		{"no member here (a worker)", Facts{InFlight: step("m1")}, Nothing, ""},
		{"in flight: set the stored pod", Facts{InFlight: step("m1"), Etcd: member("3.6.8", "3.6.8", "3.6.8")}, SetEtcd, "3.7.0"},
		{"set, the kubelet not there yet", Facts{InFlight: step("m1"), Etcd: member("3.7.0", "3.6.8", "3.6.8")}, Nothing, "3.7.0"},
		{"set, no container runs (restarting)", Facts{InFlight: step("m1"), Etcd: member("3.7.0", "", "3.6.8")}, Nothing, "3.7.0"},
		{"runs the target, the mirror lags: refresh it", Facts{InFlight: step("m1"), Etcd: member("3.7.0", "3.7.0", "3.6.8")}, RefreshMirror, "3.7.0"},
		{"mirror pod gone, the kubelet creates it", Facts{InFlight: step("m1"), Etcd: member("3.7.0", "", "")}, Nothing, "3.7.0"},
		{"all three at the target", Facts{InFlight: step("m1"), Etcd: member("3.7.0", "3.7.0", "3.7.0")}, Nothing, "3.7.0"},
		{"rollback: the stored pod back", Facts{RollingBack: step("m1"), Etcd: member("3.7.0", "", "3.6.8")}, SetEtcd, "3.6.8"},
		{"rollback: the mirror lags", Facts{RollingBack: step("m1"), Etcd: member("3.6.8", "3.6.8", "3.7.0")}, RefreshMirror, "3.6.8"},
		{"rollback before a new step of the same node", Facts{RollingBack: step("m1"), InFlight: step("m1"), Etcd: member("3.7.0", "3.7.0", "3.7.0")}, SetEtcd, "3.6.8"},
		{"etcd unseen: the member is not restarted", Facts{InFlight: step("m1"), Etcd: unseen("3.6.8", "3.6.8", "3.6.8")}, Nothing, "3.7.0"},
		{"two members, this one not among them: not restarted", Facts{InFlight: step("m1"), Etcd: &EtcdFacts{Stored: "3.6.8", Running: "3.6.8", Mirror: "3.6.8", Self: "m1", Members: three[1:]}}, Nothing, "3.7.0"},
		{"etcd unseen while the member restarts: the mirror still refreshed", Facts{InFlight: step("m1"), Etcd: unseen("3.7.0", "3.7.0", "3.6.8")}, RefreshMirror, "3.7.0"},
		{"etcd unseen: a rollback still sets the pod back", Facts{RollingBack: step("m1"), Etcd: unseen("3.7.0", "", "3.7.0")}, SetEtcd, "3.6.8"},
	}
	for _, tt := range tests {
		tt.f.Node, tt.f.Now = "m1", now
		got := Decide(tt.f)
		if got.Kind != tt.want || got.Version != tt.ver {
			t.Errorf("%s: %s %q (%s), want %s %q", tt.name, got.Kind, got.Version, got.Why, tt.want, tt.ver)
		}
	}
}

// A one-member etcd's step, in order: the helpers as learners then
// voters, one at a time; the apiservers naming them; the member's pod; the
// mirror; the apiservers naming the member alone; the leadership off a
// helper; the helpers removed, then their pods. And a rollback.
func TestDecideEtcdOneMember(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	step := &btypes.UpgradeStep{Component: "etcd", Node: "m1", From: "3.6.8", To: "3.7.0"}
	mp, helpers := memberAndHelpers(t)
	self := Member{ID: 1, Name: "m1", PeerURLs: []string{mp.PeerURL}, Healthy: true}
	helper := func(i int, learner, healthy bool) Member {
		return Member{ID: uint64(10 + i), Name: helpers[i-1].Name, PeerURLs: []string{helpers[i-1].PeerURL}, Learner: learner, Healthy: healthy}
	}
	const narrow = "https://127.0.0.1:2379"
	wide := narrow + "," + helpers[0].ClientURL + "," + helpers[1].ClientURL
	pods := func(names ...string) map[string]bool {
		out := map[string]bool{}
		for _, n := range names {
			out[n] = true
		}
		return out
	}
	h1, h2 := HelperPodName(1), HelperPodName(2)
	e := func(stored, running, mirror string, servers string, rolled bool, hp map[string]bool, leader uint64, members ...Member) *EtcdFacts {
		return &EtcdFacts{Stored: stored, Running: running, Mirror: mirror, Members: members, LeaderID: leader, Self: "m1",
			Helpers: helpers, HelperPods: hp, APIServerEtcd: servers, APIServerRolledOut: rolled}
	}
	tests := []struct {
		name   string
		f      Facts
		want   ActKind
		helper int
	}{
		{"alone: add the first learner", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", "3.6.8", narrow, true, nil, 1, self)}, AddHelper, 1},
		{"learner added: its pod", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", "3.6.8", narrow, true, nil, 1, self, Member{ID: 11, PeerURLs: []string{helpers[0].PeerURL}, Learner: true})}, StartHelper, 1},
		{"learner starting", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", "3.6.8", narrow, true, pods(h1), 1, self, helper(1, true, false))}, Nothing, 0},
		{"learner answers: promote", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", "3.6.8", narrow, true, pods(h1), 1, self, helper(1, true, true))}, PromoteHelper, 1},
		{"first a voter: the second learner", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", "3.6.8", narrow, true, pods(h1), 1, self, helper(1, false, true))}, AddHelper, 2},
		{"one learner at a time", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", "3.6.8", narrow, true, nil, 1, self, helper(1, true, true), helper(2, true, false))}, StartHelper, 1},
		{"a pod whose member is gone", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", "3.6.8", narrow, true, pods(h1), 1, self)}, DeleteHelperPod, 1},
		{"a voter with no pod: a person", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", "3.6.8", narrow, true, nil, 1, self, helper(1, false, false))}, Nothing, 0},
		{"both voters, the apiservers not yet", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", "3.6.8", narrow, true, pods(h1, h2), 1, self, helper(1, false, true), helper(2, false, true))}, Nothing, 0},
		{"named, still rolling", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", "3.6.8", wide, false, pods(h1, h2), 1, self, helper(1, false, true), helper(2, false, true))}, Nothing, 0},
		{"named and rolled: the member's pod", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", "3.6.8", wide, true, pods(h1, h2), 1, self, helper(1, false, true), helper(2, false, true))}, SetEtcd, 0},
		{"restarting", Facts{InFlight: step, Etcd: e("3.7.0", "", "3.6.8", wide, true, pods(h1, h2), 11, Member{ID: 1, Name: "m1", PeerURLs: []string{mp.PeerURL}}, helper(1, false, true), helper(2, false, true))}, Nothing, 0},
		{"runs, the mirror lags", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", "3.6.8", wide, true, pods(h1, h2), 11, self, helper(1, false, true), helper(2, false, true))}, RefreshMirror, 0},
		{"healthy at the target, still named", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", "3.7.0", wide, true, pods(h1, h2), 11, self, helper(1, false, true), helper(2, false, true))}, Nothing, 0},
		{"alone in the apiservers, a helper leads", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", "3.7.0", narrow, true, pods(h1, h2), 12, self, helper(1, false, true), helper(2, false, true))}, MoveLeader, 2},
		{"the member leads: remove the last helper first", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", "3.7.0", narrow, true, pods(h1, h2), 1, self, helper(1, false, true), helper(2, false, true))}, RemoveHelper, 2},
		{"members gone: their pods", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", "3.7.0", narrow, true, pods(h1, h2), 1, self)}, DeleteHelperPod, 1},
		{"done", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", "3.7.0", narrow, true, nil, 1, self)}, Nothing, 0},
		{"rollback: the pod back at once", Facts{RollingBack: step, Etcd: e("3.7.0", "", "3.7.0", wide, true, pods(h1, h2), 11, Member{ID: 1, Name: "m1", PeerURLs: []string{mp.PeerURL}}, helper(1, false, true), helper(2, false, true))}, SetEtcd, 0},
		{"rollback: back and healthy, the helpers go once unnamed", Facts{RollingBack: step, Etcd: e("3.6.8", "3.6.8", "3.6.8", narrow, true, pods(h1, h2), 1, self, helper(1, false, true), helper(2, false, true))}, RemoveHelper, 2},
		{"helpers left with no step: released", Facts{Etcd: e("3.6.8", "3.6.8", "3.6.8", narrow, true, pods(h2), 1, self)}, DeleteHelperPod, 2},
		{"no member answers, helpers stored: wait", Facts{InFlight: step, Etcd: &EtcdFacts{Stored: "3.7.0", Self: "m1", Helpers: helpers, HelperPods: pods(h1, h2)}}, Nothing, 0},
		{"no apiserver flag to name the helpers: the member's pod", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", "3.6.8", "", true, pods(h1, h2), 1, self, helper(1, false, true), helper(2, false, true))}, SetEtcd, 0},
	}
	for _, tt := range tests {
		tt.f.Node, tt.f.Now = "m1", now
		got := Decide(tt.f)
		if got.Kind != tt.want || got.Helper != tt.helper {
			t.Errorf("%s: %s helper %d (%s), want %s helper %d", tt.name, got.Kind, got.Helper, got.Why, tt.want, tt.helper)
		}
	}
}

// A two-member etcd's step: one helper beside the step's member, never a
// second; the member restarts only while the other member answers too;
// then the helper goes as one member's do.
func TestDecideEtcdTwoMembers(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	step := &btypes.UpgradeStep{Component: "etcd", Node: "m1", From: "3.6.8", To: "3.7.0"}
	mp, helpers := memberAndHelpers(t)
	self := Member{ID: 1, Name: "m1", PeerURLs: []string{mp.PeerURL}, Healthy: true}
	other := func(healthy bool) Member {
		return Member{ID: 2, Name: "m2", PeerURLs: []string{"https://192.0.2.11:2380"}, Healthy: healthy}
	}
	helper := func(learner, healthy bool) Member {
		return Member{ID: 11, Name: helpers[0].Name, PeerURLs: []string{helpers[0].PeerURL}, Learner: learner, Healthy: healthy}
	}
	const narrow = "https://127.0.0.1:2379"
	wide := narrow + ",https://192.0.2.11:2379," + helpers[0].ClientURL
	h1 := map[string]bool{HelperPodName(1): true}
	e := func(stored, running string, servers string, hp map[string]bool, leader uint64, members ...Member) *EtcdFacts {
		return &EtcdFacts{Stored: stored, Running: running, Mirror: running, Members: members, LeaderID: leader, Self: "m1",
			Helpers: helpers, HelperPods: hp, APIServerEtcd: servers, APIServerRolledOut: true}
	}
	tests := []struct {
		name   string
		f      Facts
		want   ActKind
		helper int
	}{
		{"two members: add one learner", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", narrow, nil, 2, self, other(true))}, AddHelper, 1},
		{"the learner answers: promote", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", narrow, h1, 2, self, other(true), helper(true, true))}, PromoteHelper, 1},
		{"one voter beside two members: no second helper, the apiservers next", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", narrow, h1, 2, self, other(true), helper(false, true))}, Nothing, 0},
		{"named and rolled: the member's pod", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", wide, h1, 2, self, other(true), helper(false, true))}, SetEtcd, 0},
		{"named and rolled, the other member silent: not restarted", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", wide, h1, 2, self, other(false), helper(false, true))}, Nothing, 0},
		{"healthy at the target, still named", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", wide, h1, 2, self, other(true), helper(false, true))}, Nothing, 0},
		{"narrowed, the helper leads: the leadership first", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", narrow, h1, 11, self, other(true), helper(false, true))}, MoveLeader, 1},
		{"narrowed, the other member leads: remove the helper", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", narrow, h1, 2, self, other(true), helper(false, true))}, RemoveHelper, 1},
		{"removed: its pod", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", narrow, h1, 2, self, other(true))}, DeleteHelperPod, 1},
		{"done", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", narrow, nil, 2, self, other(true))}, Nothing, 0},
		{"rollback of a member that failed: back at once", Facts{RollingBack: step, Etcd: e("3.7.0", "", narrow, h1, 2, Member{ID: 1, Name: "m1", PeerURLs: []string{mp.PeerURL}}, other(true), helper(false, true))}, SetEtcd, 0},
		{"rollback of a member healthy at the target, helper named, the other answers: back", Facts{RollingBack: step, Etcd: e("3.7.0", "3.7.0", wide, h1, 2, self, other(true), helper(false, true))}, SetEtcd, 0},
		{"rollback of a member healthy at the target, the other silent: not restarted", Facts{RollingBack: step, Etcd: e("3.7.0", "3.7.0", wide, h1, 2, self, other(false), helper(false, true))}, Nothing, 0},
		{"rollback of a member healthy at the target, the apiservers narrowed: wait for them", Facts{RollingBack: step, Etcd: e("3.7.0", "3.7.0", narrow, h1, 2, self, other(true), helper(false, true))}, Nothing, 0},
		{"rollback of a member healthy at the target, its helper removed: added again first", Facts{RollingBack: step, Etcd: e("3.7.0", "3.7.0", narrow, nil, 2, self, other(true))}, AddHelper, 1},
		{"rollback done: the helper released", Facts{RollingBack: step, Etcd: e("3.6.8", "3.6.8", narrow, h1, 2, self, other(true), helper(false, true))}, RemoveHelper, 1},
		{"another node's helper left behind is no member", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", narrow, nil, 2, self, other(true), Member{ID: 21, Name: "m2-upgrade-helper-1", PeerURLs: []string{"https://192.0.2.11:2390"}, Healthy: true})}, AddHelper, 1},
		{"the other member's step: nothing here", Facts{InFlight: &btypes.UpgradeStep{Component: "etcd", Node: "m2", From: "3.6.8", To: "3.7.0"}, Etcd: e("3.7.0", "3.7.0", narrow, nil, 2, self, other(true))}, Nothing, 0},
	}
	for _, tt := range tests {
		tt.f.Node, tt.f.Now = "m1", now
		got := Decide(tt.f)
		if got.Kind != tt.want || got.Helper != tt.helper {
			t.Errorf("%s: %s helper %d (%s), want %s helper %d", tt.name, got.Kind, got.Helper, got.Why, tt.want, tt.helper)
		}
	}
}

func TestIsHelperName(t *testing.T) {
	for name, want := range map[string]bool{
		HelperName("master-1", 1): true, HelperName("m2", 2): true, "m2-upgrade-helper-10": true,
		"master-1": false, "-upgrade-helper-1": false, "m1-upgrade-helper-": false, "m1-upgrade-helper-0": false, "m1-upgrade-helper-x": false, "": false,
	} {
		if got := IsHelperName(name); got != want {
			t.Errorf("IsHelperName(%q) = %v, want %v", name, got, want)
		}
	}
}

// memberAndHelpers is member m1's pod as the decision tests read it, and
// every helper it may have.
func memberAndHelpers(t *testing.T) (MemberPod, []Helper) {
	t.Helper()
	mp := MemberPod{Name: "m1", ClientURL: "https://127.0.0.1:2379", PeerURL: "https://192.0.2.10:2380", MetricsURL: "http://127.0.0.1:2381", DataDir: "/var/lib/etcd"}
	var helpers []Helper
	for i := 1; i <= Helpers; i++ {
		h, err := HelperOf(mp, i)
		if err != nil {
			t.Fatal(err)
		}
		helpers = append(helpers, h)
	}
	return mp, helpers
}

// Where the member shares its client address, no apiserver is named or
// waited for: the first helper, once a voter, stops and starts again on
// that address too, and the member restarts only once it serves there;
// afterwards it stops (only while every other voter answers) before its
// member is removed, and its data goes last; stopped, it starts again if
// another voter fails. Three members add that one helper too.
func TestDecideEtcdSharedAddress(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	step := &btypes.UpgradeStep{Component: "etcd", Node: "m1", From: "3.6.8", To: "3.7.0"}
	mp, helpers := memberAndHelpers(t)
	self := Member{ID: 1, Name: "m1", PeerURLs: []string{mp.PeerURL}, Healthy: true}
	others := []Member{{ID: 2, Name: "m2", PeerURLs: []string{"https://192.0.2.11:2380"}, Healthy: true}, {ID: 3, Name: "m3", PeerURLs: []string{"https://192.0.2.12:2380"}, Healthy: true}}
	helper := func(i int, learner, healthy bool) Member {
		return Member{ID: uint64(10 + i), Name: helpers[i-1].Name, PeerURLs: []string{helpers[i-1].PeerURL}, Learner: learner, Healthy: healthy}
	}
	h1, h2 := HelperPodName(1), HelperPodName(2)
	const narrow = "https://127.0.0.1:2379"
	type state struct {
		pods, shares, listens, data []string
	}
	set := func(names []string) map[string]bool {
		out := map[string]bool{}
		for _, n := range names {
			out[n] = true
		}
		return out
	}
	e := func(stored, running string, st state, leader uint64, members ...Member) *EtcdFacts {
		return &EtcdFacts{Stored: stored, Running: running, Mirror: running, Members: members, LeaderID: leader, Self: "m1",
			Helpers: helpers, HelperPods: set(st.pods), APIServerEtcd: narrow, APIServerRolledOut: true,
			SharesAddress: true, HelperShares: set(st.shares), HelperListens: set(st.listens), HelperData: set(st.data)}
	}
	both := state{pods: []string{h1, h2}, listens: []string{h1, h2}, data: []string{h1, h2}}
	stopping := state{pods: []string{h2}, listens: []string{h1, h2}, data: []string{h1, h2}}
	stopped := state{pods: []string{h2}, listens: []string{h2}, data: []string{h1, h2}}
	sharing := state{pods: []string{h1, h2}, shares: []string{h1}, listens: []string{h1, h2}, data: []string{h1, h2}}
	one := func(st state) state { // three members: helper 1 alone
		return state{pods: slices.DeleteFunc(slices.Clone(st.pods), func(n string) bool { return n == h2 }), shares: st.shares,
			listens: slices.DeleteFunc(slices.Clone(st.listens), func(n string) bool { return n == h2 }), data: slices.DeleteFunc(slices.Clone(st.data), func(n string) bool { return n == h2 })}
	}
	three := func(members ...Member) []Member { return append(append([]Member{self}, others...), members...) }
	tests := []struct {
		name   string
		f      Facts
		want   ActKind
		helper int
	}{
		{"one member, both voters: the first stops, no apiserver waited for", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", both, 1, self, helper(1, false, true), helper(2, false, true))}, StopHelper, 1},
		{"it still listens: wait", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", stopping, 1, self, helper(1, false, false), helper(2, false, true))}, Nothing, 0},
		{"it still answers: wait", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", stopping, 1, self, helper(1, false, true), helper(2, false, true))}, Nothing, 0},
		{"stopped: stored again, sharing", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", stopped, 1, self, helper(1, false, false), helper(2, false, true))}, ShareHelper, 1},
		{"stopped with no data: removed, not started on none", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", state{pods: []string{h2}, listens: []string{h2}, data: []string{h2}}, 1, self, helper(1, false, false), helper(2, false, true))}, RemoveHelper, 1},
		{"sharing, starting: wait", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", sharing, 1, self, helper(1, false, false), helper(2, false, true))}, Nothing, 0},
		{"sharing and healthy: the member's pod", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", sharing, 1, self, helper(1, false, true), helper(2, false, true))}, SetEtcd, 0},
		{"sharing, the second helper silent: not restarted", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", sharing, 1, self, helper(1, false, true), helper(2, false, false))}, Nothing, 0},
		{"healthy at the target, the sharing helper leads: the leadership first", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", sharing, 11, self, helper(1, false, true), helper(2, false, true))}, MoveLeader, 1},
		{"healthy at the target: the sharing helper stops first", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", sharing, 1, self, helper(1, false, true), helper(2, false, true))}, StopHelper, 1},
		{"it still listens: its member stays", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", state{pods: []string{h2}, shares: nil, listens: []string{h1, h2}, data: []string{h1, h2}}, 1, self, helper(1, false, false), helper(2, false, true))}, Nothing, 0},
		{"healthy at the target, another voter silent: the sharing helper does not stop", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", sharing, 1, self, helper(1, false, true), helper(2, false, false))}, Nothing, 0},
		{"stopped: its member removed, its data kept", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", stopped, 1, self, helper(1, false, false), helper(2, false, true))}, RemoveHelper, 1},
		{"stopped, another voter fails: it starts again on its data", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", stopped, 1, self, helper(1, false, false), helper(2, false, false))}, ShareHelper, 1},
		{"its data gone: its member", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", state{pods: []string{h2}, listens: []string{h2}, data: []string{h2}}, 1, self, helper(1, false, false), helper(2, false, true))}, RemoveHelper, 1},
		{"data left of a helper removed: deleted", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", state{data: []string{h1}}, 1, self)}, DeleteHelperPod, 1},
		{"then the second as before", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", state{pods: []string{h2}, listens: []string{h2}, data: []string{h2}}, 1, self, helper(2, false, true))}, RemoveHelper, 2},
		{"three members: one learner", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", state{}, 2, three()...)}, AddHelper, 1},
		{"three members, one voter beside: it stops, no second helper", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", one(both), 2, three(helper(1, false, true))...)}, StopHelper, 1},
		{"three members, it shares: the member's pod", Facts{InFlight: step, Etcd: e("3.6.8", "3.6.8", one(sharing), 2, three(helper(1, false, true))...)}, SetEtcd, 0},
		{"three members, the member restarts: wait", Facts{InFlight: step, Etcd: e("3.7.0", "", one(sharing), 2, append([]Member{{ID: 1, Name: "m1", PeerURLs: []string{mp.PeerURL}}}, append(others, helper(1, false, true))...)...)}, Nothing, 0},
		{"three members, healthy at the target: the helper stops", Facts{InFlight: step, Etcd: e("3.7.0", "3.7.0", one(sharing), 2, three(helper(1, false, true))...)}, StopHelper, 1},
		{"a rollback of a member that failed: back at once", Facts{RollingBack: step, Etcd: e("3.7.0", "", sharing, 11, Member{ID: 1, Name: "m1", PeerURLs: []string{mp.PeerURL}}, helper(1, false, true), helper(2, false, true))}, SetEtcd, 0},
		{"a stopped sharing helper left with no step: removed, then its data", Facts{Etcd: e("3.6.8", "3.6.8", stopped, 1, self, helper(1, false, false), helper(2, false, true))}, RemoveHelper, 1},
	}
	for _, tt := range tests {
		tt.f.Node, tt.f.Now = "m1", now
		got := Decide(tt.f)
		if got.Kind != tt.want || got.Helper != tt.helper {
			t.Errorf("%s: %s helper %d (%s), want %s helper %d", tt.name, got.Kind, got.Helper, got.Why, tt.want, tt.helper)
		}
	}
}

// TestMine: which steps an agent takes. An agent without the kubelet (a
// promoted master's daemon, beside the `bootlet upgrade agent` it ran as a
// worker) takes its etcd member's only, so two agents never act on one
// step.
func TestMine(t *testing.T) {
	step := func(comp, node string) *btypes.UpgradeStep {
		return &btypes.UpgradeStep{Component: comp, Node: node, From: "v1.36.3", To: "v1.37.2"}
	}
	tests := []struct {
		name                    string
		f                       Facts
		takesKubelet, takesEtcd bool
		want                    bool
	}{
		{"nothing recorded", Facts{}, true, true, false},
		{"this node's kubelet, a first-boot master's agent", Facts{InFlight: step(kubelet, "m1")}, true, true, true},
		{"this node's kubelet, a worker's agent", Facts{InFlight: step(kubelet, "m1")}, true, false, true},
		{"this node's kubelet, an etcd-only agent", Facts{InFlight: step(kubelet, "m1")}, false, true, false},
		{"this node's kubelet put back, an etcd-only agent", Facts{RollingBack: step(kubelet, "m1")}, false, true, false},
		{"this node's etcd, an etcd-only agent", Facts{InFlight: step(etcd, "m1")}, false, true, true},
		{"this node's etcd put back, an etcd-only agent", Facts{RollingBack: step(etcd, "m1")}, false, true, true},
		{"this node's etcd, a first-boot master's agent", Facts{InFlight: step(etcd, "m1")}, true, true, true},
		{"this node's etcd, a worker's agent (on a promoted master too)", Facts{InFlight: step(etcd, "m1")}, true, false, false},
		{"another node's etcd", Facts{InFlight: step(etcd, "m2")}, false, true, false},
		{"another node's kubelet", Facts{InFlight: step(kubelet, "m2")}, true, true, false},
		{"the apiserver's on this node", Facts{InFlight: step("kube-apiserver", "m1")}, true, true, false},
	}
	for _, tt := range tests {
		tt.f.Node, tt.f.EtcdOnly = "m1", !tt.takesKubelet
		if got := mine(tt.f, tt.takesEtcd); got != tt.want {
			t.Errorf("%s: mine = %v, want %v", tt.name, got, tt.want)
		}
	}
}
