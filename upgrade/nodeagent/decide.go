package nodeagent

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bootlet/bootlet/internal/etcdapi"
	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
)

// Facts are what one round of the agent observed.
type Facts struct {
	Node string
	// InFlight and RollingBack are the controller's, from the status.
	InFlight, RollingBack *btypes.UpgradeStep
	// Binary is the version the kubelet binary in place reports; Kept
	// that of the binary kept beside it ("" none).
	Binary, Kept string
	// Running is the version the node's kubelet reports in the API.
	Running string
	// RestartedAt is when this agent last restarted the kubelet (zero:
	// not since it started).
	RestartedAt time.Time
	Now         time.Time
	// Etcd is this node's etcd member as the agent sees it; nil where the
	// agent holds no member (a worker's agent).
	Etcd *EtcdFacts
	// EtcdOnly: the agent has no kubelet binary (a promoted master's
	// daemon); another agent takes this node's kubelet steps.
	EtcdOnly bool
}

// EtcdFacts are the versions of this node's etcd member, as its three
// places show them.
type EtcdFacts struct {
	// Stored is the version bootlet's stored pod names: what its static
	// copy in the kubelet's manifest dir runs, and what a reboot brings
	// back.
	Stored string
	// Running is the version the member's container runs (the mirror
	// pod's status); "" while none runs.
	Running string
	// Mirror is the version the mirror pod's spec names; "" with no
	// mirror pod. The kubelet does not refresh a mirror pod whose static
	// pod changed under the same UID, so it lags the stored pod until it
	// is deleted and the kubelet creates it again.
	Mirror string

	// What an etcd step with helpers needs (helper.go): etcd's own member
	// list (nil: no member answered), its leader, this member's name and
	// its helpers (every helper it may have: a step adds the first
	// upgrade.EtcdHelpersFor of them), the helpers' pods stored (by pod
	// name), and the apiserver DaemonSet's --etcd-servers and whether
	// every master's apiserver runs that spec.
	Members            []Member
	LeaderID           uint64
	Self               string
	Helpers            []Helper
	HelperPods         map[string]bool
	APIServerEtcd      string
	APIServerRolledOut bool

	// Where the member shares its client address (SharesAddress: its pod
	// says --socket-reuse-port, render's), the step's first helper serves
	// that address while the member restarts, and the apiservers are not
	// rolled (upgrade/etcdservers.go says why). HelperShares are the
	// stored helper pods that listen there (by pod name); HelperListens
	// the helpers whose ports a process still listens on, so a stopped
	// helper's process is known gone before its pod is stored again or
	// its member removed; HelperData those whose data directory exists.
	SharesAddress bool
	HelperShares  map[string]bool
	HelperListens map[string]bool
	HelperData    map[string]bool
}

// Member is one member of etcd's own list, and whether its status call
// answered this round with a leader and no error (etcdapi.StatusHealthy).
type Member = etcdapi.Member

// ActKind is what the agent does.
type ActKind string

// The acts.
const (
	// Nothing to do.
	Nothing ActKind = "Nothing"
	// Install takes Version's kubelet out of its image, keeps the binary
	// in place beside it, puts the new one in place and restarts.
	Install ActKind = "Install"
	// Restore puts the kept binary back in place and restarts.
	Restore ActKind = "Restore"
	// Restart restarts the kubelet, whose binary is already Version's.
	Restart ActKind = "Restart"
	// SetEtcd sets the image of this node's etcd pod to Version's in
	// bootlet's store; the handoff rewrites its static copy and the
	// kubelet replaces the container (the container's hash covers its
	// image).
	SetEtcd ActKind = "SetEtcd"
	// RefreshMirror deletes the etcd member's mirror pod, whose spec
	// still names the version it left, so that the kubelet creates it
	// again from the static pod: the API then shows what runs.
	RefreshMirror ActKind = "RefreshMirror"

	// The helpers of an etcd step of one or two members (helper.go), by
	// Act.Helper:
	// AddHelper adds helper i as a learner; StartHelper stores its pod
	// (its data directory emptied first); PromoteHelper makes it a voter
	// once it has caught up; RemoveHelper removes it from the cluster,
	// MoveLeader first hands the leadership to this node's member when a
	// helper holds it; DeleteHelperPod deletes its pod and data.
	AddHelper       ActKind = "AddHelper"
	StartHelper     ActKind = "StartHelper"
	PromoteHelper   ActKind = "PromoteHelper"
	RemoveHelper    ActKind = "RemoveHelper"
	MoveLeader      ActKind = "MoveLeader"
	DeleteHelperPod ActKind = "DeleteHelperPod"
	// Where the member shares its client address: StopHelper deletes the
	// sharing helper's pod and keeps its data; ShareHelper stores its pod
	// again, listening on the member's client address too, on that data.
	StopHelper  ActKind = "StopHelper"
	ShareHelper ActKind = "ShareHelper"
)

