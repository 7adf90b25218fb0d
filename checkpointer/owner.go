package checkpointer

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	btypes "github.com/bootlet/bootlet/types"
)

// The ownership rule book: a pod counts only when the controller that made it, read from the
// apiserver, asks for a checkpoint too (docs/design/checkpointer.md, "Ownership: who counts").

// DefaultNamespaces are the namespaces whose pods may be
// checkpointed unless --checkpoint-namespaces says otherwise.
var DefaultNamespaces = []string{metav1.NamespaceSystem}

// CheckpointOwner is the controller a checkpoint stands for.
type CheckpointOwner struct {
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
}

func (o CheckpointOwner) String() string {
	return fmt.Sprintf("%s %s/%s (uid %s)", o.Kind, o.Namespace, o.Name, o.UID)
}

// ownerVerdict is the rule book's answer.
type ownerVerdict int

const (
	// ownerOK: the rule book holds, the owner is the component.
	ownerOK ownerVerdict = iota
	// ownerRefused: positive evidence that it does not hold (a rule fails,
	// or the apiserver answered NotFound or another UID).
	ownerRefused
	// ownerUnknown: an object could not be read (not NotFound): nothing is
	// decided from it.
	ownerUnknown
)

// ownerReader reads the controllers the rule book checks, and this
// node's Node (the apiserver; a map in tests). Errors are the apiserver's
// (NotFound is evidence of a controller, not of a Node).
type ownerReader interface {
	DaemonSet(ns, name string) (*appsv1.DaemonSet, error)
	ReplicaSet(ns, name string) (*appsv1.ReplicaSet, error)
	Deployment(ns, name string) (*appsv1.Deployment, error)
	ThisNode() (*v1.Node, error)
}

// checkpointableKinds are the controller kinds a checkpoint may stand for.
var checkpointableKinds = []string{"DaemonSet", "Deployment"}

func isAppsRef(ref *metav1.OwnerReference, kind string) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == appsv1.GroupName && ref.Kind == kind
}

// verifyPodOwner applies the rule book to a pod that asks to be
// checkpointed (wantsCheckpoint). why says which rule failed.
func verifyPodOwner(pod *v1.Pod, namespaces []string, r ownerReader) (CheckpointOwner, ownerVerdict, string) {
	if !wantsCheckpoint(pod) {
		return CheckpointOwner{}, ownerRefused, "the pod does not ask for a checkpoint"
	}
	if !slices.Contains(namespaces, pod.Namespace) {
		return CheckpointOwner{}, ownerRefused, fmt.Sprintf("namespace %q is not one the checkpointer serves (%v)", pod.Namespace, namespaces)
	}
	ref := metav1.GetControllerOf(pod)
	switch {
	case ref == nil:
		return CheckpointOwner{}, ownerRefused, "a bare pod (no controller) is never checkpointed"
	case isAppsRef(ref, "DaemonSet"):
		owner := CheckpointOwner{Kind: "DaemonSet", Namespace: pod.Namespace, Name: ref.Name, UID: ref.UID}
		owner, _, v, why := checkOwner(owner, r)
		return owner, v, why
	case isAppsRef(ref, "ReplicaSet"):
		rs, err := r.ReplicaSet(pod.Namespace, ref.Name)
		if v, why := readVerdict("ReplicaSet", pod.Namespace, ref.Name, err); v != ownerOK {
			return CheckpointOwner{}, v, why
		}
		if rs.UID != ref.UID {
			return CheckpointOwner{}, ownerRefused, fmt.Sprintf("the pod names ReplicaSet %s with uid %s, the apiserver's has uid %s", ref.Name, ref.UID, rs.UID)
		}
		dref := metav1.GetControllerOf(rs)
		if dref == nil || !isAppsRef(dref, "Deployment") {
			return CheckpointOwner{}, ownerRefused, fmt.Sprintf("ReplicaSet %s/%s is not controlled by a Deployment", rs.Namespace, rs.Name)
		}
		owner := CheckpointOwner{Kind: "Deployment", Namespace: pod.Namespace, Name: dref.Name, UID: dref.UID}
		owner, _, v, why := checkOwner(owner, r)
		return owner, v, why
	default:
		return CheckpointOwner{}, ownerRefused, fmt.Sprintf("controller %s %s is not a DaemonSet or a Deployment's ReplicaSet", ref.APIVersion, ref.Kind)
	}
}

