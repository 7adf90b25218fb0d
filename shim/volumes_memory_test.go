package shim

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootlet/bootlet/cri"
)

type memObjects struct{}

func (memObjects) GetSecret(ns, name string) (*v1.Secret, error) {
	return &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"token": []byte("s3cr3t")}}, nil
}
func (memObjects) GetConfigMap(ns, name string) (*v1.ConfigMap, error) {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"k": "v"}}, nil
}

func fsTypeOf(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) > 2 && f[1] == path {
			return f[2]
		}
	}
	return ""
}

// TestSecretVolumesOnTmpfs needs root (mount); it is what the kubelet's
// secret plugin does: a tmpfs per secret/projected/downwardAPI volume, the
// fsGroup on every file, unmounted before the pod directory goes.
func TestSecretVolumesOnTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to mount tmpfs")
	}
	dirs := PodDirs{Root: t.TempDir()}
	gid := int64(4321)
	mode := int32(0o644)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: "uid-mem"},
		Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{FSGroup: &gid}, Volumes: []v1.Volume{
			{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds", DefaultMode: &mode}}},
			{Name: "pr", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []v1.VolumeProjection{{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}}}}}}},
			{Name: "cm", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}, DefaultMode: &mode}}},
			{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		}}}
	t.Cleanup(func() { _ = RemovePodDir(dirs, pod, false) })
	paths, err := SetupVolumes(dirs, pod, memObjects{}, cri.EnvFacts{})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"s": "tmpfs", "pr": "tmpfs"} {
		if got := fsTypeOf(t, paths[name]); got != want {
			t.Errorf("volume %s at %s is on %q, want %s", name, paths[name], got, want)
		}
	}
	if got := fsTypeOf(t, paths["cm"]); got == "tmpfs" {
		t.Errorf("configMap volume is a tmpfs mount of its own; the kubelet's is a plain directory")
	}
	// Setting up again (a refresh, or a restarted daemon) reuses the mount.
	if _, err := SetupVolumes(dirs, pod, memObjects{}, cri.EnvFacts{}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile("/proc/self/mounts")
	if n := strings.Count(string(data), " "+paths["s"]+" "); n != 1 {
		t.Errorf("secret volume mounted %d times after a second setup", n)
	}
	// fsGroup: the group owns the files, as SetVolumeOwnership does.
	for _, f := range []string{filepath.Join(paths["s"], "token"), filepath.Join(paths["cm"], "k"), paths["e"]} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if g := fi.Sys().(*syscall.Stat_t).Gid; int64(g) != gid {
			t.Errorf("%s has gid %d, want fsGroup %d", f, g, gid)
		}
	}
	if err := RemovePodDir(dirs, pod, false); err != nil {
		t.Fatal(err)
	}
	if got := fsTypeOf(t, paths["s"]); got != "" {
		t.Errorf("secret tmpfs still mounted after RemovePodDir")
	}
	if _, err := os.Stat(dirs.Pod(string(pod.UID))); !os.IsNotExist(err) {
		t.Errorf("pod dir left: %v", err)
	}
}
