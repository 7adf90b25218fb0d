//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/bootlet/bootlet/credmirror"
	"github.com/bootlet/bootlet/manifests"
)

// assertCredentialsOffTheAPI checks the trust model's first line on a
// self-hosted master (docs/security.md): the control plane's credential
// Secrets hold ca.key and sa.key, so no pod references them and the
// master's own kubelet credential (kubeletConf) cannot read them, while the
// pods mount this master's mirror, which holds the Secrets' bytes.
func assertCredentialsOffTheAPI(t *testing.T, admin *kubernetes.Clientset, kubeletConf string) {
	t.Helper()
	ctx := context.Background()
	kubelet := clientFor(t, kubeletConf)
	pods, err := admin.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	referenced := map[string]string{}
	for i := range pods.Items {
		podutil.VisitPodSecretNames(&pods.Items[i], func(n string) bool { referenced[n] = pods.Items[i].Name; return true })
	}
	for _, name := range manifests.SelfHostedSecretNames {
		s, err := admin.CoreV1().Secrets("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Data["ca.key"]) == 0 && len(s.Data["sa.key"]) == 0 && name == manifests.KubeControllerManager {
			t.Errorf("secret %s holds neither ca.key nor sa.key: the check below would prove nothing", name)
		}
		if pod, ok := referenced[name]; ok {
			t.Errorf("pod kube-system/%s references the credential Secret %s", pod, name)
		}
		_, err = kubelet.CoreV1().Secrets("kube-system").Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("the master's kubelet credential reading secret kube-system/%s: %v, want Forbidden", name, err)
		}
		tgt, ok, err := credmirror.TargetOf(s)
		if err != nil || !ok {
			t.Errorf("secret %s has no mirror target: %v", name, err)
			continue
		}
		got, err := credmirror.Read(tgt)
		if err != nil {
			t.Errorf("this master's mirror of %s: %v", name, err)
			continue
		}
		for k, v := range s.Data {
			if !bytes.Equal(got[k], v) {
				t.Errorf("the mirror %s holds another %s than the Secret", tgt.Dir, k)
			}
		}
	}
	if _, err := kubelet.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the master's kubelet credential listing kube-system Secrets: %v, want Forbidden", err)
	}
}

// kubeletConfOf is the kubelet kubeconfig render wrote for the master.
func kubeletConfOf(assets string) string { return filepath.Join(assets, manifests.KubeletKubeconfig) }
