package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/upgrade"
)

// annotationEtcdServers keeps, on the apiserver DaemonSet, the
// --etcd-servers it had before etcd's steps widened it, for the
// apiserver's step to put back (upgrade/etcdservers.go says why).
const annotationEtcdServers = "bootlet.dev/upgrade-etcd-servers"

// widenForEtcd has the apiserver DaemonSet name every etcd member after
// its own (upgrade.WidenEtcdServers), and reports whether every master's
// apiserver runs that spec, Ready: only then may a member be replaced
// without its apiserver losing etcd. The DaemonSet rolls through the port
// hand-over, as the apiserver's own step does. Without a DaemonSet (a
// single master's control plane) or the flag there is nothing to widen.
func widenForEtcd(ctx context.Context, cs kubernetes.Interface, pods []v1.Pod) (ready bool, why string, err error) {
	name := string(upgrade.APIServer)
	ds, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, "", nil
	}
	if err != nil {
		return false, "", err
	}
	ctr := container(ds.Spec.Template.Spec.Containers, name)
	if ctr == nil {
		return false, "", fmt.Errorf("DaemonSet %s has no container %s", name, name)
	}
	if upgrade.EtcdServersOf(ctr.Command) == "" {
		return true, "", nil // no flag to widen (not render's apiserver)
	}
	wide, changed := upgrade.WidenEtcdServers(ctr.Command, upgrade.EtcdClientURLs(pods))
	if changed {
		orig := ds.Annotations[annotationEtcdServers]
		if orig == "" {
			orig = upgrade.EtcdServersOf(ctr.Command)
		}
		if err := patchAPIServer(ctx, cs, map[string]any{annotationEtcdServers: orig}, map[string]any{"name": name, "command": wide}); err != nil {
			return false, "", fmt.Errorf("naming every etcd member in the apiservers' %s: %w", upgrade.ArgEtcdServers, err)
		}
		klog.InfoS("Upgrade controller: the apiservers name every etcd member for etcd's steps", upgrade.ArgEtcdServers, upgrade.EtcdServersOf(wide))
		return false, "the apiservers roll to name every etcd member (" + upgrade.EtcdServersOf(wide) + ")", nil
	}
	if !rolledOut(ds) {
		st := ds.Status
		return false, fmt.Sprintf("the apiservers roll to name every etcd member: %d of %d updated, %d Ready", st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberReady), nil
	}
	return true, "", nil
}

// narrowAfterEtcd is the part of the apiserver step's patch that puts back
// the --etcd-servers widenForEtcd kept (nil, nil: nothing to put back).
func narrowAfterEtcd(ds *appsv1.DaemonSet, ctr *v1.Container) (annotations map[string]any, command []string) {
	orig := ds.Annotations[annotationEtcdServers]
	if orig == "" {
		return nil, nil
	}
	cmd, _ := upgrade.SetEtcdServers(ctr.Command, orig)
	return map[string]any{annotationEtcdServers: nil}, cmd
}

// rolledOut: every pod the DaemonSet schedules runs its current spec and
// is Ready, and no surge pod is left.
func rolledOut(ds *appsv1.DaemonSet) bool {
	st := ds.Status
	return st.DesiredNumberScheduled > 0 && st.ObservedGeneration >= ds.Generation && st.UpdatedNumberScheduled == st.DesiredNumberScheduled &&
		st.NumberReady == st.DesiredNumberScheduled && st.CurrentNumberScheduled == st.DesiredNumberScheduled && st.NumberUnavailable == 0
}

// patchAPIServer patches the apiserver DaemonSet's annotations and its
// container's fields (containerPatch).
func patchAPIServer(ctx context.Context, cs kubernetes.Interface, annotations map[string]any, ctr map[string]any) error {
	patch, err := containerPatch(annotations, ctr)
	if err != nil {
		return err
	}
	_, err = cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Patch(ctx, string(upgrade.APIServer), types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "bootlet-upgrade"})
	return err
}
