//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/bootlet/bootlet/checkpoint"
)

// TestSecurityBadUIDs: a UID names directories, so a malformed one could
// crash the daemon or reach outside ROOT/pods. As a bad-input corpus: each
// malformed metadata.uid gets a 422 naming metadata.uid and
// nothing is stored; then a bad record an older version would have
// accepted is planted in the stopped daemon's checkpoint, and the daemon
// restarts, quarantines it with a Warning event that says why, runs the
// other pod, and touches nothing outside the pods' directories.
func TestSecurityBadUIDs(t *testing.T) {
	RequireRoot(t)
	c := StartContainerd(t)
	b := StartBootlet(t, c)
	ctx := context.Background()
	pods := b.Client.CoreV1().Pods("default")

	for _, uid := range []string{"a_b", "a/b", ".", "..", "../../x", " ", "\t", "..\x00",
		"0B3E2F4E-1111-2222-3333-444455556666", "0b3e2f4e111122223333444455556666"} {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bad", UID: types.UID(uid)},
			Spec: v1.PodSpec{HostNetwork: true, Containers: []v1.Container{{Name: "main", Image: "docker.io/library/busybox:1.36", Command: []string{"sleep", "3600"}}}}}
		_, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.uid") {
			t.Errorf("create with UID %q: %v, want a 422 naming metadata.uid", uid, err)
		}
		if _, err := pods.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("UID %q: the refused pod is stored: %v", uid, err)
		}
	}

	b.Apply(t, `apiVersion: v1
kind: Pod
metadata: {name: good, namespace: default}
spec:
  hostNetwork: true
  containers:
  - {name: main, image: docker.io/library/busybox:1.36, command: ["sleep", "3600"]}
`)
	b.WaitPod(t, "default", "good", 60*time.Second, "running", Running)

	// Sentinels in bootlet's root and beside its pods directory.
	sentinels := []string{filepath.Join(b.Dir, "sentinel"), filepath.Join(b.Dir, "pods", "sentinel"), filepath.Join(filepath.Dir(b.Dir), "sentinel")}
	for _, s := range sentinels {
		if err := os.WriteFile(s, []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// An older version accepted UID ".." (its pod directory is bootlet's
	// root) and "a_b" (its cgroup name panicked the daemon): plant both.
	b.Stop()
	store, err := checkpoint.Open(b.Dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, uid := range map[string]string{"dotdot": "..", "underscore": "a_b"} {
		data, _ := json.Marshal(&v1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(uid)},
			Spec: v1.PodSpec{HostNetwork: true, RestartPolicy: v1.RestartPolicyAlways,
				Containers: []v1.Container{{Name: "main", Image: "docker.io/library/busybox:1.36", Command: []string{"sleep", "3600"}}}}})
		if _, err := store.Put(checkpoint.KindPod, "default", name, data); err != nil {
			t.Fatal(err)
		}
	}

	b.Start(t)
	b.WaitPod(t, "default", "good", 60*time.Second, "running", Running)
	for _, name := range []string{"dotdot", "underscore"} {
		if _, err := pods.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the planted pod %s is served: %v", name, err)
		}
	}
	Eventually(t, 30*time.Second, func() (bool, string) {
		evs, err := b.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, e := range evs.Items {
			if e.Reason == "CheckpointQuarantined" && e.Type == v1.EventTypeWarning && strings.Contains(e.Message, "metadata.uid") {
				n++
			}
		}
		return n == 2, "no CheckpointQuarantined events naming metadata.uid for both planted pods"
	})
	entries, err := os.ReadDir(filepath.Join(b.Dir, "quarantine"))
	if err != nil || len(entries) < 2 {
		t.Errorf("quarantine holds %d files (%v), want the 2 planted records", len(entries), err)
	}
	for _, s := range sentinels {
		if _, err := os.Stat(s); err != nil {
			t.Errorf("sentinel %s is gone: %v", s, err)
		}
	}
	if fi, err := os.Stat(b.Dir); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o700 {
		t.Errorf("root dir mode %v, want 0700", fi.Mode().Perm())
	}
	if _, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/healthz").DoRaw(ctx); err != nil {
		t.Errorf("daemon not healthy after the restart: %v\n%s", err, b.Log())
	}
}