// SharingHelper is the helper that serves the member's client address
// where the member shares it: the first, which every such step adds.
const SharingHelper = 1

// Act is a round's decision.
type Act struct {
	Kind    ActKind
	Version string
	Why     string
	// Helper is the helper an act on one names (1-based).
	Helper int
}

// RestartSettle is how long a restarted kubelet has to report its new
// version before the agent restarts it again: its first status update
// comes within seconds of its start, well inside it.
const RestartSettle = time.Minute

// Decide is the agent's round: bring the binary in place, then the running
// kubelet, to the version the step asks for this node. A rollback comes
// first; a step in flight waits for the controller's drain. An etcd
// member's step is decided by decideEtcd.
func Decide(f Facts) Act {
	if s := etcdStep(f); s != nil {
		return decideEtcd(f, s)
	}
	if e := f.Etcd; e != nil && hasHelpers(e) {
		// Helpers left by a step that is no longer recorded (a person
		// set another version in the middle): released as a step's are.
		return releaseHelpers(e, "helpers of an etcd step that is no longer in flight remain")
	}
	if f.EtcdOnly {
		return Act{Kind: Nothing, Why: "this agent takes no kubelet step: the node's `bootlet upgrade agent` does"}
	}
	var want string
	var why string
	switch s := f.RollingBack; {
	case s != nil && s.Component == kubelet && s.Node == f.Node:
		want, why = s.From, "the kubelet's step is being put back"
		if f.Binary != want {
			if f.Kept == want {
				return Act{Kind: Restore, Version: want, Why: why}
			}
			return Act{Kind: Install, Version: want, Why: why + "; no kept binary of " + want}
		}
	case f.InFlight != nil && f.InFlight.Component == kubelet && f.InFlight.Node == f.Node:
		s := f.InFlight
		if s.Drained == nil {
			return Act{Kind: Nothing, Version: "", Why: "waiting for the controller to drain the node"}
		}
		want, why = s.To, "the kubelet's step is in flight"
		if f.Binary != want {
			return Act{Kind: Install, Version: want, Why: why}
		}
	default:
		return Act{Kind: Nothing, Version: "", Why: "no kubelet step for this node"}
	}
	if f.Running != want && f.Now.Sub(f.RestartedAt) >= RestartSettle {
		return Act{Kind: Restart, Version: want, Why: why + "; the binary is in place, the running kubelet reports " + f.Running}
	}
	return Act{Kind: Nothing, Version: want, Why: "the kubelet runs " + want + " or was just restarted"}
}

// etcdStep is the etcd step for this node's member, the rollback first;
// nil with none.
func etcdStep(f Facts) *btypes.UpgradeStep {
	for _, s := range []*btypes.UpgradeStep{f.RollingBack, f.InFlight} {
		if s != nil && s.Component == etcd && s.Node == f.Node {
			return s
		}
	}
	return nil
}

// decideEtcd brings this node's member to the version step s asks (its
// From while it is put back): first the stored pod, which the kubelet
// follows, then the mirror pod once the container runs it. The gate
// (upgrade.ObserveGate) reads the member's version from the mirror pod, so
// the step passes only once all three agree. Nothing is drained: etcd's
// other members keep quorum, three or more of them, with helpers where
// etcd has fewer (decideHelped).
func decideEtcd(f Facts, s *btypes.UpgradeStep) Act {
	rollingBack := s == f.RollingBack
	want, why := s.To, "etcd's step is in flight"
	if rollingBack {
		want, why = s.From, "etcd's step is being put back"
	}
	e := f.Etcd
	if e == nil {
		return Act{Kind: Nothing, Why: "etcd's step names this node, whose daemon holds no etcd member"}
	}
	if needsHelpers(e) {
		return decideHelped(e, want, why, rollingBack)
	}
	if e.Stored != want && !rollingBack {
		// The member restarts only where the others keep the quorum
		// (three or more, which etcd itself must say): a member unseen
		// this round is not restarted without its helpers. A rollback
		// needs no etcd: the member it puts back failed.
		if n := properMembers(e); n < upgrade.EtcdStepMembers {
			if e.Members == nil {
				return Act{Kind: Nothing, Version: want, Why: why + "; no etcd member answers"}
			}
			return Act{Kind: Nothing, Version: want, Why: fmt.Sprintf("%s; etcd lists %d member(s)", why, n)}
		}
	}
	switch {
	case e.Stored != want:
		return Act{Kind: SetEtcd, Version: want, Why: why + "; the stored pod runs " + e.Stored}
	case e.Running == want && e.Mirror != "" && e.Mirror != want:
		return Act{Kind: RefreshMirror, Version: want, Why: why + "; the member runs " + want + ", its mirror pod still names " + e.Mirror}
	}
	return Act{Kind: Nothing, Version: want, Why: "the member's pod names " + want + "; the kubelet runs " + e.Running}
}

