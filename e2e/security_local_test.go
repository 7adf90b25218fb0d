//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bootlet/bootlet/podapi"
)

// TestSecurityLocalTrust is the bad-input corpus of what the local API
// trusts (minted credentials, admission: docs/security.md), against one
// daemon with a TCP listener, a read-only socket and Pod Security
// admission at baseline for the non-exempt admin group "provisioners":
//   - minting a certificate over --kubeconfig-max-validity is a 422 naming
//     validity, and mints nothing (no ClientCertificateMinted event);
//   - the read-only socket refuses a create with 403 and serves a get;
//   - a provisioner's privileged pod mounting / is refused with 403 as
//     the apiserver's PodSecurity admission words it, and nothing is
//     stored (API, checkpoint file, CRI);
//
// and the daemon stays ready throughout.
func TestSecurityLocalTrust(t *testing.T) {
	c := StartContainerd(t)
	roSock := filepath.Join(c.Dir, "bootlet-ro.sock")
	b := StartBootlet(t, c, "--listen", "127.0.0.1:0", "--read-only-socket", roSock,
		"--admin-group", "system:masters,provisioners", "--pod-security-level", "baseline",
		"--kubeconfig-max-validity", "2h")
	ctx := context.Background()

	mintEvents := func() []string {
		evs, err := b.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range evs.Items {
			if e.Reason == "ClientCertificateMinted" {
				out = append(out, e.Message)
			}
		}
		return out
	}
	mint := func(validity string, groups ...string) ([]byte, error) {
		req := b.Client.CoreV1().RESTClient().Post().AbsPath("/bootlet/v1/kubeconfig").Param("user", "prov")
		for _, g := range groups {
			req = req.Param("group", g)
		}
		if validity != "" {
			req = req.Param("validity", validity)
		}
		// Do, not DoRaw: DoRaw returns client-go's generic error for the
		// status code; Result.Error decodes the Status the daemon sent.
		res := req.Do(ctx)
		body, err := res.Raw()
		if err != nil {
			return nil, res.Error()
		}
		return body, nil
	}

	t.Run("minting over the validity cap", func(t *testing.T) {
		for _, v := range []string{"3h", "8760h"} {
			_, err := mint(v)
			st, ok := err.(apierrors.APIStatus)
			if !apierrors.IsInvalid(err) || !ok || st.Status().Details == nil || len(st.Status().Details.Causes) == 0 ||
				st.Status().Details.Causes[0].Field != "validity" {
				t.Fatalf("validity=%s: want a 422 naming validity, got %v", v, err)
			}
		}
		if ev := mintEvents(); len(ev) != 0 {
			t.Fatalf("a refused request minted: %v", ev)
		}
	})

	var prov kubernetes.Interface
	t.Run("minting within the cap is audited", func(t *testing.T) {
		out, err := mint("1h", "provisioners")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := clientcmd.RESTConfigFromKubeConfig(out)
		if err != nil {
			t.Fatal(err)
		}
		if prov, err = kubernetes.NewForConfig(cfg); err != nil {
			t.Fatal(err)
		}
		ev := mintEvents()
		if len(ev) != 1 || !strings.Contains(ev[0], "unix uid=0") || !strings.Contains(ev[0], "provisioners") {
			t.Fatalf("want one ClientCertificateMinted event naming uid 0 and the group, got %v", ev)
		}
	})

	t.Run("read-only socket", func(t *testing.T) {
		b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: ro-visible}
spec:
  containers:
  - {name: main, image: docker.io/library/busybox:1.36, command: ["sleep", "3600"]}
`)
		ro, err := podapi.NewClient("unix://" + roSock)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ro.CoreV1().Pods("default").Get(ctx, "ro-visible", metav1.GetOptions{}); err != nil {
			t.Fatalf("get over the read-only socket: %v", err)
		}
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ro-created"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "docker.io/library/busybox:1.36"}}}}
		if _, err := ro.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("create over the read-only socket: want 403, got %v", err)
		}
		if _, err := ro.CoreV1().Pods("default").Get(ctx, "ro-created", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the refused pod exists: %v", err)
		}
		if err := ro.CoreV1().Pods("default").Delete(ctx, "ro-visible", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Fatalf("delete over the read-only socket: want 403, got %v", err)
		}
		if _, err := ro.CoreV1().RESTClient().Post().AbsPath("/bootlet/v1/kubeconfig").DoRaw(ctx); !apierrors.IsForbidden(err) {
			t.Fatalf("minting over the read-only socket: want 403, got %v", err)
		}
	})

	t.Run("pod security for a non-exempt admin", func(t *testing.T) {
		if prov == nil {
			t.Fatal("no provisioner client (minting failed above)")
		}
		tru := true
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "evil"},
			Spec: v1.PodSpec{
				Containers: []v1.Container{{Name: "x", Image: "docker.io/library/busybox:1.36", Command: []string{"sleep", "3600"},
					SecurityContext: &v1.SecurityContext{Privileged: &tru},
					VolumeMounts:    []v1.VolumeMount{{Name: "root", MountPath: "/host"}}}},
				Volumes: []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}}},
			},
		}
		_, err := prov.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("want 403, got %v", err)
		}
		for _, want := range []string{`violates PodSecurity "baseline:latest"`, `privileged (container "x" must not set securityContext.privileged=true)`, `hostPath volumes (volume "root")`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q lacks %q", err, want)
			}
		}
		if _, err := b.Client.CoreV1().Pods("default").Get(ctx, "evil", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the refused pod is in the API: %v", err)
		}
		if _, err := os.Stat(filepath.Join(b.Dir, "checkpoint", "pods", "default", "evil.json")); !os.IsNotExist(err) {
			t.Fatalf("the refused pod was checkpointed: %v", err)
		}
		for _, sb := range c.Sandboxes(t) {
			if sb.GetMetadata().GetName() == "evil-"+b.NodeName {
				t.Fatalf("the refused pod has a sandbox: %v", sb)
			}
		}
		// The exempt group (the main socket acts as system:masters) may.
		pod.Name = "exempt"
		pod.Spec.Containers[0].SecurityContext = nil
		if _, err := b.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Fatalf("the exempt group's dry run: %v", err)
		}
	})

	body, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil || string(body) != "ok" {
		t.Fatalf("the daemon is not ready after the corpus: %v %s", err, body)
	}
}
