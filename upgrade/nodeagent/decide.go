package nodeagent

import (
	"time"

	btypes "github.com/bootlet/bootlet/types"
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
}

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
)

// Act is a round's decision.
type Act struct {
	Kind    ActKind
	Version string
	Why     string
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
	var want string
	var why string
	switch s := f.RollingBack; {
	case s != nil && s.Component == kubelet && s.Node == f.Node:
		want, why = s.From, "the kubelet's step is being put back"
		if f.Binary != want {
			if f.Kept == want {
				return Act{Restore, want, why}
			}
			return Act{Install, want, why + "; no kept binary of " + want}
		}
	case f.InFlight != nil && f.InFlight.Component == kubelet && f.InFlight.Node == f.Node:
		s := f.InFlight
		if s.Drained == nil {
			return Act{Nothing, "", "waiting for the controller to drain the node"}
		}
		want, why = s.To, "the kubelet's step is in flight"
		if f.Binary != want {
			return Act{Install, want, why}
		}
	default:
		return Act{Nothing, "", "no kubelet step for this node"}
	}
	if f.Running != want && f.Now.Sub(f.RestartedAt) >= RestartSettle {
		return Act{Restart, want, why + "; the binary is in place, the running kubelet reports " + f.Running}
	}
	return Act{Nothing, want, "the kubelet runs " + want + " or was just restarted"}
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
// other members keep quorum (the controller takes the step only with
// three or more).
func decideEtcd(f Facts, s *btypes.UpgradeStep) Act {
	want, why := s.To, "etcd's step is in flight"
	if s == f.RollingBack {
		want, why = s.From, "etcd's step is being put back"
	}
	e := f.Etcd
	switch {
	case e == nil:
		return Act{Nothing, "", "etcd's step names this node, whose daemon holds no etcd member"}
	case e.Stored != want:
		return Act{SetEtcd, want, why + "; the stored pod runs " + e.Stored}
	case e.Running == want && e.Mirror != "" && e.Mirror != want:
		return Act{RefreshMirror, want, why + "; the member runs " + want + ", its mirror pod still names " + e.Mirror}
	}
	return Act{Nothing, want, "the member's pod names " + want + "; the kubelet runs " + e.Running}
}

const (
	kubelet = "kubelet"
	etcd    = "etcd"
)