// properMembers counts etcd's members, helpers aside (isHelper).
func properMembers(e *EtcdFacts) int {
	n := 0
	for _, m := range e.Members {
		if !isHelper(e, m) {
			n++
		}
	}
	return n
}

// needsHelpers reports whether etcd has fewer members than keep a
// quorum while one restarts (one or two, its helpers aside): this
// member's step then adds helpers.
func needsHelpers(e *EtcdFacts) bool {
	return e.Members != nil && upgrade.EtcdHelpersFor(properMembers(e), e.SharesAddress) > 0
}

// decideHelped takes this member's step to want where etcd has one or two
// members: helpers up (voters beside the member, as many as make three),
// the apiservers naming them, the member's pod set to want once every
// other member and helper is healthy, the member healthy at want, the
// apiservers naming their own member alone again, the helpers released. A
// rollback sets the pod back at once where the member failed (it serves
// nothing anyway), and takes the forward path's care where it is healthy
// (its restart would cost a quorum otherwise), then releases the helpers
// the same way. Each round decides from what it sees, so an agent killed
// anywhere in between does the rest at its next round.
func decideHelped(e *EtcdFacts, want, why string, rollingBack bool) Act {
	self := memberNamed(e, e.Self)
	if self == nil {
		return Act{Kind: Nothing, Version: want, Why: why + "; etcd lists no member " + e.Self}
	}
	if e.Stored != want {
		if rollingBack && (!self.Healthy || e.Running != e.Stored) {
			// The member that failed serves nothing: back at once.
			return Act{Kind: SetEtcd, Version: want, Why: why + "; the stored pod runs " + e.Stored}
		}
		// Forward, or back from a member that is healthy at the version
		// it left for (the gate failed on something else): it restarts
		// only as it would forward, with the helpers up and named and
		// every other member answering, else etcd loses its quorum.
		if act, ready := ensureHelpers(e, want, why); !ready {
			return act
		}
		for _, m := range e.Members {
			if m.Name != e.Self && !m.Healthy {
				// The others are the quorum while this member restarts
				// (or while the sharing helper restarts).
				return Act{Kind: Nothing, Version: want, Why: why + "; member " + memberLabel(m) + " does not answer: the member restarts only while every other keeps the quorum"}
			}
		}
		if e.SharesAddress {
			if h := e.Helpers[SharingHelper-1]; !e.HelperShares[h.Pod] {
				return Act{Kind: StopHelper, Version: want, Helper: h.Index, Why: why + "; helper " + h.Name + " is a voter: it stops, to start again on the member's client address too"}
			}
			return Act{Kind: SetEtcd, Version: want, Why: why + "; the helpers keep the quorum and " + e.Helpers[SharingHelper-1].Name + " serves the member's client address; the stored pod runs " + e.Stored}
		}
		if (e.APIServerEtcd != "" && !namesAll(e.APIServerEtcd, stepHelpers(e))) || !e.APIServerRolledOut {
			return Act{Kind: Nothing, Version: want, Why: why + "; the helpers are voters: waiting for the apiservers to name them (the controller rolls them)"}
		}
		return Act{Kind: SetEtcd, Version: want, Why: why + "; the helpers keep the quorum and the apiservers name them; the stored pod runs " + e.Stored}
	}
	if e.Running == want && e.Mirror != "" && e.Mirror != want {
		return Act{Kind: RefreshMirror, Version: want, Why: why + "; the member runs " + want + ", its mirror pod still names " + e.Mirror}
	}
	if e.Running != want || !self.Healthy {
		return Act{Kind: Nothing, Version: want, Why: why + "; the member restarts at " + want}
	}
	if !hasHelpers(e) {
		return Act{Kind: Nothing, Version: want, Why: "the member runs " + want + " alone"}
	}
	return releaseHelpers(e, why+"; the member is healthy at "+want)
}

