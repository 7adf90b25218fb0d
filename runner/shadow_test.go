package runner

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critesting "k8s.io/cri-api/pkg/apis/testing"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"

	"github.com/bootlet/bootlet/cri"
	btypes "github.com/bootlet/bootlet/types"
)

func TestShadowDecision(t *testing.T) {
	running, exited, created, unknown := kubecontainer.ContainerStateRunning, kubecontainer.ContainerStateExited,
		kubecontainer.ContainerStateCreated, kubecontainer.ContainerStateUnknown
	now := time.Date(2026, 11, 27, 19, 57, 12, 0, time.UTC)
	tests := []struct {
		name       string
		containers []ctr // newest first
		wantRemove []string
		wantStop   []string
	}{
		{name: "adopted: one running container", containers: []ctr{{id: "a0", name: "a", state: running}}},
		{name: "restarted by the kubelet: old runs are dead",
			containers: []ctr{{id: "a2", name: "a", state: running}, {id: "a1", name: "a", state: exited}, {id: "a0", name: "a", state: exited}}},
		{name: "crash looping, nothing runs", containers: []ctr{{id: "a1", name: "a", state: exited}, {id: "a0", name: "a", state: exited}}},
		// The evidence of 16:06 on master-3: bootlet's etcd a0 runs, the
		// kubelet's a1 died on the peer port.
		{name: "the kubelet's duplicate died: remove it, a0 becomes the newest",
			containers: []ctr{{id: "a1", name: "a", state: exited}, {id: "a0", name: "a", state: running}},
			wantRemove: []string{"a1"}},
		{name: "several dead duplicates and a never-started one all go",
			containers: []ctr{{id: "a3", name: "a", state: exited}, {id: "a2", name: "a", state: created}, {id: "a1", name: "a", state: exited}, {id: "a0", name: "a", state: running}},
			wantRemove: []string{"a1", "a2", "a3"}},
		{name: "the kubelet's duplicate is starting: wait",
			containers: []ctr{{id: "a1", name: "a", state: created}, {id: "a0", name: "a", state: running}}},
		{name: "the kubelet's duplicate is unknown: wait",
			containers: []ctr{{id: "a1", name: "a", state: unknown}, {id: "a0", name: "a", state: running}}},
		{name: "an unknown one between: wait",
			containers: []ctr{{id: "a2", name: "a", state: exited}, {id: "a1", name: "a", state: unknown}, {id: "a0", name: "a", state: running}}},
		{name: "the kubelet's duplicate runs: stop the one it does not watch",
			containers: []ctr{{id: "a1", name: "a", state: running}, {id: "a0", name: "a", state: running}},
			wantStop:   []string{"a0"}},
		// Run 6, master-1's etcd: the duplicate ran 5 s, then died on
		// the port bootlet's held.
		{name: "the kubelet's duplicate started 2 s ago: wait, it may die on the port",
			containers: []ctr{{id: "a1", name: "a", state: running, started: now.Add(-2 * time.Second)}, {id: "a0", name: "a", state: running}}},
		{name: "the kubelet's duplicate has run duplicateGrace: stop the one it does not watch",
			containers: []ctr{{id: "a1", name: "a", state: running, started: now.Add(-duplicateGrace)}, {id: "a0", name: "a", state: running}},
			wantStop:   []string{"a0"}},
		{name: "dead duplicate and two shadowed: keep the newest shadowed, stop the older",
			containers: []ctr{{id: "a2", name: "a", state: exited}, {id: "a1", name: "a", state: running}, {id: "a0", name: "a", state: running}},
			wantRemove: []string{"a2"}, wantStop: []string{"a0"}},
		{name: "names apart",
			containers: []ctr{{id: "b1", name: "b", state: exited}, {id: "a1", name: "a", state: running}, {id: "b0", name: "b", state: running}, {id: "a0", name: "a", state: exited}},
			wantRemove: []string{"b1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := shadowDecision(observed(nil, tc.containers...), now)
			var stop []string
			for _, s := range r.Stop {
				stop = append(stop, s.ID)
			}
			remove := append([]string(nil), r.Remove...)
			sort.Strings(remove)
			sort.Strings(stop)
			if fmt.Sprint(remove) != fmt.Sprint(tc.wantRemove) || fmt.Sprint(stop) != fmt.Sprint(tc.wantStop) {
				t.Errorf("shadowDecision = remove %v stop %v; want %v %v", remove, stop, tc.wantRemove, tc.wantStop)
			}
		})
	}
	if r := shadowDecision(Observed{}, now); !r.empty() {
		t.Errorf("no pod status: %+v", r)
	}
}

