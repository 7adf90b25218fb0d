package checkpointer

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/checkpoint"
	btypes "github.com/bootlet/bootlet/types"
)

// Action: carrying out the decisions of a tick.

// act carries out each component's decision, remembers what the next tick
// needs, and publishes the status.
func (c *Checkpointer) act(ctx context.Context, obs observation, decisions map[string]Decision) {
	statuses := map[string]ComponentStatus{}
	known := map[string]bool{}
	for _, key := range obs.keys {
		known[key] = true
		cv, dec := obs.components[key], decisions[key]
		for _, r := range cv.reports {
			c.reportOnce(r.key, r.value, r.eventType, r.reason, r.msg)
		}
		st, active := cv.stored, cv.facts.Active
		c.mem[key] = dec.Memory
		// Actions at Info; a changed reason to wait (it counts seconds) at V(2).
		if len(dec.Actions) > 0 {
			klog.InfoS("Checkpointer", "component", key, "decision", dec.Actions, "why", dec.Why)
		} else if dec.Why != c.why[key] && dec.Why != "" {
			klog.V(2).InfoS("Checkpointer", "component", key, "why", dec.Why)
		}
		c.why[key] = dec.Why
		for _, a := range dec.Actions {
			switch a {
			case ActionStore:
				if c.store(cv.candidate) {
					st = cv.candidate
				}
			case ActionActivate:
				if c.activate(st, dec.Cause) {
					active = true
				}
			case ActionWithdraw:
				if c.cfg.Handover != nil && cv.incoming != nil && cv.active != nil {
					c.cfg.Handover(ctx, cv.incoming.UID, cv.active.UID)
				}
				c.withdraw(cv.active)
			case ActionRemove:
				c.remove(st)
				st = nil
			}
		}
		if !active {
			c.cleanupObjects(key, st)
		}
		cst := ComponentStatus{Active: active, Why: dec.Why}
		if st != nil {
			cst.StoredHash, cst.StoredSource, cst.StoredAt = st.Hash, st.SourceName, st.StoredAt
		}
		statuses[key] = cst
	}
	for k := range c.mem {
		if !known[k] {
			delete(c.mem, k)
			delete(c.why, k)
			delete(c.rejected, k)
			delete(c.known, k)
		}
	}
	for k := range c.reported {
		if kind, comp, _ := strings.Cut(k, "\x00"); kind != "pod" && !known[comp] {
			delete(c.reported, k)
		}
	}
	c.mu.Lock()
	c.status = Status{Reachable: obs.reachable, Components: statuses}
	c.mu.Unlock()
}

// reportOnce logs and records an event, once for each (key, value).
func (c *Checkpointer) reportOnce(key, value, eventType, reason, msg string) {
	if c.reported[key] == value {
		return
	}
	c.reported[key] = value
	klog.InfoS("Checkpointer: "+reason, "message", msg)
	c.event(eventType, reason, msg)
}

func (c *Checkpointer) event(eventType, reason, msg string) {
	if c.cfg.Events != nil {
		c.cfg.Events.NodeEvent(c.cfg.NodeName, eventType, reason, msg)
	}
}

func (c *Checkpointer) store(ck *Checkpoint) bool {
	if ck == nil || c.rejected[ck.Key()] == ck.Hash {
		return false
	}
	// A checkpoint bootlet could not run is not worth storing: it would
	// replace one that runs. The registry's own validation decides, in a
	// dry run (AlreadyExists: the pod runs, the spec was accepted then).
	if _, err := c.cfg.Registry.CreatePod(CheckpointPod(ck), true); err != nil && !apierrors.IsAlreadyExists(err) {
		c.rejected[ck.Key()] = ck.Hash
		klog.ErrorS(err, "Not storing a pod checkpoint bootlet could not run", "component", ck.Key(), "source", ck.SourceName)
		c.event(v1.EventTypeWarning, "CheckpointRejected", fmt.Sprintf("pod %s cannot run without an apiserver, its checkpoint is not stored: %v", ck.SourceName, err))
		return false
	}
	delete(c.rejected, ck.Key())
	data, err := json.Marshal(ck)
	if err == nil {
		_, err = c.cfg.Store.Put(checkpoint.KindPodCheckpoint, ck.Namespace, ck.Name, data)
	}
	if err != nil {
		klog.ErrorS(err, "Storing a pod checkpoint failed", "component", ck.Key())
		c.event(v1.EventTypeWarning, "CheckpointWriteFailed", fmt.Sprintf("storing the checkpoint of %s failed: %v", ck.Key(), err))
		return false
	}
	klog.InfoS("Stored pod checkpoint", "component", ck.Key(), "source", ck.SourceName, "uid", ck.SourceUID, "hash", ck.Hash,
		"secrets", len(ck.Secrets), "configMaps", len(ck.ConfigMaps))
	c.event(v1.EventTypeNormal, "CheckpointStored", fmt.Sprintf("checkpoint of %s stored from pod %s (%s)", ck.Key(), ck.SourceName, ck.Hash))
	return true
}