// ensureHelpers brings the step's helpers up one at a time (etcd admits
// one learner at a time): ready once each is a healthy voter with its pod.
func ensureHelpers(e *EtcdFacts, want, why string) (Act, bool) {
	for _, h := range stepHelpers(e) {
		m := memberWithPeer(e, h.PeerURL)
		pod := e.HelperPods[h.Pod]
		switch {
		case m == nil && pod:
			// Its member is gone (removed, or never added): the pod's
			// data cannot rejoin.
			return Act{Kind: DeleteHelperPod, Version: want, Helper: h.Index, Why: why + "; helper " + h.Name + "'s pod has no member"}, false
		case m == nil:
			if l := learner(e); l != nil {
				return Act{Kind: Nothing, Version: want, Why: why + "; waiting for learner " + l.Name + " to be promoted"}, false
			}
			return Act{Kind: AddHelper, Version: want, Helper: h.Index, Why: fmt.Sprintf("%s; etcd has %d member(s): adding helper %s as a learner", why, properMembers(e), h.Name)}, false
		case !pod && !m.Learner && e.SharesAddress && h.Index == SharingHelper:
			// Stopped to start again on the member's address (StopHelper).
			if e.HelperListens[h.Pod] || m.Healthy {
				return Act{Kind: Nothing, Version: want, Why: why + "; helper " + h.Name + " stops"}, false
			}
			if !e.HelperData[h.Pod] {
				// Its data is its membership: a voter started on none
				// would panic etcd's raft. It goes, and comes again.
				return Act{Kind: RemoveHelper, Version: want, Helper: h.Index, Why: why + "; helper " + h.Name + " stopped with no data"}, false
			}
			return Act{Kind: ShareHelper, Version: want, Helper: h.Index, Why: why + "; helper " + h.Name + " stopped: it starts again on the member's client address too"}, false
		case !pod:
			if !m.Learner {
				return Act{Kind: Nothing, Version: want, Why: why + "; helper " + h.Name + " is a voter without its pod: a person must look (bootlet etcd, docs/operations.md)"}, false
			}
			return Act{Kind: StartHelper, Version: want, Helper: h.Index, Why: why + "; learner " + h.Name + " was added"}, false
		case !m.Healthy:
			return Act{Kind: Nothing, Version: want, Why: why + "; helper " + h.Name + " starts"}, false
		case m.Learner:
			return Act{Kind: PromoteHelper, Version: want, Helper: h.Index, Why: why + "; learner " + h.Name + " answers"}, false
		}
	}
	return Act{}, true
}

// stepHelpers are the helpers this member's step adds: the first
// upgrade.EtcdHelpersFor of them, for as many members as etcd lists.
func stepHelpers(e *EtcdFacts) []Helper {
	return e.Helpers[:min(upgrade.EtcdHelpersFor(properMembers(e), e.SharesAddress), len(e.Helpers))]
}

// releaseHelpers removes the helpers once the apiservers no longer name
// them: the leadership first, if a helper holds it, then each member, then
// the pods.
func releaseHelpers(e *EtcdFacts, why string) Act {
	if namesAny(e.APIServerEtcd, e.Helpers) || !e.APIServerRolledOut {
		return Act{Kind: Nothing, Why: why + "; waiting for the apiservers to name the member alone (the controller rolls them)"}
	}
	if e.Members == nil {
		return Act{Kind: Nothing, Why: why + "; no etcd member answers"}
	}
	if act, done := releaseSharingHelper(e, why); !done {
		return act
	}
	for i := len(e.Helpers) - 1; i >= 0; i-- {
		h := e.Helpers[i]
		if m := memberWithPeer(e, h.PeerURL); m != nil {
			if m.ID == e.LeaderID {
				return Act{Kind: MoveLeader, Helper: h.Index, Why: why + "; helper " + h.Name + " leads: the leadership moves to " + e.Self + " first"}
			}
			return Act{Kind: RemoveHelper, Helper: h.Index, Why: why + "; removing helper " + h.Name}
		}
	}
	for _, h := range e.Helpers {
		if e.HelperPods[h.Pod] || e.HelperData[h.Pod] {
			return Act{Kind: DeleteHelperPod, Helper: h.Index, Why: why + "; helper " + h.Name + " is no longer a member"}
		}
	}
	return Act{Kind: Nothing, Why: "the helpers are released"}
}

