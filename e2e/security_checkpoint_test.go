//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	yamlutil "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientsetscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/manifests"
	btypes "github.com/bootlet/bootlet/types"
)

// The bad-input corpus of the checkpointer: pods that ask for a checkpoint
// without the right to: a checkpoint runs at every apiserver outage, with
// no apiserver to say no (docs/security.md, "What bootlet trusts, and
// why"). The checkpointer runs with its own rendered
// identity and Role (createCheckpointerRBAC), against the real apiserver.

// createCheckpointerRBAC creates render's Role and RoleBinding of the
// checkpointer (self-hosted/bootlet-checkpointer-rbac.yaml) with the admin
// client, as the pivot does with every self-hosted object.
func createCheckpointerRBAC(t *testing.T, admin *kubernetes.Clientset, assets string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(assets, manifests.SelfHostedDir, manifests.CheckpointerRBACFile))
	if err != nil {
		t.Fatal(err)
	}
	dec := serializer.NewCodecFactory(clientsetscheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	reader := yamlutil.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	ctx := context.Background()
	for {
		doc, err := reader.Read()
		if err != nil {
			break
		}
		if strings.TrimSpace(string(doc)) == "" {
			continue
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", manifests.CheckpointerRBACFile, err)
		}
		Eventually(t, time.Minute, func() (bool, string) {
			switch o := obj.(type) {
			case *rbacv1.Role:
				_, err = admin.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.RoleBinding:
				_, err = admin.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRole:
				_, err = admin.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRoleBinding:
				_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			default:
				t.Fatalf("unexpected %T in %s", obj, manifests.CheckpointerRBACFile)
			}
			return err == nil, fmt.Sprintf("create %T: %v", obj, err)
		})
	}
}

// makeNodeSchedulable gives bootlet's Node object room for pods, so the
// scheduler binds a DaemonSet's pod to it (no kubelet reports it here).
func makeNodeSchedulable(t *testing.T, admin *kubernetes.Clientset, node string) {
	t.Helper()
	ctx := context.Background()
	Eventually(t, time.Minute, func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		n.Status.Capacity = v1.ResourceList{v1.ResourcePods: resource.MustParse("110"), v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
		n.Status.Allocatable = n.Status.Capacity
		_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err == nil, fmt.Sprintf("update node status: %v", err)
	})
}

// checkpointedDaemonSet creates a DaemonSet whose template asks for a
// checkpoint (tolerating every taint: the Node has no kubelet), waits for
// its pod on node and reports it Ready; it returns that pod.
func checkpointedDaemonSet(t *testing.T, admin *kubernetes.Clientset, ns, name, node string) *v1.Pod {
	t.Helper()
	return checkpointedDaemonSetOf(t, admin, ns, name, node, v1.PodSpec{HostNetwork: true, TerminationGracePeriodSeconds: ptr.To[int64](2),
		Containers: []v1.Container{{Name: "c", Image: busybox, Command: []string{"sleep", "3600"}}}})
}