// handsOffHandoff is a handoff that has handed every pod to the kubelet.
type handsOffHandoff struct{}

func (handsOffHandoff) Step(*v1.Pod, bool, bool, map[string]string) bool { return true }
func (handsOffHandoff) Owner(types.UID) (btypes.Owner, bool)             { return btypes.OwnerKubeletStatic, true }
func (handsOffHandoff) Hold() func()                                     { return func() {} }

// TestHandedOffSyncUndoesTheKubeletsDuplicate replays the 16:06 etcd
// restart: bootlet ran the container; the kubelet's first sync saw it
// CREATED (bootlet's StartContainer took 3.5 s) and started attempt 1
// beside it. Now the pod is the kubelet's. A hands-off sync removes the
// kubelet's dead duplicate, so that bootlet's container is the newest of
// its name again and the kubelet adopts it; it does not touch the running
// one. If the duplicate runs instead, the shadowed one is stopped.
func TestHandedOffSyncUndoesTheKubeletsDuplicate(t *testing.T) {
	for _, dupState := range []runtimeapi.ContainerState{runtimeapi.ContainerState_CONTAINER_EXITED, runtimeapi.ContainerState_CONTAINER_RUNNING} {
		t.Run(dupState.String(), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			e := newTestEnv(t, ctx, nil)
			pod := e.pod("etcd", "busybox")
			w := newWorker(e.m, pod)
			e.syncUntil(w, "running", func(st v1.PodStatus) bool {
				return len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Running != nil
			})

			e.m.cfg.Handoff = handsOffHandoff{}
			e.rt.Lock()
			var orig *critesting.FakeContainer
			for _, c := range e.rt.Containers {
				if c.Labels[cri.LabelPodUID] == string(pod.UID) {
					orig = c
				}
			}
			if orig == nil {
				e.rt.Unlock()
				t.Fatal("bootlet's container is not in the runtime")
			}
			dup := &critesting.FakeContainer{SandboxID: orig.SandboxID}
			proto.Merge(&dup.ContainerStatus, &orig.ContainerStatus)
			dup.Id = "kubelet-duplicate"
			dup.Metadata = &runtimeapi.ContainerMetadata{Name: orig.Metadata.Name, Attempt: 1}
			dup.CreatedAt = orig.CreatedAt + int64(time.Second)
			dup.State = dupState
			if dupState == runtimeapi.ContainerState_CONTAINER_EXITED {
				dup.StartedAt, dup.FinishedAt, dup.ExitCode = dup.CreatedAt+1, dup.CreatedAt+2, 1
			}
			e.rt.Containers[dup.Id] = dup
			calls := len(e.rt.Called)
			e.rt.Unlock()
			// A running duplicate is given duplicateGrace to die on a port.
			e.clock.SetTime(time.Now().Add(duplicateGrace + time.Second))

			if _, _, err := w.sync(context.Background()); err != nil {
				t.Fatalf("sync: %v", err)
			}
			e.rt.Lock()
			defer e.rt.Unlock()
			made := map[string]int{}
			for _, c := range e.rt.Called[calls:] {
				if c != "ListPodSandbox" && c != "PodSandboxStatus" && c != "ListContainers" && c != "ContainerStatus" {
					made[c]++
				}
			}
			_, dupLeft := e.rt.Containers[dup.Id]
			origState := e.rt.Containers[orig.Id].State
			switch dupState {
			case runtimeapi.ContainerState_CONTAINER_EXITED:
				if dupLeft || origState != runtimeapi.ContainerState_CONTAINER_RUNNING || fmt.Sprint(made) != "map[RemoveContainer:1]" {
					t.Errorf("calls %v, duplicate left %v, bootlet's container %v; want only the dead duplicate removed and bootlet's running", made, dupLeft, origState)
				}
			default:
				if !dupLeft || origState != runtimeapi.ContainerState_CONTAINER_EXITED || e.rt.Containers[dup.Id].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
					t.Errorf("calls %v, duplicate left %v, shadowed %v; want the shadowed one stopped and the kubelet's running", made, dupLeft, origState)
				}
			}
			if made["CreateContainer"]+made["StartContainer"]+made["RunPodSandbox"] != 0 {
				t.Errorf("a hands-off sync created or started something: %v", made)
			}
		})
	}
}
