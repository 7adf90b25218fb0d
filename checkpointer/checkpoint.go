package checkpointer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/ownprocess"
	btypes "github.com/bootlet/bootlet/types"
)

// The checkpointer's pure core (docs/checkpointer.md): what a
// self-hosted pod's checkpoint is, how the pod bootlet runs from it looks,
// and Decide, the rules that store, activate, withdraw and drop
// checkpoints. checkpointer.go does the I/O around it.

const (
	// CheckpointPodSuffix makes the name of the pod run from a checkpoint:
	// COMPONENT-checkpoint, distinct from every self-hosted pod's name.
	CheckpointPodSuffix = "-checkpoint"
)

// Checkpoint is what is stored for one component: the latest self-hosted
// pod of it seen Running and Ready on this node, and the Secrets and
// ConfigMaps it uses, taken together from the same apiserver pass, so they
// are consistent. It is one record (checkpoint.KindPodCheckpoint), so it is
// replaced atomically.
type Checkpoint struct {
	metav1.TypeMeta `json:",inline"`
	// Namespace and Name are the component's: the DaemonSet or Deployment
	// owning the pod, or the pod itself (componentOf).
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Owner is the pod's controller (Kind/Name), "" for a bare pod (which
	// the rule book never stores any more, see owner.go), and
	// the controller's UID as the apiserver had it when the checkpoint was
	// stored ("" in a record of an older bootlet: the first verified
	// candidate of the same kind and name fills it in).
	OwnerKind string    `json:"ownerKind,omitempty"`
	OwnerName string    `json:"ownerName,omitempty"`
	OwnerUID  types.UID `json:"ownerUID,omitempty"`
	// Source is the self-hosted pod's NAMESPACE/NAME and UID.
	SourceName string    `json:"sourceName"`
	SourceUID  string    `json:"sourceUID"`
	StoredAt   time.Time `json:"storedAt"`
	// Hash covers the pod spec and the objects' content: a new one moves
	// the checkpoint forward.
	Hash       string         `json:"hash"`
	Pod        *v1.Pod        `json:"pod"`
	Secrets    []v1.Secret    `json:"secrets,omitempty"`
	ConfigMaps []v1.ConfigMap `json:"configMaps,omitempty"`
}

// Key is the component's NAMESPACE/NAME.
func (c *Checkpoint) Key() string { return c.Namespace + "/" + c.Name }

// Owner is the controller the checkpoint stands for.
func (c *Checkpoint) Owner() CheckpointOwner {
	return CheckpointOwner{Kind: c.OwnerKind, Namespace: c.Namespace, Name: c.OwnerName, UID: c.OwnerUID}
}

// sameComponent: o is the controller the checkpoint stands for (a record
// without a UID matches by kind and name, and is adopted).
func (c *Checkpoint) sameComponent(o CheckpointOwner) bool {
	return c.OwnerKind == o.Kind && c.Namespace == o.Namespace && c.OwnerName == o.Name && (c.OwnerUID == "" || c.OwnerUID == o.UID)
}

// newOwnedCheckpoint is NewCheckpoint for a pod whose owner the rule book
// verified: the component is that owner, UID included.
func newOwnedCheckpoint(pod *v1.Pod, owner CheckpointOwner, secrets []v1.Secret, cms []v1.ConfigMap, now time.Time) *Checkpoint {
	c := NewCheckpoint(pod, secrets, cms, now)
	c.Namespace, c.Name, c.OwnerKind, c.OwnerName, c.OwnerUID = owner.Namespace, owner.Name, owner.Kind, owner.Name, owner.UID
	return c
}

// NewCheckpoint builds the checkpoint of a self-hosted pod with the
// objects it uses. The pod is kept as the API had it minus status and
// bookkeeping; the pod bootlet runs is derived from it at activation
// (CheckpointPod), so a newer bootlet applies its own rules to old records.
func NewCheckpoint(pod *v1.Pod, secrets []v1.Secret, cms []v1.ConfigMap, now time.Time) *Checkpoint {
	ns, name, ownerKind, ownerName := componentOf(pod)
	p := &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
			Labels: pod.Labels, Annotations: pod.Annotations, OwnerReferences: pod.OwnerReferences},
		Spec: *pod.Spec.DeepCopy(),
	}
	c := &Checkpoint{
		TypeMeta:  metav1.TypeMeta{APIVersion: btypes.CheckpointAPIVersion, Kind: btypes.CheckpointKind},
		Namespace: ns, Name: name, OwnerKind: ownerKind, OwnerName: ownerName,
		SourceName: pod.Namespace + "/" + pod.Name, SourceUID: string(pod.UID), StoredAt: now.UTC(), Pod: p,
	}
	for _, s := range secrets {
		c.Secrets = append(c.Secrets, v1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace}, Type: s.Type, Data: s.Data})
	}
	for _, m := range cms {
		c.ConfigMaps = append(c.ConfigMaps, v1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace}, Data: m.Data, BinaryData: m.BinaryData})
	}
	sort.Slice(c.Secrets, func(i, j int) bool { return c.Secrets[i].Name < c.Secrets[j].Name })
	sort.Slice(c.ConfigMaps, func(i, j int) bool { return c.ConfigMaps[i].Name < c.ConfigMaps[j].Name })
	c.Hash = checkpointHash(c)
	return c
}

