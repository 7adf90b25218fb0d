//go:build e2e

package e2e

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// assertUpgradePlan runs `bootlet upgrade plan` against a self-hosted
// single master at v1.36.3 whose runtime lacks v1.37.2's images: the
// upgrade to v1.37.2 is refused for the images alone (the node is Ready,
// etcd healthy, no skew), every step is listed in the skew policy's order
// with the kubelet last, and a target bootlet has no release of, or the
// version it runs, is refused by name.
func assertUpgradePlan(t *testing.T, admin, node string) {
	t.Helper()
	plan := func(to string) (string, error) {
		out, err := exec.Command(Bin(t, "bootlet"), "upgrade", "plan", "--to", to, "--kubeconfig", admin).CombinedOutput()
		return string(out), err
	}
	out, err := plan("v1.37.2")
	t.Logf("bootlet upgrade plan --to v1.37.2:\n%s", out)
	if err == nil {
		t.Errorf("upgrade plan exited 0 although the node lacks v1.37.2's images")
	}
	for _, want := range []string{
		"Upgrade from v1.36.3 (etcd 3.6.8, CoreDNS v1.14.2) to v1.37.2 (etcd 3.7.0, CoreDNS v1.14.6): refused (1 reason)",
		"ImagesMissing: node " + node + " lacks the target's images",
		"registry.k8s.io/kube-apiserver:v1.37.2",
		"every step keeps the policy",
		"would be refused: see the reasons above",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("upgrade plan's output lacks %q", want)
		}
	}
	order := planSteps(out, node)
	want := []string{
		"etcd 3.6.8->3.7.0",
		"kube-apiserver v1.36.3->v1.37.2",
		"kube-controller-manager v1.36.3->v1.37.2",
		"kube-scheduler v1.36.3->v1.37.2",
		"kubelet v1.36.3->v1.37.2",
	}
	if strings.Join(order, "; ") != strings.Join(want, "; ") {
		t.Errorf("the node's steps are %q, want %q", order, want)
	}
	if out, err := plan("v1.38.0"); err == nil || !strings.Contains(out, `no release "v1.38.0": bootlet has images for v1.36.3, v1.37.2`) {
		t.Errorf("upgrade plan --to v1.38.0: %v\n%s", err, out)
	}
	if out, err := plan("v1.36.3"); err == nil || !strings.Contains(out, "refused (1 reason)\n  AlreadyRuns: the cluster already runs v1.36.3") {
		t.Errorf("upgrade plan --to v1.36.3: %v\n%s", err, out)
	}
}

// planSteps are the steps `bootlet upgrade plan` prints for node, each as
// "COMPONENT FROM->TO", in order.
func planSteps(out, node string) []string {
	var steps []string
	for _, m := range regexp.MustCompile(`(?m)^\s+\d+\s+(\S+)\s+`+regexp.QuoteMeta(node)+`\s+(\S+)\s+(\S+)`).FindAllStringSubmatch(out, -1) {
		steps = append(steps, m[1]+" "+m[2]+"->"+m[3])
	}
	return steps
}
