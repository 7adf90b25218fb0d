//go:build e2e

package e2e

// The bad-input corpus of the API's limits: patch bombs, a
// watch flood, a pod past --max-pods, and a pod that takes a Secret value
// into env while the handoff to the kubelet is on. Each gets a clear 4xx,
// nothing of it is stored, and the daemon stays alive and serves others.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// socketHTTP is a plain HTTP client over the daemon's unix socket (no
// client-go: it retries a 429 by itself, and this test wants to see it).
func socketHTTP(b *Bootlet) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", b.Socket)
		},
		MaxConnsPerHost: 0,
	}}
}

func limitsPod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: v1.PodSpec{
		HostNetwork: true, TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers: []v1.Container{{Name: "c", Image: busybox, Command: []string{"sleep", "3600"}}},
	}}
}

// checkAlive fails t unless the daemon still answers /readyz and a list.
func checkAlive(t *testing.T, b *Bootlet) {
	t.Helper()
	ctx := context.Background()
	if body, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil || string(body) != "ok" {
		t.Fatalf("daemon not ready: %v %s\n%s", err, body, b.Log())
	}
	if _, err := b.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("daemon does not list pods: %v\n%s", err, b.Log())
	}
}

func TestSecurityLimitsPatchBombs(t *testing.T) {
	c := StartContainerd(t)
	b := StartBootlet(t, c)
	ctx := context.Background()
	pods := b.Client.CoreV1().Pods("default")
	created, err := pods.Create(ctx, limitsPod("target"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	op := `{"op":"test","path":"/metadata/name","value":"target"}`
	tooMany := "[" + strings.TrimSuffix(strings.Repeat(op+",", 10001), ",") + "]"
	big := strings.Repeat("x", 200<<10)
	bomb := []string{`{"op":"add","path":"/metadata/annotations/a","value":"` + big + `"}`}
	for i := 0; i < 40; i++ { // 40 x 200 KiB = 8 MiB of copies from a 200 KiB body
		bomb = append(bomb, fmt.Sprintf(`{"op":"copy","from":"/metadata/annotations/a","path":"/metadata/annotations/b%d"}`, i))
	}
	for _, tc := range []struct {
		name, body string
		code       int32
		msg        string
	}{
		{"10001 operations", tooMany, 413, "The allowed maximum operations in a JSON patch is 10000, got 10001"},
		{"copy bomb", "[" + strings.Join(bomb, ",") + "]", 422, "exceeding the limit 3145728"},
	} {
		_, err := pods.Patch(ctx, "target", types.JSONPatchType, []byte(tc.body), metav1.PatchOptions{})
		var st apierrors.APIStatus
		// A 422 carries the patch error in its cause, as the apiserver's.
		if !asStatus(err, &st) || st.Status().Code != tc.code || !strings.Contains(fmt.Sprintf("%+v", st.Status()), tc.msg) {
			t.Errorf("%s: %v, want %d %q", tc.name, err, tc.code, tc.msg)
		}
	}
	after, err := pods.Get(ctx, "target", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Annotations) != len(created.Annotations) || after.Generation != created.Generation {
		t.Errorf("a refused patch changed the pod: %d annotations, generation %d", len(after.Annotations), after.Generation)
	}
	checkAlive(t, b)
}

func asStatus(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*st = s
	}
	return ok
}

// TestSecurityLimitsWatchFlood: watches past --max-watches-per-user get a
// 429 Status with Retry-After; the daemon serves lists, writes and
// /readyz meanwhile, and a closed watch frees its slot.
func TestSecurityLimitsWatchFlood(t *testing.T) {
	const maxWatches = 10
	c := StartContainerd(t)
	b := StartBootlet(t, c, fmt.Sprintf("--max-watches-per-user=%d", maxWatches))
	hc := socketHTTP(b)
	watch := func() *http.Response {
		t.Helper()
		resp, err := hc.Get("http://bootlet/api/v1/namespaces/default/pods?watch=true")
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	var open []*http.Response
	t.Cleanup(func() {
		for _, r := range open {
			r.Body.Close()
		}
	})
	for i := 0; i < maxWatches; i++ {
		r := watch()
		if r.StatusCode != http.StatusOK {
			t.Fatalf("watch %d: %d", i, r.StatusCode)
		}
		open = append(open, r)
	}
	refused := 0
	for i := 0; i < 50; i++ { // the flood
		r := watch()
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		var st metav1.Status
		_ = json.Unmarshal(body, &st)
		if r.StatusCode != http.StatusTooManyRequests || st.Kind != "Status" || st.Reason != metav1.StatusReasonTooManyRequests || r.Header.Get("Retry-After") == "" {
			t.Fatalf("watch over the cap: %d Retry-After %q %s", r.StatusCode, r.Header.Get("Retry-After"), body)
		}
		refused++
	}
	checkAlive(t, b)
	if _, err := b.Client.CoreV1().Pods("default").Create(context.Background(), limitsPod("during-flood"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create during the flood: %v", err)
	}
	open[0].Body.Close()
	open = open[1:]
	Eventually(t, 10*time.Second, func() (bool, string) {
		r := watch()
		if r.StatusCode == http.StatusOK {
			open = append(open, r)
			return true, ""
		}
		r.Body.Close()
		return false, fmt.Sprintf("a closed watch kept its slot: %d", r.StatusCode)
	})
	t.Logf("%d watches over the cap refused", refused)
}

// TestSecurityLimitsMaxPods: past --max-pods a create gets 403 naming the
// limit and nothing is stored.
func TestSecurityLimitsMaxPods(t *testing.T) {
	c := StartContainerd(t)
	b := StartBootlet(t, c, "--max-pods=2")
	ctx := context.Background()
	pods := b.Client.CoreV1().Pods("default")
	for _, n := range []string{"one", "two"} {
		if _, err := pods.Create(ctx, limitsPod(n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := pods.Create(ctx, limitsPod("three"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "node has reached its maximum of 2 pods") {
		t.Fatalf("third pod: %v, want 403 naming the maximum", err)
	}
	if _, err := pods.Get(ctx, "three", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused pod is stored: %v", err)
	}
	checkAlive(t, b)
}

// TestSecurityLimitsSecretEnvWithHandoff: with the handoff on, a pod that
// takes a Secret value into env is refused with 422 naming the field and
// saying to mount the Secret as a volume; nothing is stored and no static
// copy written. The same pod with the Secret as a volume is accepted.
func TestSecurityLimitsSecretEnvWithHandoff(t *testing.T) {
	c := StartContainerd(t)
	staticDir, kubeletDir := filepath.Join(c.Dir, "manifests"), filepath.Join(c.Dir, "kubelet")
	for _, d := range []string{staticDir, kubeletDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// No kubelet answers here: the handoff is on, the copies wait for one.
	b := StartBootlet(t, c, "--kubelet-healthz-url=http://127.0.0.1:1/healthz", "--kubelet-static-pod-path="+staticDir, "--kubelet-root-dir="+kubeletDir)
	ctx := context.Background()
	if _, err := b.Client.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		StringData: map[string]string{"token": "s3cret-e2e-value"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ref := &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}, Key: "token"}}
	withEnv := limitsPod("secret-env")
	withEnv.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", Value: "x"}, {Name: "TOKEN", ValueFrom: ref}}
	withFrom := limitsPod("secret-envfrom")
	withFrom.Spec.InitContainers = []v1.Container{{Name: "init", Image: busybox, Command: []string{"true"},
		EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}}}}}}
	for _, tc := range []struct {
		pod   *v1.Pod
		field string
	}{
		{withEnv, "spec.containers[0].env[1].valueFrom.secretKeyRef"},
		{withFrom, "spec.initContainers[0].envFrom[0].secretRef"},
	} {
		_, err := b.Client.CoreV1().Pods("default").Create(ctx, tc.pod, metav1.CreateOptions{})
		st, ok := err.(apierrors.APIStatus)
		if !apierrors.IsInvalid(err) || !ok || st.Status().Details == nil || len(st.Status().Details.Causes) != 1 ||
			st.Status().Details.Causes[0].Field != tc.field || !strings.Contains(err.Error(), "mount the Secret as a volume") {
			t.Errorf("%s: %v, want 422 naming %s", tc.pod.Name, err, tc.field)
		}
		if _, err := b.Client.CoreV1().Pods("default").Get(ctx, tc.pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the refused pod %s is stored: %v", tc.pod.Name, err)
		}
	}
	asVolume := limitsPod("secret-volume")
	asVolume.Spec.Volumes = []v1.Volume{{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds"}}}}
	asVolume.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "creds", MountPath: "/creds", ReadOnly: true}}
	if _, err := b.Client.CoreV1().Pods("default").Create(ctx, asVolume, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the Secret as a volume: %v", err)
	}
	Eventually(t, 30*time.Second, func() (bool, string) {
		_, err := os.Stat(filepath.Join(staticDir, "bootlet_default_secret-volume.yaml"))
		return err == nil, fmt.Sprintf("no static copy of the pod with a Secret volume: %v", err)
	})
	entries, _ := os.ReadDir(staticDir)
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(staticDir, e.Name()))
		if strings.Contains(string(data), "s3cret-e2e-value") {
			t.Errorf("%s holds the Secret's value", e.Name())
		}
		if strings.Contains(e.Name(), "secret-env") {
			t.Errorf("a static copy of a refused pod: %s", e.Name())
		}
	}
	checkAlive(t, b)
}