// checkpointHash covers what changes the pod bootlet would run: the spec,
// the labels and annotations, and the objects' content. Not the source pod's
// name or UID: a DaemonSet pod recreated with the same spec is the same
// checkpoint.
func checkpointHash(c *Checkpoint) string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	_ = enc.Encode(c.Pod.Spec)
	_ = enc.Encode(c.Pod.Labels)
	_ = enc.Encode(c.Pod.Annotations)
	_ = enc.Encode(c.Secrets)
	_ = enc.Encode(c.ConfigMaps)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// componentOf names the component a pod belongs to: its DaemonSet, the
// Deployment of its ReplicaSet (the ReplicaSet's name minus the
// pod-template-hash suffix), its other controller, or the pod itself. The
// key is stable across upgrades, which replace a DaemonSet's pod (new
// name, new UID) and a Deployment's ReplicaSet: keying on the pod, as
// bootkube did, loses the checkpoint at each upgrade (bootkube#824).
func componentOf(pod *v1.Pod) (ns, name, ownerKind, ownerName string) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return pod.Namespace, pod.Name, "", ""
	}
	if ref.Kind == "ReplicaSet" {
		if hash := pod.Labels["pod-template-hash"]; hash != "" {
			if dep, ok := strings.CutSuffix(ref.Name, "-"+hash); ok && dep != "" {
				return pod.Namespace, dep, "Deployment", dep
			}
		}
	}
	return pod.Namespace, ref.Name, ref.Kind, ref.Name
}

// wantsCheckpoint reports whether a pod asks to be checkpointed: the
// annotation, and not itself a pod run from a checkpoint or a mirror pod
// (the kubelet's API copy of a static pod: the checkpoint pod's own mirror
// would otherwise be checkpointed in turn).
func wantsCheckpoint(pod *v1.Pod) bool {
	if pod.Annotations[btypes.AnnotationCheckpoint] != "true" {
		return false
	}
	if _, ok := pod.Annotations[btypes.AnnotationCheckpointOf]; ok {
		return false
	}
	if _, ok := pod.Annotations[kubetypes.ConfigMirrorAnnotationKey]; ok {
		return false
	}
	return true
}

// podRunningReady: Running, every container running, Ready condition true.
func podRunningReady(pod *v1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != v1.PodRunning {
		return false
	}
	return podutil.IsPodReadyConditionTrue(pod.Status)
}

