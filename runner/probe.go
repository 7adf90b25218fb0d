package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/probe"
	grpcprobe "k8s.io/kubernetes/pkg/probe/grpc"
	httpprobe "k8s.io/kubernetes/pkg/probe/http"
	tcpprobe "k8s.io/kubernetes/pkg/probe/tcp"
	utilexec "k8s.io/utils/exec"
)

// handlerRunner runs probe and lifecycle handlers with the kubelet's own
// probers (pkg/probe/...); exec goes through CRI ExecSync like the kubelet.
type handlerRunner struct {
	rt   internalapi.RuntimeService
	http httpprobe.Prober
	tcp  tcpprobe.Prober
	grpc grpcprobe.Prober
}

func newHandlerRunner(rt internalapi.RuntimeService) *handlerRunner {
	return &handlerRunner{rt: rt, http: httpprobe.New(false), tcp: tcpprobe.New(), grpc: grpcprobe.New()}
}

// run executes one probe handler against a container.
func (h *handlerRunner) run(ctx context.Context, p v1.ProbeHandler, c *v1.Container, containerID, podIP string, timeout time.Duration) (probe.Result, string, error) {
	host := podIP
	if host == "" {
		host = "127.0.0.1"
	}
	switch {
	case p.Exec != nil:
		stdout, stderr, err := h.rt.ExecSync(ctx, containerID, p.Exec.Command, timeout)
		out := string(stdout) + string(stderr)
		if err != nil {
			// cri-client reports a non-zero exit as a utilexec.ExitError; the
			// kubelet's exec prober makes that a Failure with the output.
			var exitErr utilexec.ExitError
			if errors.As(err, &exitErr) {
				return probe.Failure, out, nil
			}
			return probe.Unknown, out, err
		}
		return probe.Success, out, nil
	case p.HTTPGet != nil:
		hg := p.HTTPGet.DeepCopy()
		if hg.Host == "" {
			hg.Host = host
		}
		req, err := httpprobe.NewRequestForHTTPGetAction(hg, c, hg.Host, "probe")
		if err != nil {
			return probe.Unknown, "", err
		}
		return h.http.Probe(req, timeout)
	case p.TCPSocket != nil:
		port, err := probe.ResolveContainerPort(p.TCPSocket.Port, c)
		if err != nil {
			return probe.Unknown, "", err
		}
		th := p.TCPSocket.Host
		if th == "" {
			th = host
		}
		return h.tcp.Probe(th, port, timeout)
	case p.GRPC != nil:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return h.grpc.Probe(host, service, int(p.GRPC.Port), timeout)
	}
	return probe.Unknown, "", fmt.Errorf("missing probe handler")
}

// runLifecycle runs a postStart/preStop handler (exec, httpGet or sleep).
func (h *handlerRunner) runLifecycle(ctx context.Context, lh *v1.LifecycleHandler, c *v1.Container, containerID, podIP string, timeout time.Duration) error {
	switch {
	case lh.Sleep != nil:
		select {
		case <-time.After(time.Duration(lh.Sleep.Seconds) * time.Second):
		case <-ctx.Done():
		}
		return nil
	case lh.Exec != nil || lh.HTTPGet != nil || lh.TCPSocket != nil:
		res, out, err := h.run(ctx, v1.ProbeHandler{Exec: lh.Exec, HTTPGet: lh.HTTPGet, TCPSocket: lh.TCPSocket}, c, containerID, podIP, timeout)
		if err != nil {
			return err
		}
		if res != probe.Success {
			return fmt.Errorf("handler failed: %s", strings.TrimSpace(out))
		}
	}
	return nil
}

type probeKind string

const (
	probeLiveness  probeKind = "Liveness"
	probeReadiness probeKind = "Readiness"
	probeStartup   probeKind = "Startup"
)

// probeResults holds every container's probe verdict; workers read it when
// planning, probe loops write it and kick the pod worker on a change.
type probeResults struct {
	mu sync.Mutex
	m  map[string]ProbeState
}

func (r *probeResults) get(id string) ProbeState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[id]
}

func (r *probeResults) snapshot(ids []string) map[string]ProbeState {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]ProbeState, len(ids))
	for _, id := range ids {
		out[id] = r.m[id]
	}
	return out
}

func (r *probeResults) update(id string, f func(*ProbeState)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.m[id]
	before := s
	f(&s)
	r.m[id] = s
	return before != s
}

func (r *probeResults) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}

