package masters

import (
	"maps"
	"net"
	"slices"
	"strconv"
	"time"
)

// Label is the label that makes a node a master: kubeadm's, which
// NodeRestriction forbids a kubelet to set on its own Node.
const Label = "node-role.kubernetes.io/control-plane"

// What a node's own daemon reports on its Node, as annotations with the
// value "true". A kubelet may annotate its own Node, so each is only a
// node's word about itself: none makes a node a master (only Label does),
// and a false one only hastens its own demotion.
const (
	// AnnotationMemberHost: the node's daemon can start an etcd member
	// when its node is promoted.
	AnnotationMemberHost = "bootlet.dev/etcd-member-host"
	// AnnotationWithdrawn: the node no longer offers itself for the API
	// address.
	AnnotationWithdrawn = "bootlet.dev/api-address-withdrawn"
	// AnnotationCleaned: the node has set its etcd data aside and dropped
	// its checkpoints.
	AnnotationCleaned = "bootlet.dev/master-cleaned"
)

// LabelLeader marks a node whose daemon can lead the masters' controller
// (with the upgrade's and the signer): a first-boot master's, which holds
// render's admin identity and the etcd CA, and its own daemon sets it with
// that identity; and a node labelled a master whose member votes, whose
// daemon leads with an identity it makes from the CAs its credential
// mirror holds, and the controller sets it with the control plane's
// placement. The prefix is one NodeRestriction forbids a kubelet to set on
// its own Node, so a node cannot claim it.
const LabelLeader = "node-restriction.kubernetes.io/bootlet-masters-leader"

// EtcdPeerPort is the port of every member's peer URL (render's).
const EtcdPeerPort = 2380

// How long each wait of a promotion may take before it is called failed.
const (
	// LearnerStartTimeout bounds the time from the learner's add to its
	// first start (etcd names a member only once it has started): a
	// learner that never starts is removed, not left behind (kubeadm#3269).
	LearnerStartTimeout = 5 * time.Minute
	// LearnerCatchUpTimeout bounds the time from the add to the promotion:
	// etcd refuses to promote a learner that lags its leader.
	LearnerCatchUpTimeout = 10 * time.Minute
	// NodeReportTimeout bounds a demotion's wait for what only the node's
	// daemon can report (its withdrawal from the API address, its
	// cleanup): a node whose daemon is dead must not hold every other
	// operation for ever. Past it the demotion goes on, and says what may
	// be left on the node.
	NodeReportTimeout = 5 * time.Minute
	// StepTimeout bounds the other waits on etcd or the cluster: a
	// learner's add that etcd keeps refusing, a new master's apiserver
	// that does not become Ready, a member that etcd keeps refusing to
	// remove. An operation in progress blocks every other, so none waits
	// for ever.
	StepTimeout = 10 * time.Minute
	// DeadAfter is how long the member of a master whose Node was deleted
	// must not answer before it is removed, unless Facts.DeadAfter says
	// otherwise: a master rebooting is not gone.
	DeadAfter = 5 * time.Minute
	// RetryAfter is how long a node whose promotion failed waits before
	// the next attempt, so that a node that cannot start a member does not
	// add and remove one every few minutes.
	RetryAfter = 10 * time.Minute
)

// Node is one Node object as a round saw it, with what its own daemon
// reports of its part of a demotion.
type Node struct {
	Name string
	// UID is the Node object's: a Node deleted and registered again has
	// another, and has lost the label (a kubelet cannot set it).
	UID string
	// Labelled: the Node carries Label.
	Labelled bool
	// CanLead: the Node carries LabelLeader.
	CanLead bool
	Ready   bool
	// Address is its InternalIP; its member's peer URL is on it.
	Address string
	// ControlPlanePods is how many control-plane pods (apiserver,
	// controller-manager, scheduler) are bound to it, those being deleted
	// included.
	ControlPlanePods int
	// APIServerReady: its apiserver pod is Ready.
	APIServerReady bool
	// RunsControlPlane: it carries the label the control plane's pods
	// select (btypes.LabelControlPlanePods), which this controller keeps.
	RunsControlPlane bool
	// MemberHost: its daemon reports that it can start an etcd member
	// (AnnotationMemberHost); a promotion needs one.
	MemberHost bool
	// Withdrawn: its daemon no longer offers it for the API address.
	Withdrawn bool
	// Cleaned: its daemon has set its etcd data aside and dropped its
	// checkpoints.
	Cleaned bool
}

// PeerURL is the peer URL a member on n has.
func (n Node) PeerURL() string {
	if n.Address == "" {
		return ""
	}
	return "https://" + net.JoinHostPort(n.Address, strconv.Itoa(EtcdPeerPort))
}

// Member is one member of etcd's own list.
type Member struct {
	ID uint64
	// Name is "" until the member has started once: etcd learns a
	// member's name from the member itself.
	Name     string
	PeerURLs []string
	Learner  bool
	// Healthy: its status answered with a leader and no alarm.
	Healthy bool
	// Helper: an upgrade's helper member (upgrade/nodeagent.IsHelperName),
	// never a master of its own.
	Helper bool
}

// OpKind is what an operation does to one node's mastership.
type OpKind string