// releaseSharingHelper releases first the helper that serves the
// member's client address, where it does. Its process stops before its
// member goes (removed while it runs, etcd would end it at once, and the
// requests it holds with it), so the apiserver's connection moves to the
// member; and only while every other voter answers, since a stopped voter
// counts against the quorum as a lost one does. Once nothing listens on
// its ports its member is removed (etcd refuses a removal that would cost
// the running quorum), and its data goes last, with its pod's (the
// others' loop): a member removed can never be started on it again. A
// stopped helper whose member is still listed while another voter fails
// is started again on its data: it is one of the quorum. done once it is
// an ordinary helper or gone.
func releaseSharingHelper(e *EtcdFacts, why string) (act Act, done bool) {
	if !e.SharesAddress {
		return Act{}, true
	}
	h := e.Helpers[SharingHelper-1]
	m := memberWithPeer(e, h.PeerURL)
	shares := e.HelperShares[h.Pod]
	stopped := m != nil && !e.HelperPods[h.Pod]
	if !shares && !stopped || m == nil {
		// None, one that never served the address (or no longer does), or
		// one removed while it shared (a person): released as the others.
		return Act{}, true
	}
	var silent *Member
	for i := range e.Members {
		if o := &e.Members[i]; o.ID != m.ID && !o.Learner && !o.Healthy {
			silent = o
		}
	}
	switch {
	case shares && silent != nil:
		return Act{Kind: Nothing, Why: why + "; member " + memberLabel(*silent) + " does not answer: helper " + h.Name + " stops only while every other voter keeps the quorum"}, false
	case shares && m.ID == e.LeaderID:
		return Act{Kind: MoveLeader, Helper: h.Index, Why: why + "; helper " + h.Name + " leads: the leadership moves to " + e.Self + " first"}, false
	case shares:
		return Act{Kind: StopHelper, Helper: h.Index, Why: why + "; helper " + h.Name + " stops: the member's client address is the member's alone again"}, false
	case e.HelperListens[h.Pod] || m.Healthy:
		return Act{Kind: Nothing, Why: why + "; helper " + h.Name + " stops"}, false
	case silent != nil && e.HelperData[h.Pod]:
		return Act{Kind: ShareHelper, Helper: h.Index, Why: why + "; member " + memberLabel(*silent) + " does not answer while helper " + h.Name + " is stopped: it starts again on its data"}, false
	}
	return Act{Kind: RemoveHelper, Helper: h.Index, Why: why + "; removing helper " + h.Name + ", stopped"}, false
}

func hasHelpers(e *EtcdFacts) bool {
	for _, h := range e.Helpers {
		if e.HelperPods[h.Pod] || e.HelperData[h.Pod] || memberWithPeer(e, h.PeerURL) != nil {
			return true
		}
	}
	return false
}

// isHelper reports whether m is a helper: one of this member's (by name,
// or by peer URL while it has no name yet), or another node's by its name.
func isHelper(e *EtcdFacts, m Member) bool {
	for _, h := range e.Helpers {
		if m.Name == h.Name || slices.Contains(m.PeerURLs, h.PeerURL) {
			return true
		}
	}
	return IsHelperName(m.Name)
}

// memberLabel names m for a person: its name, or its peer URL while it has
// none (added, not yet started).
func memberLabel(m Member) string {
	if m.Name != "" || len(m.PeerURLs) == 0 {
		return m.Name
	}
	return m.PeerURLs[0]
}

func memberNamed(e *EtcdFacts, name string) *Member {
	for i := range e.Members {
		if e.Members[i].Name == name {
			return &e.Members[i]
		}
	}
	return nil
}

func memberWithPeer(e *EtcdFacts, peer string) *Member {
	for i := range e.Members {
		if slices.Contains(e.Members[i].PeerURLs, peer) {
			return &e.Members[i]
		}
	}
	return nil
}

func learner(e *EtcdFacts) *Member {
	for i := range e.Members {
		if e.Members[i].Learner {
			return &e.Members[i]
		}
	}
	return nil
}

// namesAll and namesAny: whether the apiservers' --etcd-servers names
// every helper's client URL, or any.
func namesAll(servers string, hs []Helper) bool {
	urls := strings.Split(servers, ",")
	for _, h := range hs {
		if !slices.Contains(urls, h.ClientURL) {
			return false
		}
	}
	return len(hs) > 0
}

func namesAny(servers string, hs []Helper) bool {
	urls := strings.Split(servers, ",")
	for _, h := range hs {
		if slices.Contains(urls, h.ClientURL) {
			return true
		}
	}
	return false
}

const (
	kubelet = "kubelet"
	etcd    = "etcd"
)
