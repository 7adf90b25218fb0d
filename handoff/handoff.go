package handoff

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	allocationstate "k8s.io/kubernetes/pkg/kubelet/allocation/state"
	"sigs.k8s.io/yaml"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/cri"
	btypes "github.com/bootlet/bootlet/types"
)

// Handoff defaults, as the kubelet's own (healthzPort 10248, the kubeadm
// staticPodPath, --root-dir).
const (
	DefaultKubeletHealthzURL     = "http://127.0.0.1:10248/healthz"
	DefaultKubeletStaticPodPath  = "/etc/kubernetes/manifests"
	DefaultKubeletRootDir        = "/var/lib/kubelet"
	kubeletActuatedPodsStateFile = "actuated_pods_state" // kuberuntime_manager.go actuatedPodsStateFile
	handoffPollPeriod            = 500 * time.Millisecond
)

// Config configures the handoff of bootlet's pods to a kubelet on the node
// (docs/handoff.md). The handoff is off when HealthzURL, StaticPodPath or
// KubeletRootDir is empty.
type Config struct {
	// HealthzURL is the kubelet's healthz: a 200 means a kubelet runs, if
	// a process of KubeletUID answered it (handoff_kubelet.go).
	HealthzURL string
	// KubeletUID is the uid the kubelet runs as: 0, root.
	KubeletUID int
	// StaticPodPath is the kubelet's staticPodPath: bootlet keeps a static
	// copy (same UID) of every pod it runs there.
	StaticPodPath string
	// KubeletRootDir is the kubelet's --root-dir: its pod directories
	// (ROOT/pods/UID, the sign that it synced a pod) and its actuated
	// resources checkpoint live there.
	KubeletRootDir string
	// WriteActuated makes bootlet record its containers' resources in the
	// kubelet's actuated_pods_state checkpoint while no kubelet runs, so the
	// kubelet that adopts them finds them already actuated and does not
	// "resize" them (UpdateContainerResources, UpdatePodSandboxResources).
	WriteActuated bool
	// Owners records ownership changes durably (podapi.Registry.PodOwner).
	Owners OwnerSink
	// Objects resolves the ConfigMap values the static copy takes into env
	// (podapi.Registry).
	Objects cri.ObjectSource
	// Events records the pod events of the handoff (podapi.EventLog).
	Events EventSink
}

// Enabled reports whether the handoff is on (the node's phase tells a
// node without it apart).
func (c *Config) Enabled() bool {
	return c != nil && c.HealthzURL != "" && c.StaticPodPath != "" && c.KubeletRootDir != ""
}

// OwnerSink records a pod's owner (in the API object and its checkpoint).
type OwnerSink interface {
	PodOwner(key btypes.PodKey, uid types.UID, owner btypes.Owner)
}

// EventSink receives kubelet-style events about pods.
type EventSink interface {
	Event(pod *v1.Pod, eventType, reason, message string)
}

// Runner is what the poll loop needs of the pod runner (runner.Manager).
type Runner interface {
	// WorkerPods is the API form of every pod a worker runs, and which of
	// them are being deleted.
	WorkerPods() (pods map[types.UID]*v1.Pod, terminating map[types.UID]bool)
	// KickAll makes every worker sync at once.
	KickAll()
}

// Handoff is the handoff controller: a poll loop that watches the kubelet's
// healthz (and writes the actuated checkpoint while there is none), and a
// per-pod step each worker runs at every sync (Step): it keeps the static
// copy in place, decides the owner (decideHandoff) and tells the worker
// whether to act. No lock is held across I/O: mu guards only the maps.
type Handoff struct {
	cfg Config
	up  atomic.Bool
	// lastHolder is the pid that held the healthz's socket at the last
	// poll (the kubelet), looked at first next time.
	lastHolder atomic.Int64
	// distrust is why the last poll's 200 was not trusted ("" none), so a
	// change is logged once.
	distrust string

	mu   sync.Mutex // leaf
	pods map[types.UID]*handoffPod
	// actuated is what the actuated checkpoint last got from bootlet, per
	// pod UID, so it is written only when that changes.
	actuated map[types.UID]string
}

type handoffPod struct {
	owner       btypes.Owner
	fileInPlace bool
	adoptedAt   time.Time
	// noStaticCopy: the pod takes Secret values into env, so it never gets
	// a static copy (SecretEnvError); the Warning event is sent once.
	noStaticCopy bool
}

