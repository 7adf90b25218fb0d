//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"sigs.k8s.io/yaml"

	"github.com/bootlet/bootlet/shim"
)

// Helpers of TestLifecycle (lifecycle_master_test.go): the reboot of the
// whole node (containerd, bootlet and a registered kubelet), a second local
// tag of an image, and bootlet's stored checkpoint of a component.

// RebootNode is a power cycle of a node that runs containerd, bootlet and a
// kubelet: the kubelet and bootlet get SIGKILL, containerd is stopped and
// every container process is killed, containerd's /run state is wiped and
// persistent state (containerd's, bootlet's and the kubelet's roots, the
// static pod files) is kept (SimulateReboot). Then the services start in
// their boot order: containerd, bootlet, the kubelet, as their systemd units
// would. It returns the moment the power came back: the start of
// containerd.
func RebootNode(t testing.TB, c *Containerd, b *Bootlet, k *Kubelet) time.Time {
	t.Helper()
	if pid := k.PID(); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	k.Stop() // reaps the killed process and puts the host's sysctls back
	SimulateReboot(t, c, b)
	poweredOn := time.Now()
	c.Restart(t)
	b.Start(t)
	k.Start(t)
	return poweredOn
}

// TagImage adds the name dst to the image src in c's CRI namespace, with
// containerd's own client (ctr), as `ctr images tag` does on a node with no
// registry: the CRI image service sees the new name at once.
func TagImage(t testing.TB, c *Containerd, src, dst string) {
	t.Helper()
	out, err := exec.Command(Bin(t, "ctr"), "--address", c.Socket, "--namespace", "k8s.io", "images", "tag", "--force", src, dst).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images tag %s %s: %v\n%s", src, dst, err, out)
	}
	Eventually(t, 30*time.Second, func() (bool, string) {
		st, err := c.IS.ImageStatus(context.Background(), &runtimeapi.ImageSpec{Image: dst}, false)
		return err == nil && st.GetImage() != nil, fmt.Sprintf("CRI ImageStatus %s after ctr images tag: %v %v", dst, err, st)
	})
}

// StoredCheckpoint reads bootlet's stored checkpoint of a component
// (`bootlet checkpoint show podcheckpoints NS/NAME`), nil when there is none.
func StoredCheckpoint(t testing.TB, b *Bootlet, ns, name string) *shim.Checkpoint {
	t.Helper()
	out, err := b.CLI(t, "checkpoint", "show", "podcheckpoints", ns+"/"+name, "--root-dir", b.Dir)
	if err != nil {
		return nil
	}
	var ck shim.Checkpoint
	if err := yaml.Unmarshal([]byte(out), &ck); err != nil {
		t.Fatalf("bootlet checkpoint show podcheckpoints %s/%s: %v\n%s", ns, name, err, out)
	}
	if ck.Pod == nil {
		t.Fatalf("the stored checkpoint of %s/%s has no pod:\n%s", ns, name, out)
	}
	return &ck
}

// containerImage is the image of the named container of a pod spec.
func containerImage(spec *v1.PodSpec, name string) string {
	for _, c := range spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// selfHostedPods lists this node's kube-system pods of a component (by its
// k8s-app label, which neither the bootstrap pods' nor the checkpoint's
// mirror pods carry).
func selfHostedPods(ctx context.Context, admin *kubernetes.Clientset, node, component string) ([]v1.Pod, error) {
	l, err := admin.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName=" + node, LabelSelector: "k8s-app=" + component})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// readyTransition is when the pod's Ready condition last turned true.
func readyTransition(p *v1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// podsSummary is one line per pod: name, image of its first container,
// status.
func podsSummary(pods []v1.Pod) string {
	var out []string
	for i := range pods {
		p := &pods[i]
		img := ""
		if len(p.Spec.Containers) > 0 {
			img = p.Spec.Containers[0].Image
		}
		del := ""
		if p.DeletionTimestamp != nil {
			del = " (deleting)"
		}
		out = append(out, fmt.Sprintf("%s %s %s%s", p.Name, img, statusSummary(p), del))
	}
	return strings.Join(out, "\n")
}
