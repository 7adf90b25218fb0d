package runner

import (
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// podBackoff is the kubelet's flowcontrol.Backoff (10 s doubling to 5 min,
// an entry forgotten after 10 min without failure) plus an index of the keys
// each pod used, so that everything of a deleted pod goes with it.
type podBackoff struct {
	*flowcontrol.Backoff

	mu   sync.Mutex
	keys map[types.UID]map[string]struct{}
}

func newPodBackoff(clk clock.Clock) *podBackoff {
	return &podBackoff{Backoff: flowcontrol.NewFakeBackOff(backoffInitial, backoffMax, clk), keys: map[types.UID]map[string]struct{}{}}
}

// next records one more failure of key, belonging to pod uid.
func (b *podBackoff) next(uid types.UID, key string, eventTime time.Time) {
	b.mu.Lock()
	if b.keys[uid] == nil {
		b.keys[uid] = map[string]struct{}{}
	}
	b.keys[uid][key] = struct{}{}
	b.mu.Unlock()
	b.Next(key, eventTime)
}

// forget drops every entry of pod uid.
func (b *podBackoff) forget(uid types.UID) {
	b.mu.Lock()
	keys := b.keys[uid]
	delete(b.keys, uid)
	b.mu.Unlock()
	for k := range keys {
		b.DeleteEntry(k)
	}
}

// pods is how many pods have entries (for tests of the cleanup).
func (b *podBackoff) pods() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.keys)
}

// SandboxBackoffKey is the start-failure backoff key of a pod's sandbox.
func SandboxBackoffKey(pod *v1.Pod) string {
	return pod.Name + "_" + pod.Namespace + "_" + string(pod.UID) + "_sandbox"
}

// Failure stages of a container start, the kubelet's sync results.
type startStage int

const (
	stagePull startStage = iota
	stagePullNever
	stageConfig
	stageCreate
	stageStart
)

// startFailure maps a failed stage of a container start to the waiting
// reason the kubelet shows in status and the reason of its Warning event
// (pkg/kubelet/container/sync_result.go, pkg/kubelet/images).
func startFailure(stage startStage) (waitingReason, eventReason string) {
	switch stage {
	case stagePull:
		return "ErrImagePull", "Failed"
	case stagePullNever:
		return "ErrImageNeverPull", "ErrImageNeverPull"
	case stageConfig:
		return "CreateContainerConfigError", "Failed"
	case stageCreate:
		return "CreateContainerError", "Failed"
	default:
		return "RunContainerError", "Failed"
	}
}

// waitingInBackoff is what status shows for a container whose last start
// attempt failed and whose retry is held back: a failed pull becomes the
// kubelet's ImagePullBackOff with the pull error; every other reason stays
// (the kubelet keeps CreateContainerError and friends while it retries).
func waitingInBackoff(last v1.ContainerStateWaiting, image string) v1.ContainerStateWaiting {
	if last.Reason != "ErrImagePull" {
		return last
	}
	return v1.ContainerStateWaiting{
		Reason:  "ImagePullBackOff",
		Message: fmt.Sprintf("Back-off pulling image %q: ErrImagePull: %s", image, last.Message),
	}
}

// syncRetryDelay is how long a worker waits after consecutive failed syncs
// (a runtime read failed, so nothing was planned): the resync period
// doubling, at most 10 s, like the kubelet's pod worker back-off period.
func syncRetryDelay(failures int) time.Duration {
	d := resyncPeriod
	for i := 1; i < failures && d < maxSyncRetryDelay; i++ {
		d *= 2
	}
	return min(d, maxSyncRetryDelay)
}

const maxSyncRetryDelay = 10 * time.Second