// checkOwner reads the owner by name: it must exist with the same UID (an
// empty UID, a checkpoint stored before UIDs were recorded, takes the one
// the apiserver has) and its template must ask for a checkpoint. The
// template it read comes back with an ownerOK verdict.
func checkOwner(owner CheckpointOwner, r ownerReader) (CheckpointOwner, *v1.PodTemplateSpec, ownerVerdict, string) {
	var meta metav1.ObjectMeta
	var tmpl *v1.PodTemplateSpec
	var err error
	switch owner.Kind {
	case "DaemonSet":
		var ds *appsv1.DaemonSet
		if ds, err = r.DaemonSet(owner.Namespace, owner.Name); err == nil {
			meta, tmpl = ds.ObjectMeta, &ds.Spec.Template
		}
	case "Deployment":
		var d *appsv1.Deployment
		if d, err = r.Deployment(owner.Namespace, owner.Name); err == nil {
			meta, tmpl = d.ObjectMeta, &d.Spec.Template
		}
	default:
		return owner, nil, ownerRefused, fmt.Sprintf("owner kind %q is not one of %v", owner.Kind, checkpointableKinds)
	}
	if v, why := readVerdict(owner.Kind, owner.Namespace, owner.Name, err); v != ownerOK {
		return owner, nil, v, why
	}
	if owner.UID != "" && meta.UID != owner.UID {
		return owner, nil, ownerRefused, fmt.Sprintf("%s %s/%s has uid %s, not %s: another object of the same name", owner.Kind, owner.Namespace, owner.Name, meta.UID, owner.UID)
	}
	owner.UID = meta.UID
	if tmpl.Annotations[btypes.AnnotationCheckpoint] != "true" {
		return owner, nil, ownerRefused, fmt.Sprintf("the pod template of %s %s/%s does not carry %s: \"true\"", owner.Kind, owner.Namespace, owner.Name, btypes.AnnotationCheckpoint)
	}
	return owner, tmpl, ownerOK, ""
}

func readVerdict(kind, ns, name string, err error) (ownerVerdict, string) {
	switch {
	case err == nil:
		return ownerOK, ""
	case apierrors.IsNotFound(err):
		return ownerRefused, fmt.Sprintf("%s %s/%s does not exist", kind, ns, name)
	default:
		return ownerUnknown, fmt.Sprintf("reading %s %s/%s: %v", kind, ns, name, err)
	}
}

// storedOwnerVerdict is the rule book applied to a stored checkpoint: its
// namespace and kind are checked locally (a record that could never be
// stored today, from an older bootlet, is refused at once); that its owner
// is gone needs the apiserver (r nil: not reachable, unknown).
func storedOwnerVerdict(ck *Checkpoint, namespaces []string, r ownerReader) (CheckpointOwner, ownerVerdict, string) {
	owner := ck.Owner()
	if !slices.Contains(namespaces, ck.Namespace) {
		return owner, ownerRefused, fmt.Sprintf("namespace %q is not one the checkpointer serves (%v)", ck.Namespace, namespaces)
	}
	if !slices.Contains(checkpointableKinds, owner.Kind) {
		if owner.Kind == "" {
			return owner, ownerRefused, "the checkpoint was taken from a bare pod"
		}
		return owner, ownerRefused, fmt.Sprintf("owner kind %q is not one of %v", owner.Kind, checkpointableKinds)
	}
	if owner.Name != ck.Name {
		return owner, ownerRefused, fmt.Sprintf("the checkpoint of %s names owner %s", ck.Key(), owner.Name)
	}
	if r == nil {
		return owner, ownerUnknown, "apiserver not reachable"
	}
	owner, tmpl, v, why := checkOwner(owner, r)
	if v != ownerOK || owner.Kind != "DaemonSet" {
		return owner, v, why
	}
	v, why = daemonSetSelectsThisNode(owner, tmpl, r)
	return owner, v, why
}

// daemonSetSelectsThisNode is the DaemonSet controller's own test of
// whether a node runs the set's pod: its template's nodeSelector and
// required node affinity against the Node's labels and fields
// (component-helpers' nodeaffinity, which the controller and the
// scheduler use). A set that no longer selects this node has taken its pod
// away (a master demoted: the control plane's DaemonSets follow the
// masters' placement label), so its checkpoint goes too: a checkpoint
// stands for a pod the cluster means this node to run. A Node that cannot
// be read decides nothing: the checkpoint stays.
func daemonSetSelectsThisNode(owner CheckpointOwner, tmpl *v1.PodTemplateSpec, r ownerReader) (ownerVerdict, string) {
	node, err := r.ThisNode()
	if err != nil {
		return ownerOK, ""
	}
	match, err := nodeaffinity.GetRequiredNodeAffinity(&v1.Pod{Spec: tmpl.Spec}).Match(node)
	switch {
	case err != nil:
		return ownerUnknown, fmt.Sprintf("DaemonSet %s/%s's node affinity: %v", owner.Namespace, owner.Name, err)
	case !match:
		return ownerRefused, fmt.Sprintf("DaemonSet %s/%s no longer selects node %s (its nodeSelector or required node affinity)", owner.Namespace, owner.Name, node.Name)
	}
	return ownerOK, ""
}