const (
	Promote OpKind = "Promote"
	Demote  OpKind = "Demote"
	// Remove takes the member of a master that is gone (its Node deleted,
	// or `bootlet master remove`): there is no node to withdraw or drain.
	Remove OpKind = "Remove"
)

// Phase is where an operation stands.
type Phase string

const (
	// PhaseLearner: the member is added as a learner; the node's daemon
	// starts it, and it is promoted once it has caught up.
	PhaseLearner Phase = "Learner"
	// PhaseControlPlane: the member votes; the control plane follows the
	// label (the apiserver DaemonSet) until the node's apiserver is Ready.
	PhaseControlPlane Phase = "ControlPlane"
	// PhaseWithdraw: the node's daemon takes it out of the API address.
	PhaseWithdraw Phase = "Withdraw"
	// PhaseDrain: its control-plane pods leave (they follow the label).
	PhaseDrain Phase = "Drain"
	// PhaseRemoveMember: its etcd member is removed.
	PhaseRemoveMember Phase = "RemoveMember"
	// PhaseCleanup: its daemon sets the data aside and drops its
	// checkpoints.
	PhaseCleanup Phase = "Cleanup"
)

// Op is the one operation under way.
type Op struct {
	Kind  OpKind `json:"kind"`
	Node  string `json:"node"`
	Phase Phase  `json:"phase"`
	// Started is when the operation began; PhaseSince when its phase did.
	Started    time.Time `json:"started"`
	PhaseSince time.Time `json:"phaseSince"`
	// PeerURL is the member's peer URL; MemberID its ID once etcd's list
	// shows it (a promotion's learner) or the member being removed.
	PeerURL  string `json:"peerURL,omitempty"`
	MemberID uint64 `json:"memberID,omitempty"`
	// Force: the operator removes a member that still answered (`bootlet
	// master remove --force`).
	Force bool `json:"force,omitempty"`
	// InitialCluster is a promotion's etcd --initial-cluster once its
	// learner is a member (every member's name=peer URL, the learner's
	// under the node's name), for the node's daemon to start it with.
	InitialCluster string `json:"initialCluster,omitempty"`
}

// Failure is a promotion that failed, kept until RetryAfter.
type Failure struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Record is what the controller keeps between rounds (in its status), so
// that a restarted or new leader resumes, and so that a Node that has not
// registered yet, or a label that has not arrived yet, is never taken for
// a master that left.
type Record struct {
	// Masters are the nodes seen labelled, sorted: only these can be
	// demoted, or removed because their Node was deleted. UIDs are their
	// Node objects' UIDs when seen labelled: only that object losing the
	// label is a demotion.
	Masters []string          `json:"masters,omitempty"`
	UIDs    map[string]string `json:"uids,omitempty"`
	Op      *Op               `json:"op,omitempty"`
	// Failures are the recent failed promotions, by node.
	Failures map[string]Failure `json:"failures,omitempty"`
	// StrayLearners are learners no operation added, with when they were
	// first seen: one that has not started within LearnerStartTimeout is
	// removed.
	StrayLearners map[uint64]time.Time `json:"strayLearners,omitempty"`
	// DownSince is when each voter that does not answer was first seen
	// so, for DeadAfter.
	DownSince map[uint64]time.Time `json:"downSince,omitempty"`
}

func (r Record) clone() Record {
	out := Record{Masters: slices.Clone(r.Masters), UIDs: maps.Clone(r.UIDs), DownSince: maps.Clone(r.DownSince)}
	if r.Op != nil {
		op := *r.Op
		out.Op = &op
	}
	out.Failures, out.StrayLearners = maps.Clone(r.Failures), maps.Clone(r.StrayLearners)
	return out
}

func (r *Record) addMaster(name, uid string) {
	if i, found := slices.BinarySearch(r.Masters, name); !found {
		r.Masters = slices.Insert(r.Masters, i, name)
	}
	if uid != "" {
		if r.UIDs == nil {
			r.UIDs = map[string]string{}
		}
		r.UIDs[name] = uid
	}
}

func (r *Record) dropMaster(name string) {
	if i, found := slices.BinarySearch(r.Masters, name); found {
		r.Masters = slices.Delete(r.Masters, i, i+1)
	}
	delete(r.UIDs, name)
}

// Removal is an operator's `bootlet master remove NAME`; Force removes a
// member that still answers.
type Removal struct {
	Name  string
	Force bool `json:"force,omitempty"`
}

// Facts are what one round observed.
type Facts struct {
	Nodes []Node
	// Members is etcd's member list; nil when no member answered, and
	// EtcdErr says why.
	Members []Member
	// Leader is the ID of etcd's leader (0: none known).
	Leader  uint64
	EtcdErr error
	Record  Record
	// Removals are the pending explicit removals.
	Removals []Removal
	// UpgradeUnderway: the upgrade controller has a step in flight, which
	// may restart members; no new operation begins meanwhile.
	UpgradeUnderway bool
	Now             time.Time
	// DeadAfter replaces the package's DeadAfter when positive (the
	// daemon's --master-dead-after): a site whose masters reboot slower
	// waits longer before a deleted master's member goes.
	DeadAfter time.Duration
}

// deadAfter is how long a deleted master's member must not answer before
// it goes.
func (f Facts) deadAfter() time.Duration {
	if f.DeadAfter > 0 {
		return f.DeadAfter
	}
	return DeadAfter
}
