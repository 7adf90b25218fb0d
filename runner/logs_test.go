package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	"github.com/bootlet/bootlet/cri"
)

func TestLogSymlinkPath(t *testing.T) {
	id := strings.Repeat("a", 64)
	for _, tc := range []struct {
		pod, ns, c, want string
	}{
		// The kubelet's legacyLogSymlink: POD_NS_CONTAINER-ID.log.
		{"web-node1", "default", "main", "/var/log/containers/web-node1_default_main-" + id + ".log"},
		{"etcd-m1", "kube-system", "etcd", "/var/log/containers/etcd-m1_kube-system_etcd-" + id + ".log"},
	} {
		if got := LogSymlinkPath("/var/log/containers", tc.pod, tc.ns, tc.c, id); got != tc.want {
			t.Errorf("LogSymlinkPath(%s,%s,%s) = %s, want %s", tc.pod, tc.ns, tc.c, got, tc.want)
		}
	}
	// Names past ext4's 255 bytes are cut, keeping the .log suffix.
	long := LogSymlinkPath("/d", strings.Repeat("p", 200), "ns", "c", id)
	if base := filepath.Base(long); len(base) != 255 || !strings.HasSuffix(base, ".log") {
		t.Errorf("long name: %d bytes %q", len(base), base)
	}
}

func TestLogLinksFollowTheContainer(t *testing.T) {
	ctx := context.Background()
	dir, logs := t.TempDir(), t.TempDir()
	fake := critest.NewFakeRuntimeService()
	rt := withLogSymlinks(&cri.Runtime{RuntimeService: fake}, dir)
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web-node1", Namespace: "default", Uid: "u1"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string) (string, string) {
		id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name},
			Image:    &runtimeapi.ImageSpec{Image: "busybox"},
			Labels:   map[string]string{cri.LabelPodName: "web-node1", cri.LabelPodNamespace: "default", cri.LabelPodUID: "u1", cri.LabelContainerName: name},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(logs, name, "0.log")
		_ = os.MkdirAll(filepath.Dir(logPath), 0o755)
		if err := os.WriteFile(logPath, []byte("hi\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fake.Containers[id].LogPath = logPath
		return id, logPath
	}
	a, aLog := create("a")
	b, _ := create("b")
	linkA := LogSymlinkPath(dir, "web-node1", "default", "a", a)
	linkB := LogSymlinkPath(dir, "web-node1", "default", "b", b)
	if _, err := os.Lstat(linkA); !os.IsNotExist(err) {
		t.Fatalf("link before start: %v", err)
	}
	for _, id := range []string{a, b} {
		if err := rt.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if target, err := os.Readlink(linkA); err != nil || target != aLog {
		t.Fatalf("link after start: %q, %v; want -> %s", target, err, aLog)
	}
	if err := rt.RemoveContainer(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(linkA); !os.IsNotExist(err) {
		t.Fatalf("link of a removed container stays: %v", err)
	}
	if _, err := os.Lstat(linkB); err != nil {
		t.Fatalf("link of b went with a: %v", err)
	}
	if err := rt.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(linkB); !os.IsNotExist(err) {
		t.Fatalf("link stays after its sandbox is removed: %v", err)
	}
	// A failed removal keeps the link: the container is still there.
	c, _ := create("c")
	_ = rt.StartContainer(ctx, c)
	fake.InjectError("RemoveContainer", os.ErrPermission)
	if err := rt.RemoveContainer(ctx, c); err == nil {
		t.Fatal("injected error lost")
	}
	if _, err := os.Lstat(LogSymlinkPath(dir, "web-node1", "default", "c", c)); err != nil {
		t.Fatalf("link removed although the container was not: %v", err)
	}
}