// activate puts the checkpoint's objects into bootlet's registry, then the
// pod that uses them. An object or pod of the same name that the
// checkpointer did not make for this component and owner is never
// overwritten: the activation is refused with an event.
func (c *Checkpointer) activate(ck *Checkpoint, cause Cause) bool {
	if ck == nil {
		return false
	}
	secrets, cms := CheckpointObjects(ck)
	for _, s := range secrets {
		get := func() (*metav1.ObjectMeta, error) {
			old, err := c.cfg.Registry.GetSecret(s.Namespace, s.Name)
			if err != nil {
				return nil, err
			}
			return &old.ObjectMeta, nil
		}
		put := func(create bool) error { _, err := c.cfg.Registry.PutSecret(s, create, false); return err }
		if !c.putObject(ck, "Secret", "secret", s, get, put) {
			return false
		}
	}
	for _, m := range cms {
		get := func() (*metav1.ObjectMeta, error) {
			old, err := c.cfg.Registry.GetConfigMap(m.Namespace, m.Name)
			if err != nil {
				return nil, err
			}
			return &old.ObjectMeta, nil
		}
		put := func(create bool) error { _, err := c.cfg.Registry.PutConfigMap(m, create, false); return err }
		if !c.putObject(ck, "ConfigMap", "configMap", m, get, put) {
			return false
		}
	}
	pod := CheckpointPod(ck)
	pod.Annotations[btypes.AnnotationCheckpointActivated] = c.cfg.Now().UTC().Format(time.RFC3339Nano)
	pod.Annotations[btypes.AnnotationCheckpointActivatedBy] = string(CauseOf(string(cause)))
	created, err := c.cfg.Registry.CreatePod(pod, false)
	if apierrors.IsAlreadyExists(err) {
		pods, _ := c.cfg.Registry.ListPods(pod.Namespace)
		for i := range pods {
			if pods[i].Name == pod.Name && !madeFor(pods[i].ObjectMeta, ck) {
				c.conflict(ck, "Pod", pod.Namespace, pod.Name, pods[i].Annotations)
				return false
			}
		}
		return true
	}
	if err != nil {
		klog.ErrorS(err, "Checkpointer: running a checkpoint failed", "component", ck.Key())
		c.event(v1.EventTypeWarning, "CheckpointActivationFailed", fmt.Sprintf("running the checkpoint of %s failed: %v", ck.Key(), err))
		return false
	}
	klog.InfoS("Activated pod checkpoint", "component", ck.Key(), "pod", klog.KObj(created), "uid", created.UID, "hash", ck.Hash, "cause", cause)
	c.event(v1.EventTypeNormal, "CheckpointActivated", fmt.Sprintf("apiserver unreachable: running the checkpoint of %s as pod %s", ck.Key(), created.Name))
	return true
}

// conflict reports, once per object and claimant, an object in bootlet's
// registry that another component (or a user) holds under the name a
// checkpoint needs.
func (c *Checkpointer) conflict(ck *Checkpoint, kind, ns, name string, annotations map[string]string) {
	holder := annotations[btypes.AnnotationCheckpointOwner]
	if holder == "" {
		holder = annotations[btypes.AnnotationCheckpointOf]
	}
	if holder == "" {
		holder = "not the checkpointer"
	}
	c.reportOnce("object\x00"+ck.Key(), kind+"/"+ns+"/"+name+" "+holder, v1.EventTypeWarning, "CheckpointConflict",
		fmt.Sprintf("the checkpoint of %s (%s) is not run: %s %s/%s exists and belongs to %s; it is not overwritten", ck.Key(), ck.Owner(), kind, ns, name, holder))
}

