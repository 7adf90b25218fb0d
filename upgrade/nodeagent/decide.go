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
// first; a step in flight waits for the controller's drain.
func Decide(f Facts) Act {
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

const kubelet = "kubelet"
