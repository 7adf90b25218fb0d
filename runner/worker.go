package runner

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	btypes "github.com/bootlet/bootlet/types"
)

// worker drives one pod (one UID) toward its desired state: observe through
// CRI (observe.go), Plan (plan.go), execute, collect garbage (gc.go),
// publish status (publish.go). Like the kubelet's pod worker, it is the only
// goroutine that mutates this pod's runtime objects. It keeps only the
// sequencing: every decision is a pure function elsewhere.
type worker struct {
	m    *Manager
	kick chan struct{}

	// probeWG counts the probe loops, so a finished pod waits for them.
	probeWG sync.WaitGroup

	mu          sync.Mutex
	pod         *v1.Pod // API form (client-facing name)
	terminating bool
	grace       time.Duration
	volumesDone bool
	status      *v1.PodStatus
	startTime   *metav1.Time
	// waiting holds the failure of each container's last start attempt,
	// until a start succeeds.
	waiting map[string]v1.ContainerStateWaiting
	probing map[string]context.CancelFunc // container ID → probe loop
	// removeFailures counts failed removals while terminating.
	removeFailures int
	// dirs is the pod's directories, resolved at the first use (podDirs).
	dirs         PodDirs
	dirsResolved bool
	// startReleased: the start-after gate let this pod start (startafter.go);
	// startWaitSince: when it first held it back.
	startReleased  bool
	startWaitSince time.Time
}

func newWorker(m *Manager, pod *v1.Pod) *worker {
	return &worker{
		m:       m,
		kick:    make(chan struct{}, 1),
		pod:     pod,
		waiting: map[string]v1.ContainerStateWaiting{},
		probing: map[string]context.CancelFunc{},
	}
}

func (w *worker) kickNow() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *worker) setDesired(pod *v1.Pod) {
	w.mu.Lock()
	w.pod = pod
	w.mu.Unlock()
	w.kickNow()
}

func (w *worker) refreshVolumes() {
	w.mu.Lock()
	w.volumesDone = false
	w.mu.Unlock()
	w.kickNow()
}

func (w *worker) terminate(grace time.Duration) {
	w.mu.Lock()
	if !w.terminating || grace < w.grace {
		w.grace = grace
	}
	w.terminating = true
	w.mu.Unlock()
	w.kickNow()
}

// desired is one consistent read of what the pod should be: its API key,
// its runtime form, and whether (and how fast) it is being deleted.
type desired struct {
	key         btypes.PodKey
	pod         *v1.Pod
	terminating bool
	grace       time.Duration
}

func (w *worker) desired() desired {
	w.mu.Lock()
	defer w.mu.Unlock()
	return desired{
		key:         btypes.PodKey{Namespace: w.pod.Namespace, Name: w.pod.Name},
		pod:         btypes.RuntimePod(w.pod, w.m.cfg.NodeName),
		terminating: w.terminating,
		grace:       w.grace,
	}
}

func (w *worker) event(eventType, reason, message string) {
	if w.m.cfg.Events == nil {
		return
	}
	w.mu.Lock()
	pod := w.pod
	w.mu.Unlock()
	w.m.cfg.Events.Event(pod, eventType, reason, message)
}

func (w *worker) run(ctx context.Context) {
	defer w.stopProbes()
	failures := 0
	for {
		acted, done, err := w.safeSync(ctx)
		if done {
			return
		}
		wait := resyncPeriod
		switch {
		case err != nil:
			failures++
			wait = syncRetryDelay(failures)
			klog.ErrorS(err, "Pod sync failed; keeping the last status and retrying", "pod", klog.KObj(w.desired().pod), "in", wait)
		case acted:
			failures, wait = 0, 0
		default:
			failures = 0
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-w.kick:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// safeSync is sync with a panic turned into this pod's sync error: logged
// with its stack, reported as a Warning event on the pod, and retried with
// the sync backoff like any failed pass. One pod's bad data (a UID an older
// version accepted, a runtime answer nobody expected) must not kill the
// daemon and every other pod with it; restarted, the daemon would load the
// same pod and die again.
func (w *worker) safeSync(ctx context.Context) (acted, done bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			acted, done, err = false, false, w.panicked("sync", r)
		}
	}()
	return w.sync(ctx)
}

// panicked logs a recovered panic of this pod's work with its stack,
// reports it as a Warning event on the pod, and returns it as an error.
func (w *worker) panicked(where string, r any) error {
	err := fmt.Errorf("pod %s panicked: %v", where, r)
	klog.ErrorS(err, "Recovered a panic in a pod worker", "pod", klog.KObj(w.apiPod()), "stack", string(debug.Stack()))
	w.event(v1.EventTypeWarning, "FailedSync", fmt.Sprintf("Error syncing pod, bootlet recovered from a panic: %v", r))
	return err
}

// goRecover runs f in a goroutine of this pod's sync pass; a panic in it
// is recovered and handed back through *p, for the caller to raise again
// in the sync goroutine once the group is done (repanic), where safeSync
// turns it into the pass's error.
func goRecover(wg *sync.WaitGroup, mu *sync.Mutex, p *any, f func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			if r := recover(); r != nil {
				mu.Lock()
				*p = r
				mu.Unlock()
			}
		}()
		f()
	}()
}

