package runner

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// A shadowed container is a RUNNING container of a pod the kubelet is in
// charge of that is not the newest container of its name. The kubelet only
// ever looks at the newest container of each name (FindContainerStatusByName
// over statuses sorted newest first), so it never probes, adopts or stops a
// shadowed one, and its container GC skips running containers: it runs for
// ever beside whatever the kubelet starts.
//
// The kubelet never makes one itself (it kills a container before it starts
// its replacement). bootlet does when the kubelet's first sync of a pod
// falls inside bootlet's StartContainer: the kubelet reads the container as
// CREATED, "always restarts" a created container and kills only an UNKNOWN
// one (kubelet container/helpers.go ShouldContainerBeRestarted,
// kuberuntime_manager.go computePodActions), so it starts attempt n+1 while
// bootlet's start completes. Under load (StartContainer took 3.5 s) that
// happened to etcd: the kubelet's copy died on the peer port bootlet's held,
// in CrashLoopBackOff, while bootlet's ran unwatched.
//
// shadowRepair is how bootlet undoes it, without a restart where it can:
//   - the newest container of the name exited (the kubelet's duplicate died,
//     typically on a port the shadowed one holds): remove the exited
//     containers newer than the newest shadowed one. It becomes the newest,
//     and the kubelet's next sync adopts it as it adopts any running
//     container (same hash: kept). The kubelet's GC would have removed them
//     later anyway.
//   - the newest container has run for duplicateGrace (the duplicate
//     started fine): stop the shadowed ones, which nobody watches; the
//     kubelet keeps its own. A younger one is waited for: a duplicate of a
//     server whose port the shadowed one holds runs a few seconds before
//     it dies on the port (etcd's, on three masters at load 40: 5 s), and
//     stopping bootlet's container first would make two restarts where
//     waiting makes none.
//   - the newest is CREATED or UNKNOWN (a start under way): wait.
type shadowRepair struct {
	// Remove: exited (or never started) containers newer than a running
	// container of the same name.
	Remove []string
	// Stop: running containers the kubelet no longer watches.
	Stop []shadowed
}

type shadowed struct{ ID, Name string }

func (r shadowRepair) empty() bool { return len(r.Remove) == 0 && len(r.Stop) == 0 }

// duplicateGrace is how long a running duplicate is given to die on a port
// before the shadowed container is stopped in its favour.
const duplicateGrace = 20 * time.Second

// shadowDecision is the pure part: obs lists containers newest first; now
// is the time of the observation.
func shadowDecision(obs Observed, now time.Time) shadowRepair {
	var r shadowRepair
	if obs.PodStatus == nil {
		return r
	}
	var names []string
	byName := map[string][]*kubecontainer.Status{}
	for _, cs := range obs.ContainerStatuses {
		if _, ok := byName[cs.Name]; !ok {
			names = append(names, cs.Name)
		}
		byName[cs.Name] = append(byName[cs.Name], cs)
	}
	for _, name := range names {
		l := byName[name]
		keep := -1 // the newest shadowed container
		for i := 1; i < len(l); i++ {
			if l[i].State == kubecontainer.ContainerStateRunning {
				keep = i
				break
			}
		}
		if keep < 0 {
			continue
		}
		stopOlder := func(from int) {
			for _, cs := range l[from:] {
				if cs.State == kubecontainer.ContainerStateRunning {
					r.Stop = append(r.Stop, shadowed{ID: cs.ID.ID, Name: name})
				}
			}
		}
		switch l[0].State {
		case kubecontainer.ContainerStateRunning:
			if now.Sub(l[0].StartedAt) < duplicateGrace {
				continue // it may yet die on the shadowed one's port
			}
			stopOlder(1)
		case kubecontainer.ContainerStateExited:
			// Everything newer than keep must be over: a CREATED one
			// between them never started (nothing starts an older
			// container after a newer one), an UNKNOWN one may run.
			settled := true
			for _, cs := range l[1:keep] {
				if cs.State != kubecontainer.ContainerStateExited && cs.State != kubecontainer.ContainerStateCreated {
					settled = false
				}
			}
			if !settled {
				continue
			}
			for _, cs := range l[:keep] {
				r.Remove = append(r.Remove, cs.ID.ID)
			}
			stopOlder(keep + 1)
		default:
			// CREATED or UNKNOWN: the kubelet's start is under way; the
			// next sync sees how it ended.
		}
	}
	return r
}

// repairShadowed carries out shadowDecision for a pod the kubelet is in
// charge of. It is the one exception to "hands off": it touches only
// containers the kubelet ignores (shadowed) or has given up on (its exited
// duplicates), never the one the kubelet watches once the repair is done.
// It reports whether it made a call.
func (w *worker) repairShadowed(ctx context.Context, pod *v1.Pod, obs Observed) bool {
	r := shadowDecision(obs, w.m.clock.Now())
	if r.empty() {
		return false
	}
	for _, id := range r.Remove {
		klog.InfoS("Removing the kubelet's exited duplicate of a running container it did not adopt", "pod", klog.KObj(pod), "container", id)
		if err := w.m.removeContainer(ctx, id); err != nil {
			klog.V(2).InfoS("Removing a duplicate container failed; next sync retries", "pod", klog.KObj(pod), "container", id, "err", err)
			continue
		}
		removeFile(obs.TerminationLogOf[id])
	}
	if len(r.Remove) > 0 {
		w.event(v1.EventTypeWarning, "DuplicateContainer", fmt.Sprintf(
			"The kubelet started a second container beside a running one it did not adopt (it saw it created, not yet started); bootlet removed the exited duplicate(s) %v so the kubelet adopts the running one", shortIDs(r.Remove)))
	}
	for _, s := range r.Stop {
		msg := fmt.Sprintf("Container %s (%s) runs beside a newer container of the same name: the kubelet no longer watches it; stopping it", s.Name, shortID(s.ID))
		klog.InfoS("Stopping a container the kubelet no longer watches", "pod", klog.KObj(pod), "container", s.Name, "id", s.ID)
		w.event(v1.EventTypeWarning, "DuplicateContainer", msg)
		w.killContainer(ctx, pod, s.ID, s.Name, defaultGrace(pod))
	}
	return true
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func shortIDs(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = shortID(id)
	}
	return out
}
