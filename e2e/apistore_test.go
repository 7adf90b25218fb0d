//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/bootlet/bootlet/podapi"
)

// kubeconfigFor mints a kubeconfig with the given groups over the socket.
func kubeconfigFor(t *testing.T, b *Bootlet, user string, groups ...string) *kubectlEnv {
	t.Helper()
	args := []string{"kubeconfig", "--user", user}
	for _, g := range groups {
		args = append(args, "--group", g)
	}
	out, err := b.CLI(t, args...)
	if err != nil || !strings.Contains(out, "client-certificate-data") {
		t.Fatalf("bootlet kubeconfig %v: %v\n%s", groups, err, out)
	}
	kc := filepath.Join(b.Ctrd.Dir, "kubeconfig-"+user)
	if err := os.WriteFile(kc, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return &kubectlEnv{b: b, kubeconfig: kc, bin: Bin(t, "kubectl")}
}

// TestReadOnlyKubeconfig: a bootlet:readers certificate may get but not
// create, and may not read Secret data; another group gets nothing; the
// admin default may do everything.
func TestReadOnlyKubeconfig(t *testing.T) {
	c := StartContainerd(t)
	b := StartBootlet(t, c, "--listen", "127.0.0.1:0")
	admin := newKubectlEnv(t, b)
	admin.must(t, "", "create", "secret", "generic", "creds", "--from-literal=token=s3cr3t")
	admin.must(t, "", "create", "configmap", "cm", "--from-literal=a=b")
	ro := kubeconfigFor(t, b, "reader", "bootlet:readers")
	if out := ro.must(t, "", "get", "configmaps"); !strings.Contains(out, "cm") {
		t.Fatalf("reader get configmaps:\n%s", out)
	}
	ro.must(t, "", "get", "pods")
	for _, args := range [][]string{
		{"create", "configmap", "x", "--from-literal=a=b"},
		{"get", "secret", "creds", "-o", "yaml"},
		{"delete", "configmap", "cm"},
	} {
		out, err := ro.run(t, "", args...)
		if err == nil || !strings.Contains(strings.ToLower(out), "forbidden") || strings.Contains(out, "s3cr3t") || strings.Contains(out, "czNjcjN0") {
			t.Fatalf("reader kubectl %v: want Forbidden, got %v\n%s", args, err, out)
		}
	}
	other := kubeconfigFor(t, b, "stranger", "some:team")
	if out, err := other.run(t, "", "get", "configmaps"); err == nil || !strings.Contains(strings.ToLower(out), "forbidden") {
		t.Fatalf("other group get: want Forbidden, got %v\n%s", err, out)
	}
	if !strings.Contains(b.Log(), `"Audit" user="reader"`) {
		t.Fatalf("no audit line for the refused write:\n%s", b.Log())
	}
}

// TestChunkSizeOverTenPods: kubectl pages with limit/continue and gets all.
func TestChunkSizeOverTenPods(t *testing.T) {
	c := StartContainerd(t)
	b := StartBootlet(t, c, "--listen", "127.0.0.1:0")
	k := newKubectlEnv(t, b)
	var manifest strings.Builder
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&manifest, `---
apiVersion: v1
kind: Pod
metadata:
  name: chunk-%d
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: docker.io/library/busybox:1.36
    command: ["sleep", "3600"]
`, i)
	}
	k.must(t, manifest.String(), "create", "-f", "-")
	out := k.must(t, "", "get", "pods", "--chunk-size=2", "-o", "name", "-v=6")
	n := strings.Count(out, "pod/chunk-")
	if n != 10 || !strings.Contains(out, "continue=") {
		t.Fatalf("--chunk-size=2: want 10 pods over several pages, got %d:\n%s", n, out)
	}
}

// TestEventsWatchAndFieldSelector: `kubectl get events -w` sees a new
// event, and --field-selector involvedObject.name picks one pod's.
func TestEventsWatchAndFieldSelector(t *testing.T) {
	c := StartContainerd(t)
	b := StartBootlet(t, c, "--listen", "127.0.0.1:0")
	k := newKubectlEnv(t, b)
	watchOut := &lockedBuffer{}
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	w := exec.CommandContext(wctx, k.bin, "--kubeconfig", k.kubeconfig, "get", "events", "-w", "--field-selector", "involvedObject.name=ev-a")
	w.Stdout, w.Stderr = watchOut, watchOut
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { wcancel(); _ = w.Wait() }()
	time.Sleep(time.Second)
	for _, name := range []string{"ev-a", "ev-b"} {
		k.must(t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: docker.io/library/busybox:1.36
    command: ["sleep", "3600"]
`, name), "create", "-f", "-")
	}
	k.must(t, "", "wait", "--for=condition=Ready", "pod/ev-a", "pod/ev-b", "--timeout=90s")
	Eventually(t, 30*time.Second, func() (bool, string) {
		s := watchOut.String()
		return strings.Contains(s, "Started") && strings.Contains(s, "pod/ev-a"), s
	})
	if s := watchOut.String(); strings.Contains(s, "ev-b") {
		t.Fatalf("field-selected watch shows another pod's events:\n%s", s)
	}
	out := k.must(t, "", "get", "events", "--field-selector", "involvedObject.name=ev-b")
	if !strings.Contains(out, "pod/ev-b") || strings.Contains(out, "pod/ev-a") {
		t.Fatalf("field-selected list:\n%s", out)
	}
}

// TestInformerAcrossRestart: a client-go informer keeps running while the
// daemon restarts, with writes before and after, and ends with exactly the
// server's state: no missed delete, no stale object.
func TestInformerAcrossRestart(t *testing.T) {
	c := StartContainerd(t)
	b := StartBootlet(t, c)
	cs, err := podapi.NewClient("unix://" + b.Socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cms := cs.CoreV1().ConfigMaps("default")
	mk := func(name, v string) {
		t.Helper()
		if _, err := cms.Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": v}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a", "b", "c"} {
		mk(n, "1")
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	inf := f.Core().V1().ConfigMaps().Informer()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	if err := cms.Delete(ctx, "c", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b.Stop()
	b.Start(t)
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	bcm, err := cms.Get(ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bcm.Data["v"] = "2"
	if _, err := cms.Update(ctx, bcm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mk("d", "1")
	state := func() (server, cached string) {
		l, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error(), ""
		}
		var s, c []string
		for _, o := range l.Items {
			s = append(s, o.Name+"@"+o.ResourceVersion+"="+o.Data["v"])
		}
		for _, o := range inf.GetStore().List() {
			cm := o.(*v1.ConfigMap)
			c = append(c, cm.Name+"@"+cm.ResourceVersion+"="+cm.Data["v"])
		}
		sort.Strings(s)
		sort.Strings(c)
		return strings.Join(s, " "), strings.Join(c, " ")
	}
	Eventually(t, 60*time.Second, func() (bool, string) {
		s, c := state()
		return s == c, "server: " + s + "\ninformer: " + c
	})
	if s, _ := state(); !strings.Contains(s, "b@") || !strings.Contains(s, "=2") || strings.Contains(s, "a@") || strings.Contains(s, "c@") {
		t.Fatalf("unexpected server state %s", s)
	}
}