// New builds the handoff controller; nil when cfg does not enable it.
func New(cfg Config) *Handoff {
	if !cfg.Enabled() {
		return nil
	}
	return &Handoff{cfg: cfg, pods: map[types.UID]*handoffPod{}, actuated: map[types.UID]string{}}
}

// KubeletUp reports whether the kubelet's healthz answered at the last poll
// (false when the handoff is off).
func (h *Handoff) KubeletUp() bool { return h != nil && h.up.Load() }

// Run polls the kubelet's healthz until ctx ends and kicks every worker of
// r when the answer changes, so each pod's step reacts at once. While no
// kubelet answers it keeps the kubelet's actuated checkpoint in step with
// bootlet's pods. It returns at once when the handoff is off. Start it once
// the stored pods are handed to their workers.
func (h *Handoff) Run(ctx context.Context, r Runner) {
	if h == nil {
		return
	}
	klog.InfoS("Handoff to the kubelet enabled", "healthz", h.cfg.HealthzURL, "staticPodPath", h.cfg.StaticPodPath, "kubeletRootDir", h.cfg.KubeletRootDir)
	t := time.NewTicker(handoffPollPeriod)
	defer t.Stop()
	for {
		up := h.kubeletHealthy(ctx)
		if ctx.Err() != nil {
			return
		}
		if h.up.Swap(up) != up {
			klog.InfoS("Kubelet healthz changed", "up", up, "url", h.cfg.HealthzURL)
			r.KickAll()
		}
		pods, terminating := r.WorkerPods()
		h.forgetGone(pods)
		if !up && h.cfg.WriteActuated {
			h.writeActuated(pods, terminating)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *Handoff) kubeletHealthy(ctx context.Context) bool {
	up, why := h.kubeletAnswers(ctx)
	// Only a 200 from another process is news worth a log line: a local
	// user pretends to be the kubelet.
	distrust := ""
	if !up && strings.HasPrefix(why, "answered 200") {
		distrust = why
	}
	if distrust != h.distrust {
		if distrust != "" {
			klog.InfoS("Kubelet healthz answered by something that is not the kubelet; not handing off", "url", h.cfg.HealthzURL, "reason", distrust)
		}
		h.distrust = distrust
	}
	return up
}

// forgetGone drops the state of pods that no worker runs any more.
func (h *Handoff) forgetGone(pods map[types.UID]*v1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for uid := range h.pods {
		if _, ok := pods[uid]; !ok {
			delete(h.pods, uid)
		}
	}
	for uid := range h.actuated {
		if _, ok := pods[uid]; !ok {
			delete(h.actuated, uid)
		}
	}
}

// writeActuated records, in the kubelet's actuated_pods_state, the
// resources of every container of every pod bootlet owns, as the kubelet's
// kuberuntime does when it creates a container, with the kubelet's own
// checkpoint package (format and checksum are the kubelet's). Only while no
// kubelet answers: a running kubelet keeps that checkpoint in memory and
// rewrites it whole, and it reads it once, at its start.
func (h *Handoff) writeActuated(pods map[types.UID]*v1.Pod, terminating map[types.UID]bool) {
	want := map[types.UID]string{}
	var changed []types.UID
	h.mu.Lock()
	for uid, pod := range pods {
		if terminating[uid] {
			continue
		}
		if st := h.pods[uid]; st != nil && st.owner != btypes.OwnerBootlet {
			continue
		}
		want[uid] = actuatedKey(pod)
		if h.actuated[uid] != want[uid] {
			changed = append(changed, uid)
		}
	}
	h.mu.Unlock()
	if len(changed) == 0 {
		return
	}
	st, err := allocationstate.NewStateCheckpoint(h.cfg.KubeletRootDir, kubeletActuatedPodsStateFile)
	if err != nil {
		klog.ErrorS(err, "Opening the kubelet's actuated resources checkpoint failed", "dir", h.cfg.KubeletRootDir)
		return
	}
	for _, uid := range changed {
		pod := pods[uid]
		ok := true
		for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range list {
				if err := st.SetContainerResources(uid, list[i].Name, actuatedResources(pod, &list[i])); err != nil {
					klog.ErrorS(err, "Writing the kubelet's actuated resources checkpoint failed", "pod", klog.KObj(pod), "container", list[i].Name)
					ok = false
				}
			}
		}
		if pod.Spec.Resources != nil && (pod.Spec.Resources.Requests != nil || pod.Spec.Resources.Limits != nil) {
			if err := st.SetPodLevelResources(uid, pod.Spec.Resources); err != nil {
				klog.ErrorS(err, "Writing the kubelet's actuated pod resources failed", "pod", klog.KObj(pod))
				ok = false
			}
		}
		if ok {
			klog.V(2).InfoS("Recorded actuated resources for the kubelet", "pod", klog.KObj(pod), "file", filepath.Join(h.cfg.KubeletRootDir, kubeletActuatedPodsStateFile))
			h.mu.Lock()
			h.actuated[uid] = want[uid]
			h.mu.Unlock()
		}
	}
}

// actuatedKey identifies what writeActuated records for a pod.
func actuatedKey(pod *v1.Pod) string {
	var b bytes.Buffer
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			r := actuatedResources(pod, &list[i])
			fmt.Fprintf(&b, "%s=%v/%v;", list[i].Name, sortedList(r.Requests), sortedList(r.Limits))
		}
	}
	if pod.Spec.Resources != nil {
		fmt.Fprintf(&b, "pod=%v/%v", sortedList(pod.Spec.Resources.Requests), sortedList(pod.Spec.Resources.Limits))
	}
	return b.String()
}

