//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/manifests"
)

// TestSecurityTenant: what a tenant's pods meet on a self-hosted master
// (render's kubelet configuration and apiserver, after the pivot): a pod
// that requests ephemeral-storage is scheduled (the node reports it); a pod
// that writes past its ephemeral-storage limit, and one that writes past
// its emptyDir's sizeLimit, are evicted by the kubelet; a privileged pod in
// a new namespace is refused by the PodSecurity baseline default, while
// kube-system's control plane runs. One cluster for every subtest.
//
// It binds the control plane's fixed host ports: no t.Parallel.
func TestSecurityTenant(t *testing.T) {
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)
	start := time.Now()
	c, k, assets := StartControlPlaneNode(t)
	b := StartLifecycleBootlet(t, c, k, assets)
	admin := AdminClient(t, assets)
	waitAPIReadyz(t, admin, 5*time.Minute)
	AdoptControlPlane(t, b, c, k, WaitControlPlaneReady(t, b))
	WaitBootstrapWithdrawn(t, b, admin, pivoted)
	waitSelfHosted(t, admin, b, k.NodeName, time.Time{}, true, "", 3*time.Minute)
	if t.Failed() {
		t.FailNow()
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- kubelet log, its eviction lines:\n%s", tail(grepLines(k.Log(), "eviction"), 8000))
		}
	})
	t.Logf("self-hosted master up in %s", time.Since(start).Round(time.Millisecond))
	ctx := context.Background()

	// The namespace a tenant gets: no pod-security labels, so the
	// cluster's defaults apply.
	tenant := "tenant-" + fmt.Sprint(time.Now().Unix()%100000)
	tenantNamespace(t, admin, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}})

	t.Run("ephemeral-storage-request-schedules", func(t *testing.T) {
		n, err := admin.CoreV1().Nodes().Get(ctx, k.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		alloc := n.Status.Allocatable[v1.ResourceEphemeralStorage]
		if alloc.IsZero() {
			t.Fatalf("node %s reports no allocatable ephemeral-storage (capacity %v)", k.NodeName, n.Status.Capacity)
		}
		capacity := n.Status.Capacity[v1.ResourceEphemeralStorage]
		t.Logf("node %s: ephemeral-storage capacity %s, allocatable %s", k.NodeName, capacity.String(), alloc.String())
		createTenantPod(t, admin, tenant, "requester", storagePod("sleep 3600", "1Mi", "8Mi", nil))
		waitPodPhase(t, admin, tenant, "requester", 2*time.Minute, "Running", func(p *v1.Pod) bool { return Running(p) })
	})

	t.Run("ephemeral-storage-limits-evict", func(t *testing.T) {
		// 16 MiB written against limits of 4 MiB; the writes are done
		// within a second, the kubelet's eviction manager looks every
		// 10 s, and an emptyDir's usage is measured every minute or two
		// (volumeStatsAggPeriod, jittered).
		const fill = "dd if=/dev/zero of=%s bs=1M count=16 && sync && exec sleep 3600"
		createTenantPod(t, admin, tenant, "layer-writer", storagePod(fmt.Sprintf(fill, "/fill"), "1Mi", "4Mi", nil))
		scratch := v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("4Mi"))}}}
		createTenantPod(t, admin, tenant, "emptydir-writer", storagePod(fmt.Sprintf(fill, "/scratch/fill"), "", "", &scratch))
		for _, w := range []struct{ name, why string }{
			{"layer-writer", "ephemeral"}, // the pod's total or the container's limit, whichever the kubelet checks first
			{"emptydir-writer", "EmptyDir volume \"scratch\""},
		} {
			p := waitPodPhase(t, admin, tenant, w.name, 4*time.Minute, "evicted", func(p *v1.Pod) bool {
				return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted"
			})
			if !strings.Contains(p.Status.Message, w.why) {
				t.Errorf("%s was evicted for %q, want a message about %s", w.name, p.Status.Message, w.why)
			}
			t.Logf("%s: %s", w.name, p.Status.Message)
		}
		// Under its limit, requester is left alone.
		if p, err := admin.CoreV1().Pods(tenant).Get(ctx, "requester", metav1.GetOptions{}); err != nil || !Running(p) {
			t.Errorf("requester, within its ephemeral-storage limit: %v %s", err, podStatus(p))
		}
	})

	t.Run("pod-security-baseline-default", func(t *testing.T) {
		// The apiserver that answers is the self-hosted one: its Secret
		// carried the admission configuration.
		ds, err := admin.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cmd := ds.Spec.Template.Spec.Containers[0].Command; !slices.Contains(cmd, "--admission-control-config-file=/etc/kubernetes/"+manifests.AdmissionConfigFile) {
			t.Errorf("the self-hosted apiserver has no --admission-control-config-file: %v", cmd)
		}
		fresh := tenant + "-new"
		tenantNamespace(t, admin, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fresh}})
		privileged := storagePod("sleep 3600", "", "", nil)
		privileged.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: ptr.To(true)}
		hostNet := storagePod("sleep 3600", "", "", nil)
		hostNet.HostNetwork = true
		for name, spec := range map[string]v1.PodSpec{"privileged": privileged, "host-network": hostNet} {
			_, err := admin.CoreV1().Pods(fresh).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "baseline:latest"`) {
				t.Errorf("a %s pod in the new namespace %s: %v, want a PodSecurity baseline refusal", name, fresh, err)
			}
		}
		// The same pod where a cluster admin opted the namespace out, as a
		// user of host-level tools does (dry run: nothing privileged runs).
		opted := tenant + "-privileged"
		tenantNamespace(t, admin, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opted,
			Labels: map[string]string{psaapi.EnforceLevelLabel: string(psaapi.LevelPrivileged)}}})
		if _, err := admin.CoreV1().Pods(opted).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "privileged"}, Spec: privileged},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("a privileged pod in %s, labelled %s=privileged: %v", opted, psaapi.EnforceLevelLabel, err)
		}
		// kube-system is exempt: its control plane (hostNetwork, hostPath)
		// still runs, self-hosted, and the apiserver's pods can be made
		// again (a DaemonSet's pod is admitted like any other).
		why, err := selfHostedMissing(ctx, admin, k.NodeName, time.Time{}, true, "")
		if err != nil || len(why) > 0 {
			t.Errorf("kube-system's control plane: %v %v", err, why)
		}
		if _, err := admin.CoreV1().Pods("kube-system").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "privileged"}, Spec: privileged},
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("a privileged pod in kube-system: %v", err)
		}
	})
}

// storagePod is a busybox pod running script, with an ephemeral-storage
// request and limit when given, and vol mounted at /scratch when not nil.
// It runs as baseline lets it (no service account token: nothing here
// needs one).
func storagePod(script, request, limit string, vol *v1.Volume) v1.PodSpec {
	ctr := v1.Container{Name: "main", Image: busybox, Command: []string{"sh", "-c", script}}
	if request != "" {
		ctr.Resources.Requests = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(request)}
	}
	if limit != "" {
		ctr.Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(limit)}
	}
	spec := v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, TerminationGracePeriodSeconds: ptr.To[int64](1),
		AutomountServiceAccountToken: ptr.To(false)}
	if vol != nil {
		spec.Volumes = []v1.Volume{*vol}
		ctr.VolumeMounts = []v1.VolumeMount{{Name: vol.Name, MountPath: "/scratch"}}
	}
	spec.Containers = []v1.Container{ctr}
	return spec
}

func createTenantPod(t *testing.T, admin *kubernetes.Clientset, ns, name string, spec v1.PodSpec) {
	t.Helper()
	if _, err := admin.CoreV1().Pods(ns).Create(context.Background(), &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", ns, name, err)
	}
}

// waitPodPhase waits until the pod ns/name meets cond and returns it.
func waitPodPhase(t *testing.T, admin *kubernetes.Clientset, ns, name string, timeout time.Duration, what string, cond func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	var p *v1.Pod
	Eventually(t, timeout, func() (bool, string) {
		var err error
		if p, err = admin.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		return cond(p), fmt.Sprintf("pod %s/%s not %s: %s", ns, name, what, podStatus(p))
	})
	return p
}

func podStatus(p *v1.Pod) string {
	if p == nil {
		return "no pod"
	}
	return fmt.Sprintf("node %q phase %s reason %q message %q; %s", p.Spec.NodeName, p.Status.Phase, p.Status.Reason, p.Status.Message, statusSummary(p))
}

// tenantNamespace creates ns and waits for its default ServiceAccount,
// which the controller-manager adds a moment later: until then the
// apiserver refuses every pod of the namespace for want of it.
func tenantNamespace(t *testing.T, admin kubernetes.Interface, ns *v1.Namespace) {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, time.Minute, func() (bool, string) {
		_, err := admin.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprintf("namespace %s's default ServiceAccount: %v", ns.Name, err)
	})
}