// readySinceOf is when the pod's Ready condition last turned true.
func readySinceOf(pod *v1.Pod) time.Time {
	if _, c := podutil.GetPodCondition(&pod.Status, v1.PodReady); c != nil && c.Status == v1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// sharesReadinessPort reports whether the self-hosted pod's readiness probe
// can be answered by the checkpoint pod: both in the host network, each
// probed over HTTP(S) on the same port. Then the self-hosted pod's Ready
// condition (the kubelet's probe) and the kubelet's /pods may be the
// checkpoint's own answer: with SO_REUSEPORT (the apiserver's
// --permit-port-sharing) the kernel hands the probe's connection to either
// process, and a self-hosted apiserver that never serves still turns Ready.
func sharesReadinessPort(checkpointPod, selfHosted *v1.Pod) bool {
	if checkpointPod == nil || selfHosted == nil || !checkpointPod.Spec.HostNetwork || !selfHosted.Spec.HostNetwork {
		return false
	}
	port := func(p *v1.Pod) int {
		if get, n, err := ownprocess.ReadinessHTTPGet(p); get != nil && err == nil {
			return n
		}
		return 0
	}
	a := port(checkpointPod)
	return a > 0 && a == port(selfHosted)
}

// latestReady picks, among a component's self-hosted pods on this node, the
// newest one that is Running and Ready: the one to checkpoint. A pod that
// never became Ready is never checkpointed, so a broken upgrade does not
// replace a checkpoint that works.
func latestReady(pods []*v1.Pod) *v1.Pod {
	var best *v1.Pod
	for _, p := range pods {
		if !podRunningReady(p) {
			continue
		}
		if best == nil || best.CreationTimestamp.Before(&p.CreationTimestamp) ||
			(best.CreationTimestamp.Equal(&p.CreationTimestamp) && best.Name < p.Name) {
			best = p
		}
	}
	return best
}

// objectNames lists the Secrets and ConfigMaps a pod uses, with the
// kubelet's own visitors (pkg/api/v1/pod), minus imagePullSecrets (the
// image is present on the node, it runs) and minus what the volumes that
// CheckpointPod drops use (kube-root-ca.crt of the service account volume).
func objectNames(pod *v1.Pod) (secrets, configMaps []string) {
	p := pod.DeepCopy()
	p.Spec.ImagePullSecrets = nil
	vols := p.Spec.Volumes[:0]
	for _, v := range p.Spec.Volumes {
		if !needsAPIServer(&v) {
			vols = append(vols, v)
		}
	}
	p.Spec.Volumes = vols
	seen := map[string]bool{}
	podutil.VisitPodSecretNames(p, func(name string) bool {
		if !seen[name] {
			seen[name] = true
			secrets = append(secrets, name)
		}
		return true
	})
	seen = map[string]bool{}
	podutil.VisitPodConfigmapNames(p, func(name string) bool {
		if !seen[name] {
			seen[name] = true
			configMaps = append(configMaps, name)
		}
		return true
	})
	sort.Strings(secrets)
	sort.Strings(configMaps)
	return secrets, configMaps
}

// CheckpointObjectName is the name of a checkpointed Secret or ConfigMap
// in bootlet's registry: prefixed by the component, so two components (or
// a user's own object of the same name) never overwrite each other.
func CheckpointObjectName(component, name string) string {
	n := component + "-checkpoint-" + name
	if len(n) <= 253 {
		return n
	}
	h := fnv.New64a()
	h.Write([]byte(n))
	return fmt.Sprintf("%s-%x", n[:200], h.Sum64())
}

// CheckpointPod is the pod bootlet runs from a checkpoint: renamed, relabelled, without a service
// account or owner; what changes and why: docs/design/checkpointer.md, "The checkpoint pod".
func CheckpointPod(c *Checkpoint) *v1.Pod {
	src := c.Pod
	out := &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: c.Name + CheckpointPodSuffix, Namespace: c.Namespace,
			Labels:      map[string]string{btypes.LabelCheckpointOf: c.Name},
			Annotations: map[string]string{},
		},
		Spec: *src.Spec.DeepCopy(),
	}
	for k, v := range src.Annotations {
		if k == btypes.AnnotationCheckpoint || k == btypes.AnnotationOwner || k == btypes.AnnotationManagedBy || strings.HasPrefix(k, "kubernetes.io/config.") ||
			k == "kubectl.kubernetes.io/last-applied-configuration" {
			continue
		}
		out.Annotations[k] = v
	}
	out.Annotations[btypes.AnnotationCheckpointOf] = c.Key()
	out.Annotations[btypes.AnnotationCheckpointOwner] = c.Owner().String()
	out.Annotations[btypes.AnnotationCheckpointSource] = fmt.Sprintf("%s %s %s", c.SourceName, c.SourceUID, c.StoredAt.Format(time.RFC3339))

	spec := &out.Spec
	spec.NodeName = ""
	spec.ImagePullSecrets = nil
	spec.ServiceAccountName = ""
	spec.DeprecatedServiceAccount = ""
	spec.AutomountServiceAccountToken = ptr.To(false)
	// The scheduler's and admission's fields: a static pod is neither
	// scheduled nor admitted.
	spec.SchedulerName = ""
	spec.Priority = nil
	// The node selection, which the kubelet does check when it admits a
	// static pod (AdmissionCheck: the required node affinity, nodeSelector
	// included, against its Node). After a reboot, with no apiserver, that
	// Node is the kubelet's initial one, without the node-role label a
	// DaemonSet selects (no kubelet may set it): the checkpoint would be
	// rejected exactly when it is needed. It runs on this node anyway.
	spec.NodeSelector = nil
	spec.Affinity = nil
	// Readiness gates are conditions a controller sets through the
	// apiserver (the self-hosted apiserver's bootlet.dev/serving, package
	// servinggate). Nobody patches the status of a pod bootlet runs from a
	// checkpoint that way, and bootlet's own runner decides its readiness.
	spec.ReadinessGates = nil

	dropped := map[string]bool{}
	vols := spec.Volumes[:0]
	for _, v := range spec.Volumes {
		if needsAPIServer(&v) {
			dropped[v.Name] = true
			continue
		}
		renameVolumeObjects(&v, c.Name)
		vols = append(vols, v)
	}
	spec.Volumes = vols
	if len(spec.Volumes) == 0 {
		spec.Volumes = nil
	}
	podutil.VisitContainers(spec, podutil.AllContainers, func(ctr *v1.Container, _ podutil.ContainerType) bool {
		ctr.VolumeMounts = slices.DeleteFunc(ctr.VolumeMounts, func(m v1.VolumeMount) bool { return dropped[m.Name] })
		if len(ctr.VolumeMounts) == 0 {
			ctr.VolumeMounts = nil
		}
		ctr.VolumeDevices = slices.DeleteFunc(ctr.VolumeDevices, func(d v1.VolumeDevice) bool { return dropped[d.Name] })
		if len(ctr.VolumeDevices) == 0 {
			ctr.VolumeDevices = nil
		}
		for i := range ctr.EnvFrom {
			if r := ctr.EnvFrom[i].SecretRef; r != nil {
				r.Name = CheckpointObjectName(c.Name, r.Name)
			}
			if r := ctr.EnvFrom[i].ConfigMapRef; r != nil {
				r.Name = CheckpointObjectName(c.Name, r.Name)
			}
		}
		for i := range ctr.Env {
			if vf := ctr.Env[i].ValueFrom; vf != nil {
				if r := vf.SecretKeyRef; r != nil {
					r.Name = CheckpointObjectName(c.Name, r.Name)
				}
				if r := vf.ConfigMapKeyRef; r != nil {
					r.Name = CheckpointObjectName(c.Name, r.Name)
				}
			}
		}
		// A preStop sleep is a rolling update's drain (the apiserver
		// DaemonSet's: its clients leave while it still serves). A
		// checkpoint is withdrawn through bootlet's own drained hand-over
		// instead, so the sleep would only keep it serving, and
		// "self-hosted again" waiting, 15 s longer. Other preStop
		// actions are the workload's and stay.
		if lc := ctr.Lifecycle; lc != nil && lc.PreStop != nil && lc.PreStop.Sleep != nil {
			lc.PreStop = nil
			if lc.PostStart == nil && lc.StopSignal == nil {
				ctr.Lifecycle = nil
			}
		}
		return true
	})
	return out
}