func (r *probeResults) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// probesToChange is the probe loops to stop (their container no longer
// runs) and the running containers that need one.
func probesToChange(obs Observed, probing map[string]context.CancelFunc) (stop []string, start []*kubecontainer.Status) {
	running := map[string]bool{}
	for _, cs := range obs.ContainerStatuses {
		if cs.State != kubecontainer.ContainerStateRunning {
			continue
		}
		running[cs.ID.ID] = true
		if _, ok := probing[cs.ID.ID]; !ok {
			start = append(start, cs)
		}
	}
	for id := range probing {
		if !running[id] {
			stop = append(stop, id)
		}
	}
	return stop, start
}

// ensureProbes runs one probe loop per running container and stops loops of
// containers that are gone.
func (w *worker) ensureProbes(ctx context.Context, pod *v1.Pod, obs Observed) {
	podIP := ""
	if len(obs.IPs) > 0 {
		podIP = obs.IPs[0]
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	stop, start := probesToChange(obs, w.probing)
	for _, id := range stop {
		w.probing[id]()
		delete(w.probing, id)
	}
	for _, cs := range start {
		c := containerSpec(pod, cs.Name)
		if c == nil {
			continue
		}
		pctx, cancel := context.WithCancel(ctx)
		w.probing[cs.ID.ID] = cancel
		w.probeWG.Add(1)
		go func(c v1.Container, id string) {
			defer w.probeWG.Done()
			// A probe loop runs beside the sync passes: a panic in it
			// ends this probe (logged, a Warning event), not the daemon.
			defer func() {
				if r := recover(); r != nil {
					_ = w.panicked("probe of container "+c.Name, r)
				}
			}()
			w.probeLoop(pctx, c, id, podIP)
		}(*c, cs.ID.ID)
	}
}

// stopProbes stops every probe loop of the pod and waits until they have
// forgotten their results.
func (w *worker) stopProbes() {
	w.mu.Lock()
	for id, cancel := range w.probing {
		cancel()
		delete(w.probing, id)
	}
	w.mu.Unlock()
	w.probeWG.Wait()
}

// probeLoop is the kubelet's prober worker for one container: startup runs
// first; liveness and readiness only after the container has started; a
// result flips only after failureThreshold/successThreshold consecutive
// results.
func (w *worker) probeLoop(ctx context.Context, c v1.Container, containerID, podIP string) {
	results := w.m.probes
	results.update(containerID, func(s *ProbeState) {
		s.Started = c.StartupProbe == nil
		s.Ready = false
	})
	defer results.forget(containerID)
	type state struct {
		p                *v1.Probe
		kind             probeKind
		successes, fails int32
		next             time.Time
	}
	now := time.Now()
	var probes []*state
	for _, p := range []struct {
		p    *v1.Probe
		kind probeKind
	}{{c.StartupProbe, probeStartup}, {c.LivenessProbe, probeLiveness}, {c.ReadinessProbe, probeReadiness}} {
		if p.p != nil {
			probes = append(probes, &state{p: p.p, kind: p.kind, next: now.Add(time.Duration(p.p.InitialDelaySeconds) * time.Second)})
		}
	}
	if c.ReadinessProbe == nil {
		results.update(containerID, func(s *ProbeState) { s.Ready = true })
	}
	if len(probes) == 0 {
		return
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		started := results.get(containerID).Started
		for _, s := range probes {
			if time.Now().Before(s.next) || (s.kind != probeStartup && !started) || (s.kind == probeStartup && started) {
				continue
			}
			s.next = time.Now().Add(time.Duration(s.p.PeriodSeconds) * time.Second)
			timeout := time.Duration(s.p.TimeoutSeconds) * time.Second
			pctx, cancel := context.WithTimeout(ctx, timeout+time.Second)
			res, out, err := w.m.handlers.run(pctx, s.p.ProbeHandler, &c, containerID, podIP, timeout)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil || res != probe.Success {
				s.fails++
				s.successes = 0
				msg := strings.TrimSpace(out)
				if err != nil {
					msg = err.Error()
				}
				w.event(v1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %s", s.kind, msg))
			} else {
				s.successes++
				s.fails = 0
			}
			changed := results.update(containerID, func(ps *ProbeState) {
				switch s.kind {
				case probeStartup:
					if s.successes >= s.p.SuccessThreshold {
						ps.Started = true
					}
					ps.StartupFailed = s.fails >= s.p.FailureThreshold
				case probeLiveness:
					if s.fails >= s.p.FailureThreshold {
						ps.LivenessFailed = true
					}
				case probeReadiness:
					if s.successes >= s.p.SuccessThreshold {
						ps.Ready = true
					}
					if s.fails >= s.p.FailureThreshold {
						ps.Ready = false
					}
				}
			})
			if changed {
				w.kickNow()
			}
		}
	}
}