// checkpointedDaemonSetOf is checkpointedDaemonSet with the pod spec given.
func checkpointedDaemonSetOf(t *testing.T, admin *kubernetes.Clientset, ns, name, node string, spec v1.PodSpec) *v1.Pod {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": name}
	spec.AutomountServiceAccountToken = ptr.To(false)
	spec.Tolerations = append(spec.Tolerations, v1.Toleration{Operator: v1.TolerationOpExists})
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: v1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{btypes.AnnotationCheckpoint: "true"}},
			Spec:       spec}}}
	Eventually(t, 2*time.Minute, func() (bool, string) {
		_, err := admin.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{})
		return err == nil, fmt.Sprintf("create DaemonSet: %v", err)
	})
	var pod *v1.Pod
	Eventually(t, 2*time.Minute, func() (bool, string) {
		l, err := admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err.Error()
		}
		for i := range l.Items {
			if l.Items[i].Spec.NodeName == node {
				pod = &l.Items[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("no pod of DaemonSet %s/%s bound to %s yet (%d pods)", ns, name, node, len(l.Items))
	})
	reportPodReady(t, admin, ns, pod.Name)
	return pod
}

// hasPodCheckpoint reports whether `bootlet checkpoint ls` output lists a
// pod checkpoint of component ns/name (its rows are KIND NAMESPACE NAME
// ...; the bootstrap pods bootlet keeps are rows of kind pods, not pod
// checkpoints).
func hasPodCheckpoint(ls, ns, name string) bool {
	for _, line := range strings.Split(ls, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "podcheckpoints" && f[1] == ns && f[2] == name {
			return true
		}
	}
	return false
}

// podCheckpointed reports whether any pod checkpoint's row names name, in
// any column, as a substring.
func podCheckpointed(ls, name string) bool {
	for _, line := range strings.Split(ls, "\n") {
		if strings.HasPrefix(line, "podcheckpoints") && strings.Contains(line, name) {
			return true
		}
	}
	return false
}

func storedCheckpoints(t *testing.T, b *Bootlet) string {
	t.Helper()
	out, err := b.CLI(t, "checkpoint", "ls", "--root-dir", b.Dir)
	if err != nil {
		t.Fatalf("bootlet checkpoint ls: %v\n%s", err, out)
	}
	return out
}

// TestSecurityCheckpointOwnership: pods that ask for a checkpoint but whose
// controller does not (a bare pod named like the apiserver, a pod naming a
// DaemonSet with a forged UID) are never checkpointed, each is reported with
// a CheckpointRefused event, and the daemon stays alive. A pod in another
// namespace is never even read (the checkpointer lists only the served
// namespaces, and its Role is in kube-system only): not stored, no event.
// A DaemonSet's pod in kube-system whose template asks is checkpointed: the
// rendered Role is enough for every call the checkpointer makes. (A pod
// naming a real DaemonSet whose template does not ask is covered by the
// unit table TestVerifyPodOwner.)
func TestSecurityCheckpointOwnership(t *testing.T) {
	b, _, admin := startCheckpointerControlPlane(t, time.Hour, 5*time.Second)
	ctx := context.Background()
	makeNodeSchedulable(t, admin, b.NodeName)

	bare := func(ns, name string, refs ...metav1.OwnerReference) {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{btypes.AnnotationCheckpoint: "true"}, OwnerReferences: refs},
			// hostNetwork only in kube-system: elsewhere the apiserver's
			// PodSecurity baseline default refuses it, and default/greeter
			// is the pod a tenant there can create.
			Spec: v1.PodSpec{NodeName: b.NodeName, HostNetwork: ns == metav1.NamespaceSystem, AutomountServiceAccountToken: ptr.To(false),
				Containers: []v1.Container{{Name: "c", Image: busybox, Command: []string{"sleep", "3600"}}}}}
		Eventually(t, 2*time.Minute, func() (bool, string) {
			_, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			return err == nil, fmt.Sprintf("create pod %s/%s: %v", ns, name, err)
		})
		reportPodReady(t, admin, ns, name)
	}
	// 1. A bare pod in kube-system named like the apiserver.
	bare("kube-system", "kube-apiserver")
	// 2. A bare pod in another namespace: outside the served namespaces and
	// the Role, never listed.
	bare("default", "greeter")
	// 3. A pod naming a real annotated DaemonSet with a forged UID (the
	// garbage collector may delete it: either way it is not checkpointed).
	good := checkpointedDaemonSet(t, admin, "kube-system", "ckpt-good", b.NodeName)
	bare("kube-system", "forged", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ckpt-good",
		UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)})

	// The positive control: the good DaemonSet's pod is checkpointed.
	Eventually(t, time.Minute, func() (bool, string) {
		out := storedCheckpoints(t, b)
		return hasPodCheckpoint(out, "kube-system", "ckpt-good"), "no checkpoint of kube-system/ckpt-good (" + good.Name + "):\n" + out
	})
	// The refusals are reported, and nothing else is stored.
	Eventually(t, time.Minute, func() (bool, string) {
		ev := nodeEvents(t, b, "CheckpointRefused")
		for _, want := range []string{"kube-system/kube-apiserver", "kube-system/forged"} {
			if findEvent(ev, "CheckpointRefused", want) == nil {
				return false, "no CheckpointRefused event for " + want + ":" + eventsString(ev)
			}
		}
		return true, ""
	})
	if e := findEvent(nodeEvents(t, b, "CheckpointRefused"), "CheckpointRefused", "default/greeter"); e != nil {
		t.Errorf("the checkpointer read a pod outside its namespaces: %s", e.Message)
	}
	out := storedCheckpoints(t, b)
	for _, bad := range []string{"kube-apiserver", "greeter", "forged"} {
		if podCheckpointed(out, bad) {
			t.Errorf("a checkpoint of %s was stored:\n%s", bad, out)
		}
	}
	if _, err := b.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("the daemon does not answer: %v", err)
	}
}
