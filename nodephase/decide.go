package nodephase

import (
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/bootlet/bootlet/checkpointer"
	"github.com/bootlet/bootlet/pivot"
	btypes "github.com/bootlet/bootlet/types"
)

// Facts is everything Decide looks at.
type Facts struct {
	// What the daemon was started with.
	HandoffConfigured, PivotConfigured, CheckpointerConfigured bool
	// KubeletUp: the kubelet's healthz answered at the handoff's last poll.
	KubeletUp bool
	// PivotDone is the record of a completed pivot (nil: none).
	PivotDone *pivot.DoneRecord
	// PivotDoneErr: the record is there but unreadable (the daemon then
	// treats it as no record, and so does the phase).
	PivotDoneErr error
	// Pods are the pods of bootlet's registry (API form: their owner is
	// the bootlet.dev/owner annotation, a checkpoint pod carries
	// bootlet.dev/checkpoint-of).
	Pods []v1.Pod
	// Checkpointer is the checkpointer's last status (zero: none yet).
	Checkpointer checkpointer.Status
}

// Decision is a phase and why.
type Decision struct {
	Phase  btypes.NodePhase
	Reason string
}

// Decide decides the phase, pure. The order matters: a running
// checkpoint pod is what an operator must know first (the self-hosted
// component it stands in for is not serving), whatever else holds; then a
// completed pivot; then whether a kubelet took part.
func Decide(f Facts) Decision {
	owners := map[btypes.Owner]int{}
	var active []string
	for i := range f.Pods {
		p := &f.Pods[i]
		if of := btypes.CheckpointOf(p); of != "" {
			if p.DeletionTimestamp == nil {
				active = append(active, fmt.Sprintf("%s (owner %s)", of, btypes.OwnerOf(p)))
			}
			continue
		}
		owners[btypes.OwnerOf(p)]++
	}
	sort.Strings(active)
	if len(active) > 0 {
		why := "the apiserver is unreachable"
		if f.Checkpointer.Reachable {
			why = "the apiserver answers; the checkpoint is withdrawn once its self-hosted pod has been Ready long enough"
		}
		return Decision{btypes.NodePhaseCheckpointActive, fmt.Sprintf("checkpoint pod running for %s; %s", strings.Join(active, ", "), why)}
	}
	stored := storedCheckpoints(f.Checkpointer)
	checkpointer := "no checkpointer configured (--checkpointer-kubeconfig)"
	switch {
	case f.CheckpointerConfigured && len(stored) > 0:
		checkpointer = "bootlet is checkpointer only, holding checkpoints of " + strings.Join(stored, ", ")
	case f.CheckpointerConfigured:
		checkpointer = "bootlet is checkpointer only, holding no checkpoint yet"
	}
	if f.PivotDone != nil {
		return Decision{btypes.NodePhaseSelfHosted, fmt.Sprintf("pivot of %s completed at %s; %s%s",
			strings.Join(f.PivotDone.Components, ", "), f.PivotDone.CompletedAt.UTC().Format(time.RFC3339), checkpointer, pinned(owners))}
	}
	unreadable := ""
	if f.PivotDoneErr != nil {
		unreadable = fmt.Sprintf(" (the pivot record is unreadable, taken as none: %v)", f.PivotDoneErr)
	}
	if !f.PivotConfigured && len(stored) > 0 && f.CheckpointerConfigured {
		return Decision{btypes.NodePhaseSelfHosted, "no pivot configured here, the self-hosted pods run; " + checkpointer + pinned(owners) + unreadable}
	}
	counts := ownerCounts(owners)
	if f.HandoffConfigured && (f.KubeletUp || owners[btypes.OwnerKubeletStatic] > 0 || owners[btypes.OwnerReleased] > 0) {
		kubelet := "the kubelet answers"
		if !f.KubeletUp {
			kubelet = "the kubelet does not answer (adopted pods stay hands-off)"
		}
		pivot := "no pivot configured (--pivot-kubeconfig)"
		if f.PivotConfigured {
			pivot = "pivot not complete"
		}
		return Decision{btypes.NodePhaseHandoff, fmt.Sprintf("%s; pods: %s; %s%s", kubelet, counts, pivot, unreadable)}
	}
	if !f.HandoffConfigured && !f.PivotConfigured && !f.CheckpointerConfigured {
		return Decision{btypes.NodePhaseStandalone, fmt.Sprintf("no handoff, pivot or checkpointer configured; bootlet runs its pods (%s)%s", counts, unreadable)}
	}
	waiting := "no kubelet answers yet"
	if !f.HandoffConfigured {
		waiting = "no handoff to a kubelet configured (--kubelet-healthz-url, --kubelet-static-pod-path)"
	}
	return Decision{btypes.NodePhaseBootstrap, fmt.Sprintf("bootlet runs its pods itself (%s); %s%s", counts, waiting, unreadable)}
}

func storedCheckpoints(s checkpointer.Status) []string {
	var out []string
	for k, c := range s.Components {
		if c.StoredHash != "" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// pinned names the pods bootlet still keeps after the pivot (etcd stays
// pinned, docs/nodephase.md).
func pinned(owners map[btypes.Owner]int) string {
	if owners[btypes.OwnerBootlet]+owners[btypes.OwnerKubeletStatic] == 0 {
		return ""
	}
	return fmt.Sprintf("; pinned pods: %d kubelet-static, %d bootlet", owners[btypes.OwnerKubeletStatic], owners[btypes.OwnerBootlet])
}

func ownerCounts(owners map[btypes.Owner]int) string {
	if len(owners) == 0 {
		return "none"
	}
	var parts []string
	for _, o := range []btypes.Owner{btypes.OwnerBootlet, btypes.OwnerKubeletStatic, btypes.OwnerReleased} {
		if n := owners[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, o))
		}
	}
	return strings.Join(parts, ", ")
}
