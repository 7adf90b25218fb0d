//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestImagePullPolicyNever: a missing image under imagePullPolicy Never
// leaves the container waiting with the kubelet's ErrImageNeverPull reason
// and message; nothing is pulled and no container is created.
func TestImagePullPolicyNever(t *testing.T) {
	t.Parallel()
	c, b := startBootlet(t)
	const image = "docker.io/library/does-not-exist:0.0.1"
	b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: neverpull}
spec:
  containers:
  - name: main
    image: `+image+`
    imagePullPolicy: Never
`)
	p := b.WaitPod(t, "default", "neverpull", 30*time.Second, "waiting ErrImageNeverPull", func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "ErrImageNeverPull"
	})
	w := p.Status.ContainerStatuses[0].State.Waiting
	if want := `Container image "` + image + `" is not present with pull policy of Never`; w.Message != want {
		t.Errorf("waiting message %q, want the kubelet's %q", w.Message, want)
	}
	if p.Status.Phase != v1.PodPending || Ready(p) {
		t.Errorf("phase %s ready=%v, want Pending and not ready", p.Status.Phase, Ready(p))
	}
	if ev := podEvents(t, b, "neverpull"); findEvent(ev, "ErrImageNeverPull", "is not present with pull policy of Never") == nil {
		t.Errorf("no ErrImageNeverPull event:%s", eventsString(ev))
	}
	if ctrs := criContainersOf(t, c, string(p.UID)); len(ctrs) != 0 {
		t.Errorf("%d containers created for a never-pulled image", len(ctrs))
	}
	if out, _ := b.CLI(t, "get", "pods"); !strings.Contains(out, "ErrImageNeverPull") {
		t.Errorf("`bootlet get pods` does not show ErrImageNeverPull:\n%s", out)
	}
}

// TestApplyRejectsInvalid: manifests the apiserver (or bootlet, for what a
// node cannot serve) would reject fail `bootlet apply` with a message naming
// the field, and create nothing.
func TestApplyRejectsInvalid(t *testing.T) {
	t.Parallel()
	c, b := startBootlet(t)
	for _, tc := range []struct {
		name, manifest string
		want           []string
	}{
		{"noimage", `
apiVersion: v1
kind: Pod
metadata: {name: noimage}
spec:
  containers:
  - name: main
`, []string{`Pod "noimage" is invalid`, "spec.containers[0].image: Required value"}},
		{"pvc", `
apiVersion: v1
kind: Pod
metadata: {name: pvc}
spec:
  containers:
  - name: main
    image: ` + busybox + `
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data}
`, []string{`Pod "pvc" is invalid`, "spec.volumes[0]: Forbidden"}},
		{"badname", `
apiVersion: v1
kind: Pod
metadata: {name: Bad_Name}
spec:
  containers:
  - name: main
    image: ` + busybox + `
`, []string{"metadata.name: Invalid value"}},
	} {
		out := applyFails(t, b, tc.manifest)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: apply output lacks %q:\n%s", tc.name, w, out)
			}
		}
		if _, err := b.Client.CoreV1().Pods("default").Get(context.Background(), tc.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: rejected pod exists in the API (%v)", tc.name, err)
		}
	}
	pods, err := b.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("pods after rejected applies: %v (%v)", pods, err)
	}
	time.Sleep(time.Second)
	if n, m := len(c.Sandboxes(t)), len(c.Containers(t)); n != 0 || m != 0 {
		t.Errorf("runtime has %d sandboxes and %d containers after rejected applies", n, m)
	}
}

// TestImportPinsImages: `bootlet images import` pins every image its
// archives name, in containerd's CRI (Image.pinned), so that the kubelet's
// image GC, which skips pinned images, never deletes an image a node with
// no registry cannot pull again. An image already there, but unpinned, is
// pinned by the next import.
func TestImportPinsImages(t *testing.T) {
	t.Parallel()
	c := StartContainerd(t) // imports _output/images/*.tar with bootlet images import
	ctx := context.Background()
	pinned := func(ref string) bool {
		t.Helper()
		st, err := c.IS.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
		if err != nil || st.Image == nil {
			t.Fatalf("image status of %s: %v %v", ref, err, st)
		}
		return st.Image.Pinned
	}
	imgs, err := c.IS.ListImages(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) < 3 {
		t.Fatalf("%d images after the import, want pause, busybox and the test server at least", len(imgs))
	}
	for _, img := range imgs {
		if !img.Pinned {
			t.Errorf("%v (%s) is not pinned after the import", img.RepoTags, img.Id)
		}
	}

	// Unpinned by hand (containerd's own client), then imported again: the
	// archive is already there (nothing is written), and the pin is back.
	run(t, Bin(t, "ctr"), "--address", c.Socket, "--namespace", "k8s.io", "images", "label", busybox, "io.cri-containerd.pinned=")
	Eventually(t, 10*time.Second, func() (bool, string) { return !pinned(busybox), "busybox still pinned after ctr removed the label" })
	run(t, Bin(t, "bootlet"), "images", "import", "--address", c.Socket, filepath.Join(Repo, "_output", "images", "busybox.tar"))
	Eventually(t, 10*time.Second, func() (bool, string) { return pinned(busybox), "busybox not pinned again by the second import" })
}