func sortedList(l v1.ResourceList) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		q := l[v1.ResourceName(k)]
		fmt.Fprintf(&b, "%s:%s,", k, q.String())
	}
	return b.String()
}

// Step is the handoff part of one worker sync, run after the observation:
// it keeps the pod's static copy in place (or withdraws it), moves the
// owner forward, records a change, and reports whether the worker must
// keep its hands off the pod (runner.Handoff).
func (h *Handoff) Step(apiPod *v1.Pod, terminating, sandboxReady bool, volumeDirs map[string]string) bool {
	uid := apiPod.UID
	h.mu.Lock()
	st := h.pods[uid]
	if st == nil {
		st = &handoffPod{owner: btypes.OwnerOf(apiPod)}
		h.pods[uid] = st
	}
	in := handoffInput{Owner: st.owner, KubeletUp: h.up.Load(), FileInPlace: st.fileInPlace, Terminating: terminating, SandboxReady: sandboxReady}
	h.mu.Unlock()

	in.KubeletKnows = h.kubeletKnows(uid)
	dec := decideHandoff(in)
	switch {
	case dec.WriteFile:
		var refused *SecretEnvError
		in.FileInPlace, refused = h.ensureFile(apiPod, volumeDirs)
		h.warnNoStaticCopy(apiPod, st, refused)
	case dec.RemoveFile:
		h.removeFile(apiPod)
		in.FileInPlace = false
	}
	// The file may just have been written: decide again with what is on
	// disk now (the decision is monotonic in FileInPlace).
	dec = decideHandoff(in)

	h.mu.Lock()
	old := st.owner
	st.owner, st.fileInPlace = dec.Owner, in.FileInPlace
	if old != dec.Owner && dec.Owner == btypes.OwnerKubeletStatic {
		st.adoptedAt = time.Now()
	}
	h.mu.Unlock()
	if old != dec.Owner {
		klog.InfoS("Pod owner changed", "pod", klog.KObj(apiPod), "uid", uid, "from", old, "to", dec.Owner)
		switch dec.Owner {
		case btypes.OwnerKubeletStatic:
			h.event(apiPod, v1.EventTypeNormal, "AdoptedByKubelet", "The kubelet adopted the pod as a static pod with the same UID; bootlet no longer acts on it")
		case btypes.OwnerReleased:
			h.event(apiPod, v1.EventTypeNormal, "ReleasedToKubelet", "bootlet withdrew the pod's static copy; the kubelet stops it")
		}
		if h.cfg.Owners != nil {
			h.cfg.Owners.PodOwner(btypes.KeyOf(apiPod), uid, dec.Owner)
		}
	}
	return dec.HandsOff
}

