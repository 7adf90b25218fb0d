package manifests

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	btypes "github.com/bootlet/bootlet/types"
)

// TestSelfHostedToleratesMasterTaints schedules every self-hosted
// workload's pod template, through the scheduler's own toleration check,
// against the taints a master carries when something is wrong with it:
// not Ready, unreachable, and each node-pressure condition the kubelet
// reports. A control plane that cannot place its own pods on a master in
// pressure cannot finish the pivot there, nor come back after a roll.
func TestSelfHostedToleratesMasterTaints(t *testing.T) {
	taints := []v1.Taint{
		{Key: btypes.LabelControlPlane, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeNotReady, Effect: v1.TaintEffectNoExecute},
		{Key: v1.TaintNodeUnreachable, Effect: v1.TaintEffectNoExecute},
		{Key: v1.TaintNodeDiskPressure, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule},
		{Key: v1.TaintNodePIDPressure, Effect: v1.TaintEffectNoSchedule},
	}
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"one node", testConfig()},
		{"three masters", threeMasters().ForMaster(1)},
	} {
		dir := t.TempDir()
		copyTree(t, rendered(t), dir)
		files, err := selfHostedFiles(tc.cfg, dir, dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{KubeAPIServer, KubeControllerManager, KubeScheduler} {
			var spec v1.PodSpec
			switch o := files[name+".yaml"][1].(type) {
			case *appsv1.DaemonSet:
				spec = o.Spec.Template.Spec
			case *appsv1.Deployment:
				spec = o.Spec.Template.Spec
			default:
				t.Fatalf("%s: %s: %T", tc.name, name, o)
			}
			for _, taint := range taints {
				if !corev1helpers.TolerationsTolerateTaint(klog.Background(), spec.Tolerations, &taint, false) {
					t.Errorf("%s: %s does not tolerate %s:%s (tolerations %+v)", tc.name, name, taint.Key, taint.Effect, spec.Tolerations)
				}
			}
		}
	}
}
