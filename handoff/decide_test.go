package handoff

import (
	"testing"

	btypes "github.com/bootlet/bootlet/types"
)

func TestDecideHandoff(t *testing.T) {
	up, file, knows, ready := true, true, true, true
	for _, tc := range []struct {
		name string
		in   Facts
		want Decision
	}{
		{"no kubelet: bootlet runs it, copy kept in place",
			Facts{Owner: btypes.OwnerBootlet, FileInPlace: file, SandboxReady: ready},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true}},
		{"copy not written yet, no kubelet",
			Facts{Owner: btypes.OwnerBootlet},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true}},
		{"kubelet up, copy not in place (write failed): bootlet keeps acting",
			Facts{Owner: btypes.OwnerBootlet, KubeletUp: up, SandboxReady: ready},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true}},
		{"kubelet up, copy in place, kubelet has not synced it: hands off, still bootlet's",
			Facts{Owner: btypes.OwnerBootlet, KubeletUp: up, FileInPlace: file, SandboxReady: ready},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true, HandsOff: true}},
		{"kubelet synced it but no ready sandbox yet: not adopted",
			Facts{Owner: btypes.OwnerBootlet, KubeletUp: up, FileInPlace: file, KubeletKnows: knows},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true, HandsOff: true}},
		{"kubelet synced it and its sandbox is ready: adopted",
			Facts{Owner: btypes.OwnerBootlet, KubeletUp: up, FileInPlace: file, KubeletKnows: knows, SandboxReady: ready},
			Decision{Owner: btypes.OwnerKubeletStatic, WriteFile: true, HandsOff: true}},
		{"pod dir left from an old kubelet, no kubelet now: bootlet's",
			Facts{Owner: btypes.OwnerBootlet, FileInPlace: file, KubeletKnows: knows, SandboxReady: ready},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true}},
		{"adopted, kubelet restarting: stays the kubelet's, copy kept",
			Facts{Owner: btypes.OwnerKubeletStatic, FileInPlace: file},
			Decision{Owner: btypes.OwnerKubeletStatic, WriteFile: true, HandsOff: true}},
		{"adopted, copy deleted by someone: written again, hands off",
			Facts{Owner: btypes.OwnerKubeletStatic, KubeletUp: up, KubeletKnows: knows, SandboxReady: ready},
			Decision{Owner: btypes.OwnerKubeletStatic, WriteFile: true, HandsOff: true}},
		{"bootlet's pod deleted: copy withdrawn, bootlet stops it",
			Facts{Owner: btypes.OwnerBootlet, KubeletUp: up, FileInPlace: file, SandboxReady: ready, Terminating: true},
			Decision{Owner: btypes.OwnerBootlet, RemoveFile: true}},
		{"adopted pod deleted, kubelet up: released, the kubelet stops it",
			Facts{Owner: btypes.OwnerKubeletStatic, KubeletUp: up, FileInPlace: file, KubeletKnows: knows, SandboxReady: ready, Terminating: true},
			Decision{Owner: btypes.OwnerReleased, RemoveFile: true, HandsOff: true}},
		{"adopted pod deleted, no kubelet: released, bootlet stops it",
			Facts{Owner: btypes.OwnerKubeletStatic, FileInPlace: file, SandboxReady: ready, Terminating: true},
			Decision{Owner: btypes.OwnerReleased, RemoveFile: true}},
		{"kubelet up, copy about to be written this step: hands off at once (a new pod is never started by both)",
			Facts{Owner: btypes.OwnerBootlet, KubeletUp: up, CopyRenders: true},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true, HandsOff: true}},
		{"kubelet up, the last write of the copy failed: bootlet acts again",
			Facts{Owner: btypes.OwnerBootlet, KubeletUp: up, CopyRenders: true, WriteFailed: true, SandboxReady: ready},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true}},
		{"kubelet up, no copy possible (Secret env): bootlet keeps running it",
			Facts{Owner: btypes.OwnerBootlet, KubeletUp: up, SandboxReady: ready},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true}},
		{"copy renders but no kubelet: bootlet's, copy written",
			Facts{Owner: btypes.OwnerBootlet, CopyRenders: true},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true}},
		{"copy written this step but not yet synced by the kubelet: not adopted before it is on disk",
			Facts{Owner: btypes.OwnerBootlet, KubeletUp: up, CopyRenders: true, KubeletKnows: knows, SandboxReady: ready},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true, HandsOff: true}},
		{"kubelet starting (its unit passed the start gate), copy in place: hands off before its healthz answers",
			Facts{Owner: btypes.OwnerBootlet, KubeletStarting: true, FileInPlace: file, SandboxReady: ready},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true, HandsOff: true}},
		{"kubelet starting, copy about to be written: hands off",
			Facts{Owner: btypes.OwnerBootlet, KubeletStarting: true, CopyRenders: true},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true, HandsOff: true}},
		{"kubelet starting, no copy possible (Secret env): bootlet keeps running it",
			Facts{Owner: btypes.OwnerBootlet, KubeletStarting: true, SandboxReady: ready},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true}},
		{"kubelet starting, it synced the pod but its healthz does not answer yet: not adopted",
			Facts{Owner: btypes.OwnerBootlet, KubeletStarting: true, FileInPlace: file, KubeletKnows: knows, SandboxReady: ready},
			Decision{Owner: btypes.OwnerBootlet, WriteFile: true, HandsOff: true}},
		{"bootlet's pod deleted while a kubelet starts: bootlet stops it (the kubelet never ran it)",
			Facts{Owner: btypes.OwnerBootlet, KubeletStarting: true, FileInPlace: file, SandboxReady: ready, Terminating: true},
			Decision{Owner: btypes.OwnerBootlet, RemoveFile: true}},
		{"released and not deleted: no copy, hands off",
			Facts{Owner: btypes.OwnerReleased, KubeletUp: up},
			Decision{Owner: btypes.OwnerReleased, HandsOff: true}},
	} {
		if got := Decide(tc.in); got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}
