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
	ds, ctr, err := apiserverDaemonSet(ctx, cs)
	if ds == nil || err != nil {
		return err == nil, "", err
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
	ready, why = rolledOut(ds, "name every etcd member")
	return ready, why, nil
}

// rolledOut reports whether every master's apiserver runs the
// DaemonSet's spec, Ready, and if not, how far its roll to do what is.
func rolledOut(ds *appsv1.DaemonSet, what string) (bool, string) {
	if upgrade.DaemonSetRolledOut(ds) {
		return true, ""
	}
	st := ds.Status
	return false, fmt.Sprintf("the apiservers roll to %s: %d of %d updated, %d Ready", what, st.UpdatedNumberScheduled, st.DesiredNumberScheduled, st.NumberReady)
}

// apiserverDaemonSet is the apiserver DaemonSet and its container; nil
// and no error without one (a control plane that is not self-hosted has
// no etcd endpoints of its to change).
func apiserverDaemonSet(ctx context.Context, cs kubernetes.Interface) (*appsv1.DaemonSet, *v1.Container, error) {
	name := string(upgrade.APIServer)
	ds, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	ctr := container(ds.Spec.Template.Spec.Containers, name)
	if ctr == nil {
		return nil, nil, fmt.Errorf("DaemonSet %s has no container %s", name, name)
	}
	return ds, ctr, nil
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

// narrowForEtcd puts back the --etcd-servers widenForEtcd kept, and
// reports whether every master's apiserver runs that spec, Ready. A step
// with helpers calls it once its member is healthy at its new version:
// only then may the member's agent remove the helpers, which no apiserver
// names any more.
func narrowForEtcd(ctx context.Context, cs kubernetes.Interface) (ready bool, why string, err error) {
	name := string(upgrade.APIServer)
	ds, ctr, err := apiserverDaemonSet(ctx, cs)
	if ds == nil || err != nil {
		return err == nil, "", err
	}
	if annotations, command := narrowAfterEtcd(ds, ctr); annotations != nil {
		if err := patchAPIServer(ctx, cs, annotations, map[string]any{"name": name, "command": command}); err != nil {
			return false, "", fmt.Errorf("naming the etcd member alone again in the apiservers' %s: %w", upgrade.ArgEtcdServers, err)
		}
		klog.InfoS("Upgrade controller: the apiservers name their etcd member alone again", upgrade.ArgEtcdServers, upgrade.EtcdServersOf(command))
		return false, "the apiservers roll to name the etcd member alone (" + upgrade.EtcdServersOf(command) + ")", nil
	}
	ready, why = rolledOut(ds, "name the etcd member alone")
	return ready, why, nil
}

// helpedEtcdServers is the controller's part of an etcd step s with
// helpers (etcd of one or two members; its From while it is put back,
// rollingBack): once the step's helpers are healthy voters the apiservers
// name them too (widenForEtcd), so the member's restart leaves them etcd;
// once the member is healthy at the version it moves to, they name their
// own member alone again (narrowForEtcd), so its agent may remove the
// helpers. The agent waits on each roll (nodeagent.decideHelped), reading
// the DaemonSet. With no step (s nil: helpers left by a step a person
// replaced), the apiservers are narrowed once every member is healthy, so
// the agent releases them.
//
// Where the members share their client address (render's), the step's
// first helper serves the member's own address while it restarts, and no
// apiserver is rolled (upgrade/etcdservers.go says why).
func helpedEtcdServers(ctx context.Context, cs kubernetes.Interface, c upgrade.Cluster, o upgrade.Observed, s *upgrade.Step, rollingBack bool) (why string, err error) {
	if c.EtcdSharesClientAddress {
		return "", nil
	}
	if s == nil {
		for _, m := range c.EtcdMembers {
			if !m.Helper && !m.Healthy {
				return "", nil
			}
		}
		_, why, err = narrowForEtcd(ctx, cs)
		return why, err
	}
	var member *upgrade.EtcdMember
	for i, m := range c.EtcdMembers {
		if !m.Helper && m.Name == s.Node {
			member = &c.EtcdMembers[i]
		}
	}
	want := s.To
	if rollingBack {
		want = s.From
	}
	helpers := c.EtcdHelpers()
	healthy := len(helpers) == c.EtcdHelpersNeeded()
	for _, h := range helpers {
		healthy = healthy && h.Healthy
	}
	switch {
	case member != nil && member.Version == want && member.Healthy:
		_, why, err = narrowForEtcd(ctx, cs)
	case healthy && (member == nil || member.Version != want) && (!rollingBack || member != nil && member.Healthy):
		// Only before the member moves (forward, or back from a member
		// healthy at the version it left for, which its agent restarts
		// only once the apiservers name the helpers; a member that failed
		// goes back at once, named or not): a member at the
		// version it moves to whose readiness flaps after the narrowing
		// is not widened again under an agent removing the helpers.
		_, why, err = widenForEtcd(ctx, cs, o.Pods)
	}
	return why, err
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
