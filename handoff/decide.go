package handoff

import (
	btypes "github.com/bootlet/bootlet/types"
)

// Facts is what Decide looks at for one pod.
type Facts struct {
	Owner btypes.Owner
	// KubeletUp: the kubelet's healthz answered ok at the last poll.
	KubeletUp bool
	// KubeletStarting: the kubelet's unit announced its start through the
	// start gate (startgate.go) and the kubelet does not answer yet.
	KubeletStarting bool
	// FileInPlace: bootlet's static copy of this pod (same UID) is on disk
	// in the kubelet's staticPodPath with the current content.
	FileInPlace bool
	// CopyRenders: the static copy can be rendered (the pod takes no
	// Secret values into env, and its ConfigMap references resolve), so
	// acting on WriteFile puts it in place.
	CopyRenders bool
	// WriteFailed: the last write of the static copy failed.
	WriteFailed bool
	// KubeletKnows: the kubelet made its pod directory ROOT/pods/UID/plugins,
	// which it does in SyncPod (makePodDataDirs) once it admitted the pod.
	KubeletKnows bool
	// SandboxReady: CRI shows a READY sandbox with this UID.
	SandboxReady bool
	// Terminating: the pod was deleted from bootlet's API.
	Terminating bool
}

// Decision is what to do about the pod's static copy and who acts.
type Decision struct {
	Owner btypes.Owner
	// WriteFile: keep the static copy in place (write it if it is missing
	// or stale). RemoveFile: withdraw it. Never both.
	WriteFile, RemoveFile bool
	// HandsOff: bootlet makes no mutating CRI call for this pod (no
	// sandbox or container created, started, killed or removed); it only
	// observes, keeps volume files fresh and reports status.
	HandsOff bool
}

// Decide is the handoff state machine of one pod, pure (bootlet → kubelet-static → released).
// The rules: docs/design/handoff.md, "The rule book: `Facts` → `Decide` → `Decision`".
func Decide(in Facts) Decision {
	d := Decision{Owner: in.Owner}
	if in.Terminating {
		d.RemoveFile = true
		if in.Owner != btypes.OwnerBootlet {
			d.Owner = btypes.OwnerReleased
			d.HandsOff = in.KubeletUp
		}
		return d
	}
	switch in.Owner {
	case btypes.OwnerBootlet:
		d.WriteFile = true
		if in.KubeletUp && in.FileInPlace && in.KubeletKnows && in.SandboxReady {
			d.Owner = btypes.OwnerKubeletStatic
		}
		// A copy this step writes counts as in place: bootlet must not
		// start what the kubelet is about to start. A failed write hands
		// the pod back at the next step.
		inPlace := in.FileInPlace || (in.CopyRenders && !in.WriteFailed)
		// A kubelet that is starting counts as up: its first sync reads
		// the runtime as its first relist saw it, and a container bootlet
		// starts in between is one it duplicates (docs/handoff.md).
		d.HandsOff = d.Owner == btypes.OwnerKubeletStatic || ((in.KubeletUp || in.KubeletStarting) && inPlace)
	case btypes.OwnerKubeletStatic:
		d.WriteFile = true
		d.HandsOff = true
	case btypes.OwnerReleased:
		// Withdrawn: nobody presents it to the kubelet any more.
		d.HandsOff = true
	}
	return d
}
