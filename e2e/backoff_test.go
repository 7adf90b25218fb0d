//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// criCalls reads bootlet's CRI call count for method from /metrics.
func criCalls(t testing.TB, b *Bootlet, method string) int {
	t.Helper()
	raw, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	m := regexp.MustCompile(`bootlet_cri_request_duration_seconds_count\{method="` + method + `"\} (\d+)`).FindSubmatch(raw)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func filesUnder(dir string) int {
	n := 0
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// TestImagePullBackoff: a pod whose image does not exist (IfNotPresent) is
// pulled as the kubelet pulls it: at 0, 10 and 30 s, so at most 4 times in
// 60 s (bootlet pulled 122 times before), with status ErrImagePull and then
// ImagePullBackOff, and its pod directory does not grow.
func TestImagePullBackoff(t *testing.T) {
	_, b := startBootlet(t)
	before := criCalls(t, b, "PullImage")
	b.Apply(t, `
apiVersion: v1
kind: Pod
metadata: {name: nopull}
spec:
  restartPolicy: Always
  containers:
  - name: main
    image: 127.0.0.1:9/bootlet-e2e/does-not-exist:1
    imagePullPolicy: IfNotPresent
`)
	uid := podUID(t, b, "nopull")
	podDir := filepath.Join(b.Dir, "pods", uid)
	reasons := map[string]bool{}
	maxFiles, filesAt20 := 0, -1
	start := time.Now()
	for time.Since(start) < 60*time.Second {
		p := b.Pod(t, "default", "nopull")
		if cs := containerStatus(p, "main"); cs != nil && cs.State.Waiting != nil {
			reasons[cs.State.Waiting.Reason] = true
		}
		n := filesUnder(podDir)
		maxFiles = max(maxFiles, n)
		if filesAt20 < 0 && time.Since(start) > 20*time.Second {
			filesAt20 = n
		}
		time.Sleep(time.Second)
	}
	pulls := criCalls(t, b, "PullImage") - before
	files := filesUnder(podDir)
	t.Logf("in 60 s: %d PullImage calls, %d files under the pod directory (max %d, %d at 20 s), waiting reasons seen %v",
		pulls, files, maxFiles, filesAt20, reasons)
	if pulls > 4 || pulls < 2 {
		t.Errorf("%d image pulls in 60 s; the kubelet's backoff makes 3 (at 0, 10, 30 s)", pulls)
	}
	if !reasons["ErrImagePull"] || !reasons["ImagePullBackOff"] {
		t.Errorf("status showed %v; want ErrImagePull and ImagePullBackOff", reasons)
	}
	if files > 5 || files > filesAt20 {
		t.Errorf("the pod directory holds %d files (%d at 20 s); want a bounded handful that does not grow", files, filesAt20)
	}
}
