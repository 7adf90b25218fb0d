package runner

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/runner/runnertest"
)

func permOf(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// TestPrepareRootDirTightensModes: --root-dir becomes 0700 and its pods/
// 0750 at start, also when they exist already with looser modes (before,
// MkdirAll left an existing 0755 root as it was).
func TestPrepareRootDirTightensModes(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	for _, existing := range []bool{false, true} {
		root := filepath.Join(t.TempDir(), "bootlet")
		if existing {
			if err := os.MkdirAll(filepath.Join(root, "pods"), 0o777); err != nil {
				t.Fatal(err)
			}
		}
		if err := PrepareRootDir(root); err != nil {
			t.Fatal(err)
		}
		if got := permOf(t, root); got != 0o700 {
			t.Errorf("existing=%v: root mode %o, want 700", existing, got)
		}
		if got := permOf(t, filepath.Join(root, "pods")); got != 0o750 {
			t.Errorf("existing=%v: pods mode %o, want 750", existing, got)
		}
	}
}

// TestVolumeParentsNotWorldReadable: the directories above a volume
// (pods/UID, volumes, the plugin's) are 0750 as the kubelet makes them,
// also when an older bootlet left them 0755; the volume itself keeps the
// mode its users need (an emptyDir 0777).
func TestVolumeParentsNotWorldReadable(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	root := t.TempDir()
	d := PodDirs{Root: filepath.Join(root, "bootlet"), Data: filepath.Join(root, "data")}
	pod := runnertest.Defaulted(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "c", Image: "busybox"}},
		Volumes: []v1.Volume{
			{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Optional: ptrTo(true)}}},
		}}})
	uid := string(pod.UID)
	// An older bootlet's world-readable parents.
	if err := os.MkdirAll(filepath.Join(d.Root, "pods", uid, "volumes", pluginConfigMap), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := SetupVolumes(d, pod, memObjects{}, cri.EnvFacts{}); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{mustPath(d.Pod(uid)), mustPath(d.Objects(uid))} {
		for _, dir := range []string{base, filepath.Join(base, "volumes")} {
			if got := permOf(t, dir); got != 0o750 {
				t.Errorf("%s: mode %o, want 750", dir, got)
			}
		}
	}
	for _, dir := range []string{filepath.Dir(mustPath(d.Volume(uid, pluginEmptyDir, "scratch"))), filepath.Dir(mustPath(d.Volume(uid, pluginConfigMap, "cfg")))} {
		if got := permOf(t, dir); got != 0o750 {
			t.Errorf("%s: mode %o, want 750", dir, got)
		}
	}
	if got := permOf(t, mustPath(d.Volume(uid, pluginEmptyDir, "scratch"))); got != 0o777 {
		t.Errorf("emptyDir mode %o, want the kubelet's 777", got)
	}
}

func ptrTo[T any](v T) *T { return &v }