// madeFor reports whether an object of bootlet's registry is the
// checkpointer's for this checkpoint: the component's label and
// annotation, and its owner (an object made before owners were recorded,
// without the owner annotation, counts by the component alone).
func madeFor(meta metav1.ObjectMeta, c *Checkpoint) bool {
	if meta.Labels[btypes.LabelCheckpointOf] != c.Name || meta.Annotations[btypes.AnnotationCheckpointOf] != c.Key() {
		return false
	}
	owner, ok := meta.Annotations[btypes.AnnotationCheckpointOwner]
	return !ok || owner == c.Owner().String()
}

// CheckpointObjects are the checkpoint's Secrets and ConfigMaps as bootlet's
// registry holds them for CheckpointPod: renamed, labelled and annotated.
func CheckpointObjects(c *Checkpoint) ([]*v1.Secret, []*v1.ConfigMap) {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: CheckpointObjectName(c.Name, name), Namespace: c.Namespace,
			Labels:      map[string]string{btypes.LabelCheckpointOf: c.Name},
			Annotations: map[string]string{btypes.AnnotationCheckpointOf: c.Key(), btypes.AnnotationCheckpointOwner: c.Owner().String()}}
	}
	var ss []*v1.Secret
	for _, s := range c.Secrets {
		ss = append(ss, &v1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: meta(s.Name), Type: s.Type, Data: s.Data})
	}
	var cms []*v1.ConfigMap
	for _, m := range c.ConfigMaps {
		cms = append(cms, &v1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta(m.Name), Data: m.Data, BinaryData: m.BinaryData})
	}
	return ss, cms
}

// needsAPIServer: a volume only an apiserver can fill (a projected
// service account token, cluster trust bundle or pod certificate).
func needsAPIServer(v *v1.Volume) bool {
	if v.Projected == nil {
		return false
	}
	for _, s := range v.Projected.Sources {
		if s.ServiceAccountToken != nil || s.ClusterTrustBundle != nil || s.PodCertificate != nil {
			return true
		}
	}
	return false
}

func renameVolumeObjects(v *v1.Volume, component string) {
	switch {
	case v.Secret != nil:
		v.Secret.SecretName = CheckpointObjectName(component, v.Secret.SecretName)
	case v.ConfigMap != nil:
		v.ConfigMap.Name = CheckpointObjectName(component, v.ConfigMap.Name)
	case v.Projected != nil:
		for i := range v.Projected.Sources {
			s := &v.Projected.Sources[i]
			if s.Secret != nil {
				s.Secret.Name = CheckpointObjectName(component, s.Secret.Name)
			}
			if s.ConfigMap != nil {
				s.ConfigMap.Name = CheckpointObjectName(component, s.ConfigMap.Name)
			}
		}
	}
}
