package runner

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
)

// gcDecision says which exited containers and sandboxes of a pod to remove,
// like the kubelet's container GC with MaxPerPodContainer=1 (and its pod
// container deletor): running containers are never counted, and the last
// dead run of each container stays for lastState and `logs --previous`.
// Observed lists containers and sandboxes newest first.
func gcDecision(obs Observed) (containers, sandboxes []string) {
	if obs.PodStatus == nil {
		return nil, nil
	}
	seenDead := map[string]bool{}
	kept := map[string]bool{}
	for _, cs := range obs.ContainerStatuses {
		// A container that was created but never started (its start was
		// cut short, e.g. by a runtime crash) has no run to keep once a
		// newer container of that name exists: remove it rather than let
		// it take the one dead slot.
		// The newest one is kept and, never having run, does not take the
		// dead slot: the last real run stays for lastState.
		if cs.State == kubecontainer.ContainerStateCreated {
			if latest := obs.FindContainerStatusByName(cs.Name); latest != nil && latest.ID != cs.ID {
				containers = append(containers, cs.ID.ID)
				continue
			}
			kept[cs.ID.ID] = true
			continue
		}
		if cs.State == kubecontainer.ContainerStateRunning || !seenDead[cs.Name] {
			seenDead[cs.Name] = seenDead[cs.Name] || cs.State != kubecontainer.ContainerStateRunning
			kept[cs.ID.ID] = true
			continue
		}
		containers = append(containers, cs.ID.ID)
	}
	for i, sb := range obs.SandboxStatuses {
		if i == 0 || sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		inUse := false
		for id := range kept {
			// Keep a sandbox while a kept container lives in it.
			if obs.SandboxOf[id] == sb.Id {
				inUse = true
			}
		}
		if !inUse {
			sandboxes = append(sandboxes, sb.Id)
		}
	}
	return containers, sandboxes
}

// gc removes what gcDecision says, and the termination-log file of each
// removed container.
func (w *worker) gc(ctx context.Context, obs Observed) {
	containers, sandboxes := gcDecision(obs)
	for _, id := range containers {
		if err := w.m.removeContainer(ctx, id); err != nil {
			klog.V(2).InfoS("Removing a dead container failed; next sync retries", "container", id, "err", err)
			continue
		}
		removeFile(obs.TerminationLogOf[id])
	}
	for _, id := range sandboxes {
		if err := w.m.removePodSandbox(ctx, id); err != nil {
			klog.V(2).InfoS("Removing a dead sandbox failed; next sync retries", "sandbox", id, "err", err)
		}
	}
}
