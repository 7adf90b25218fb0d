package nodes

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// JoinLine runs `bootlet join print` in the master (its rendered token,
// admin.conf's server, the CA's hash) and returns the printed command's
// words.
func JoinLine(masterPID1 int) ([]string, error) {
	out, err := Inside(masterPID1, "/usr/bin/bootlet", "join", "print", "--asset-dir", "/etc/kubernetes")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 2 && f[0] == "bootlet" && f[1] == "join" {
			return f, nil
		}
	}
	return nil, fmt.Errorf("bootlet join print printed no join command:\n%s", out)
}

// Join runs the printed line in the worker, with where its files go
// (--out /etc/kubernetes, the worker kubelet unit's paths) and its CRI
// socket (bootlet-containerd's, for kubelet-config.yaml), and starts its
// kubelet. The join writes bootstrap-kubelet.conf, kubelet-config.yaml
// (from the cluster's kube-system/kubelet-config) and the kubelet client
// CA: nothing comes from the master's disk.
func Join(m Member, pid1 int, line []string) error {
	args := append([]string{"/usr/bin/bootlet"}, line[1:]...)
	args = append(args, "--out", "/etc/kubernetes", "--cri-socket", "unix:///run/bootlet/containerd.sock", "--discovery-timeout", "2m")
	// A 401 right after cluster-info is first signed was seen once (load
	// 24, the control plane pivoting): the apiserver's bootstrap-token
	// authenticator had not seen the token's Secret yet. A person would run
	// the line again; so does the harness, for up to two minutes.
	var out string
	var err error
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(3 * time.Second) {
		if out, err = Inside(pid1, args...); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		return err
	}
	for _, f := range []string{"bootstrap-kubelet.conf", "kubelet-config.yaml", "kubelet-client-ca.crt"} {
		if !strings.Contains(out, f) {
			return fmt.Errorf("bootlet join did not say it wrote %s:\n%s", f, out)
		}
	}
	if _, err := Inside(pid1, "systemctl", "start", "--no-block", "bootlet-kubelet-worker.service"); err != nil {
		return err
	}
	// The token's only copy on the worker goes once the kubelet holds a
	// certificate of its own that the apiserver accepts (join finish waits
	// for that, and never removes it earlier).
	if out, err := Inside(pid1, "/usr/bin/bootlet", "join", "finish", "--out", "/etc/kubernetes", "--timeout", "4m"); err != nil {
		return fmt.Errorf("bootlet join finish: %w\n%s", err, out)
	}
	return nil
}

// WaitNodeReady waits until the node is Ready and has a podCIDR.
func WaitNodeReady(ctx context.Context, cs kubernetes.Interface, name string, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, string) {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range node.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue && node.Spec.PodCIDR != "",
					fmt.Sprintf("node %s Ready=%s (%s), podCIDR %q", name, c.Status, c.Message, node.Spec.PodCIDR)
			}
		}
		return false, "node " + name + " has no Ready condition"
	})
}

// WaitClusterInfoSigned waits until kube-public/cluster-info carries a
// signature (the controller-manager's bootstrapsigner): what `bootlet
// join`'s discovery verifies.
func WaitClusterInfoSigned(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, string) {
		cm, err := cs.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
		if err != nil {
			return false, "cluster-info: " + err.Error()
		}
		for k := range cm.Data {
			if strings.HasPrefix(k, "jws-kubeconfig-") {
				return true, ""
			}
		}
		return false, "cluster-info has no jws-kubeconfig-* signature yet"
	})
}

func poll(ctx context.Context, timeout time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s: %s", timeout, msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