// repanic raises a panic goRecover caught, in the caller's goroutine.
func repanic(p any) {
	if p != nil {
		panic(p)
	}
}

// sync is one pass: it reports whether it changed anything (so the next
// observation follows at once), whether the worker is finished, and the
// error that stopped it before planning (a failed runtime read: nothing was
// planned from a partial view and no status was published).
func (w *worker) sync(ctx context.Context) (acted, done bool, err error) {
	d := w.desired()
	pod := d.pod
	release := w.holdKubeletStart()
	defer release()
	obs, err := w.observe(ctx, pod)
	if err != nil {
		return false, false, err
	}
	if w.handoffStep(d, obs) {
		// A hands-off sync starts nothing: a starting kubelet need not
		// wait for its repairs (a StopContainer with a grace period).
		release()
		return w.syncHandedOff(ctx, d, obs)
	}
	if d.terminating {
		// Its static copy is withdrawn: no kubelet will start it.
		release()
		return true, w.terminatePod(ctx, d.key, pod, obs, d.grace), nil
	}
	if !w.startAfter(ctx, d, obs) {
		// Held back by the start order (startafter.go): observe again at
		// once, the wait itself was the pause.
		return true, false, nil
	}
	ids := make([]string, 0, len(obs.ContainerStatuses))
	for _, cs := range obs.ContainerStatuses {
		ids = append(ids, cs.ID.ID)
	}
	a := Plan(PlanInput{Pod: pod, Observed: obs, Probes: w.m.probes.snapshot(ids),
		Backoff: w.m.backoff, StartBackoff: w.m.startBackoff, Now: w.m.clock.Now()})
	acted = w.execute(ctx, pod, obs, a)
	if acted {
		if obs, err = w.observe(ctx, pod); err != nil {
			return acted, false, err
		}
	}
	w.syncVolumes(pod, obs)
	w.ensureProbes(ctx, pod, obs)
	w.gc(ctx, obs)
	w.publish(d.key, pod, obs, a)
	return acted, false, nil
}

// execute carries out the planner's actions in the kubelet's order.
func (w *worker) execute(ctx context.Context, pod *v1.Pod, obs Observed, a Actions) bool {
	acted := false
	if a.KillPod {
		if w.killPod(ctx, pod, obs, defaultGrace(pod)) {
			acted = true
		}
	}
	for _, k := range a.Kill {
		// The kubelet's Killing event carries the planner's reason.
		w.event(v1.EventTypeNormal, "Killing", k.Message)
		klog.InfoS("Killing container", "pod", klog.KObj(pod), "container", k.Name, "reason", k.Message)
		w.killContainer(ctx, pod, k.ID.ID, k.Name, defaultGrace(pod))
		acted = true
	}
	if a.KillPod && !a.CreateSandbox {
		return acted
	}
	sandboxID := a.SandboxID
	if a.CreateSandbox {
		id, err := w.createSandbox(ctx, pod, a.Attempt)
		if err != nil {
			return true
		}
		sandboxID = id
		acted = true
	}
	if a.NextInit < 0 && len(a.Start) == 0 {
		return acted
	}
	env, err := w.startEnv(ctx, pod, sandboxID, a.Attempt)
	if err != nil {
		klog.ErrorS(err, "Preparing containers failed", "pod", klog.KObj(pod))
		return acted
	}
	if a.NextInit >= 0 {
		if w.startContainer(ctx, pod, &pod.Spec.InitContainers[a.NextInit], obs, env) {
			acted = true
		}
		return acted
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var p any
	for _, i := range a.Start {
		c := &pod.Spec.Containers[i]
		goRecover(&wg, &mu, &p, func() {
			if w.startContainer(ctx, pod, c, obs, env) {
				mu.Lock()
				acted = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	repanic(p)
	return acted
}
