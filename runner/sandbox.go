package runner

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/cri"
)

// createSandbox is the kubelet's createPodSandbox: config, log and pod
// directories, RunPodSandbox. A failure is backed off per pod.
func (w *worker) createSandbox(ctx context.Context, pod *v1.Pod, attempt uint32) (string, error) {
	id, err := w.runSandbox(ctx, pod, attempt)
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		w.m.startBackoff.next(pod.UID, SandboxBackoffKey(pod), w.m.clock.Now())
		w.event(v1.EventTypeWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
		klog.ErrorS(err, "RunPodSandbox failed", "pod", klog.KObj(pod))
		return "", err
	}
	w.mu.Lock()
	w.volumesDone = false
	w.mu.Unlock()
	return id, nil
}

func (w *worker) runSandbox(ctx context.Context, pod *v1.Pod, attempt uint32) (string, error) {
	cfg, err := w.sandboxConfig(ctx, pod, attempt)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
		return "", err
	}
	podDir, err := w.podDirs(pod.UID).Pod(string(pod.UID))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(podDir, 0o750); err != nil {
		return "", err
	}
	w.mu.Lock()
	if w.startTime == nil {
		now := metav1.NewTime(w.m.clock.Now())
		w.startTime = &now
	}
	w.mu.Unlock()
	return w.m.runPodSandbox(ctx, cfg)
}

func (w *worker) sandboxConfig(ctx context.Context, pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	dnsCfg, err := w.m.dns.GetPodDNS(ctx, pod)
	if err != nil {
		return nil, err
	}
	return cri.SandboxConfig(pod, attempt, cri.SandboxOptions{PodLogsDir: w.m.cfg.PodLogsDir, CgroupDriver: w.m.cfg.CgroupDriver, DNS: dnsCfg})
}

// startEnv is what every container start of one sync shares.
type startEnv struct {
	sandboxID string
	sandbox   *runtimeapi.PodSandboxConfig
	podIPs    []string
	volumes   map[string]string
	hostname  string
}

func (w *worker) startEnv(ctx context.Context, pod *v1.Pod, sandboxID string, attempt uint32) (*startEnv, error) {
	sbCfg, err := w.sandboxConfig(ctx, pod, attempt)
	if err != nil {
		return nil, err
	}
	env := &startEnv{sandboxID: sandboxID, sandbox: sbCfg}
	if pod.Spec.HostNetwork {
		env.podIPs = w.m.cfg.HostIPs
	} else {
		// The IPs go into the env and /etc/hosts: a container must not
		// start with them missing because one read failed.
		resp, err := w.m.cfg.Runtime.PodSandboxStatus(ctx, sandboxID, false)
		if err != nil {
			return nil, fmt.Errorf("PodSandboxStatus %s: %w", sandboxID, err)
		}
		if n := resp.GetStatus().GetNetwork(); n != nil {
			if n.Ip != "" {
				env.podIPs = append(env.podIPs, n.Ip)
			}
			for _, ip := range n.AdditionalIps {
				env.podIPs = append(env.podIPs, ip.Ip)
			}
		}
	}
	env.hostname = pod.Name
	if pod.Spec.Hostname != "" {
		env.hostname = pod.Spec.Hostname
	}
	vols, err := SetupVolumes(w.podDirs(pod.UID), pod, w.m.cfg.Objects, w.facts(env.podIPs))
	if err != nil {
		w.event(v1.EventTypeWarning, "FailedMount", err.Error())
		return nil, err
	}
	env.volumes = vols
	w.mu.Lock()
	w.volumesDone = true
	w.mu.Unlock()
	return env, nil
}

// syncVolumes rewrites the Secret, ConfigMap, downwardAPI and projected
// volume contents of a pod with running containers after refreshVolumes
// asked for it (an object changed, or the daemon restarted), as the
// kubelet's volume manager remounts them on a pod sync. Container starts
// refresh them through startEnv.
func (w *worker) syncVolumes(pod *v1.Pod, obs Observed) {
	if len(obs.ActiveContainerStatuses) == 0 {
		return
	}
	w.materialiseVolumes(pod, obs)
}

// materialiseVolumes writes the pod's Secret, ConfigMap, projected and
// downwardAPI volume files once (again after refreshVolumes).
func (w *worker) materialiseVolumes(pod *v1.Pod, obs Observed) {
	w.mu.Lock()
	done := w.volumesDone
	w.volumesDone = true
	w.mu.Unlock()
	if done {
		return
	}
	podIPs := obs.IPs
	if pod.Spec.HostNetwork {
		podIPs = w.m.cfg.HostIPs
	}
	if _, err := SetupVolumes(w.podDirs(pod.UID), pod, w.m.cfg.Objects, w.facts(podIPs)); err != nil {
		w.event(v1.EventTypeWarning, "FailedMount", err.Error())
		w.mu.Lock()
		w.volumesDone = false
		w.mu.Unlock()
	}
}

func (w *worker) facts(podIPs []string) cri.EnvFacts {
	return cri.EnvFacts{PodIPs: podIPs, HostIPs: w.m.cfg.HostIPs, NodeAllocatable: w.m.cfg.Allocatable}
}