// Owner is the pod's owner as the last Step decided it (false: no Step
// yet).
func (h *Handoff) Owner(uid types.UID) (btypes.Owner, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.pods[uid]; st != nil {
		return st.owner, true
	}
	return "", false
}

func (h *Handoff) event(pod *v1.Pod, eventType, reason, message string) {
	if h.cfg.Events != nil {
		h.cfg.Events.Event(pod, eventType, reason, message)
	}
}

// kubeletKnows reports whether the kubelet made the pod's plugins
// directory (ROOT/pods/UID/plugins), which it does in SyncPod
// (makePodDataDirs) once it admitted the pod from a source. bootlet's own
// pod directory layout never has it, so this holds even when bootlet's
// --root-dir is the kubelet's.
func (h *Handoff) kubeletKnows(uid types.UID) bool {
	fi, err := os.Stat(filepath.Join(h.cfg.KubeletRootDir, "pods", string(uid), "plugins"))
	return err == nil && fi.IsDir()
}

func (h *Handoff) path(pod *v1.Pod) string {
	return filepath.Join(h.cfg.StaticPodPath, StaticPodFileName(pod.Namespace, pod.Name))
}

// ensureFile makes sure the pod's static copy is on disk with its current
// content, and reports whether it is. A new content goes to a dotfile
// (which the kubelet's file source ignores), is fsynced and renamed over
// the final name: the kubelet never reads half a file, which would remove
// the pod from its source and kill it. The file is 0600 (it shows the
// pod's ConfigMap values). A pod that takes Secret values into env gets no
// file: that refusal is returned, and the pod stays bootlet's.
func (h *Handoff) ensureFile(pod *v1.Pod, volumeDirs map[string]string) (bool, *SecretEnvError) {
	static, err := StaticPod(pod, volumeDirs, h.cfg.Objects)
	var refused *SecretEnvError
	if errors.As(err, &refused) {
		return false, refused
	}
	if err != nil {
		klog.ErrorS(err, "Cannot render the static copy of a pod", "pod", klog.KObj(pod))
		return false, nil
	}
	data, err := yaml.Marshal(static)
	if err != nil {
		klog.ErrorS(err, "Cannot encode the static copy of a pod", "pod", klog.KObj(pod))
		return false, nil
	}
	path := h.path(pod)
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return true, nil
	}
	if renamed, err := checkpoint.WriteFileAtomic(path, data); err != nil {
		klog.ErrorS(err, "Writing the static copy of a pod failed", "pod", klog.KObj(pod), "path", path)
		if !renamed {
			return false, nil
		}
	}
	klog.InfoS("Wrote the static copy of a pod for the kubelet", "pod", klog.KObj(pod), "uid", pod.UID, "path", path)
	return true, nil
}

// warnNoStaticCopy reports, once per pod, that a pod gets no static copy
// because it takes Secret values into env: such a pod can only come from
// before the API refused them (an older checkpoint). It stays bootlet's.
// A copy an older bootlet wrote is left alone (withdrawing it would stop a
// pod the kubelet may run), but the event says so.
func (h *Handoff) warnNoStaticCopy(pod *v1.Pod, st *handoffPod, refused *SecretEnvError) {
	h.mu.Lock()
	first := refused != nil && !st.noStaticCopy
	st.noStaticCopy = refused != nil
	h.mu.Unlock()
	if !first {
		return
	}
	msg := refused.Error() + ". The pod stays bootlet's; a kubelet that starts does not know it and may stop its containers"
	if _, err := os.Stat(h.path(pod)); err == nil {
		msg += "; a static copy an older bootlet wrote is still at " + h.path(pod) + " and may hold Secret values: remove it once the pod is recreated without Secret env"
	}
	klog.InfoS("No static copy for a pod that takes Secret values into env", "pod", klog.KObj(pod), "uid", pod.UID, "reason", refused.Error())
	h.event(pod, v1.EventTypeWarning, "NoStaticCopy", msg)
}

func (h *Handoff) removeFile(pod *v1.Pod) {
	path := h.path(pod)
	err := os.Remove(path)
	switch {
	case err == nil:
		klog.InfoS("Withdrew the static copy of a pod", "pod", klog.KObj(pod), "path", path)
	case !os.IsNotExist(err):
		klog.ErrorS(err, "Removing the static copy of a pod failed", "pod", klog.KObj(pod), "path", path)
	}
}