func (c *Checkpointer) withdraw(p *v1.Pod) {
	if p == nil {
		return
	}
	if _, err := c.cfg.Registry.DeletePod(p.Namespace, p.Name, nil); err != nil && !apierrors.IsNotFound(err) {
		klog.ErrorS(err, "Checkpointer: withdrawing a checkpoint pod failed", "pod", klog.KObj(p))
		return
	}
	klog.InfoS("Withdrew pod checkpoint", "pod", klog.KObj(p), "component", p.Annotations[btypes.AnnotationCheckpointOf])
	c.event(v1.EventTypeNormal, "CheckpointWithdrawn", fmt.Sprintf("self-hosted %s is Ready: checkpoint pod %s withdrawn", p.Annotations[btypes.AnnotationCheckpointOf], p.Name))
}

func (c *Checkpointer) remove(ck *Checkpoint) {
	if ck == nil {
		return
	}
	if err := c.cfg.Store.Delete(checkpoint.KindPodCheckpoint, ck.Namespace, ck.Name); err != nil {
		klog.ErrorS(err, "Removing a pod checkpoint failed", "component", ck.Key())
		return
	}
	klog.InfoS("Removed pod checkpoint: its owner is gone", "component", ck.Key(), "owner", ck.OwnerKind+"/"+ck.OwnerName)
	c.event(v1.EventTypeNormal, "CheckpointRemoved", fmt.Sprintf("checkpoint of %s removed: %s/%s is gone, no longer annotated or no longer selects this node", ck.Key(), ck.OwnerKind, ck.OwnerName))
}

// cleanupObjects deletes the checkpoint's Secrets and ConfigMaps from
// bootlet's registry once no checkpoint pod uses them; only those the
// checkpointer made for this component and owner.
func (c *Checkpointer) cleanupObjects(key string, ck *Checkpoint) {
	if ck == nil {
		return
	}
	secrets, cms := CheckpointObjects(ck)
	for _, s := range secrets {
		if old, err := c.cfg.Registry.GetSecret(s.Namespace, s.Name); err == nil && madeFor(old.ObjectMeta, ck) {
			if err := c.cfg.Registry.DeleteSecret(s.Namespace, s.Name); err != nil && !apierrors.IsNotFound(err) {
				klog.ErrorS(err, "Checkpointer: deleting a Secret failed", "component", key, "secret", klog.KObj(s))
			}
		}
	}
	for _, m := range cms {
		if old, err := c.cfg.Registry.GetConfigMap(m.Namespace, m.Name); err == nil && madeFor(old.ObjectMeta, ck) {
			if err := c.cfg.Registry.DeleteConfigMap(m.Namespace, m.Name); err != nil && !apierrors.IsNotFound(err) {
				klog.ErrorS(err, "Checkpointer: deleting a ConfigMap failed", "component", key, "configMap", klog.KObj(m))
			}
		}
	}
}

// putObject creates or updates, in bootlet's registry, an object the
// checkpoint needs; one of that name the checkpointer did not make for this
// checkpoint is left alone and reported (false).
func (c *Checkpointer) putObject(ck *Checkpoint, kind, logKey string, obj klog.KMetadata, get func() (*metav1.ObjectMeta, error), put func(create bool) error) bool {
	if old, err := get(); err == nil && !madeFor(*old, ck) {
		c.conflict(ck, kind, obj.GetNamespace(), obj.GetName(), old.Annotations)
		return false
	}
	err := put(true)
	if apierrors.IsAlreadyExists(err) {
		if err = put(false); err != nil {
			klog.ErrorS(err, "Checkpointer: updating a "+kind+" failed", logKey, klog.KObj(obj))
			return false
		}
	} else if err != nil {
		klog.ErrorS(err, "Checkpointer: creating a "+kind+" failed", logKey, klog.KObj(obj))
		return false
	}
	return true
}
