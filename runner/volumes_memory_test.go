package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubernetes/pkg/volume"
	"k8s.io/kubernetes/pkg/volume/emptydir"
	volumetest "k8s.io/kubernetes/pkg/volume/testing"
	"k8s.io/mount-utils"
	"k8s.io/utils/clock"

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
	if _, err := os.Stat(mustPath(dirs.Pod(string(pod.UID)))); !os.IsNotExist(err) {
		t.Errorf("pod dir left: %v", err)
	}
}

// realMounterHost is the kubelet's fake volume host with the host's real
// mounter and a node allocatable, so a real kubelet volume plugin runs on
// the real mounts.
type realMounterHost struct {
	volume.VolumeHost
	allocatable v1.ResourceList
}

func (h realMounterHost) GetMounter() mount.Interface                  { return hostMounter }
func (h realMounterHost) GetNodeAllocatable() (v1.ResourceList, error) { return h.allocatable, nil }

// TestKubeletEmptyDirSetUpTakesBootletsDirs needs root (mount). It runs the
// kubelet's own emptyDir plugin (pkg/volume/emptydir), with the data root as
// the kubelet's root dir, on the emptyDirs bootlet made, as the kubelet's
// volume manager does for an adopted pod: same paths, SetUp succeeds, the
// content stays, and the Memory one keeps bootlet's tmpfs (no second one
// stacked on it, which would hide the content from a restarted container).
func TestKubeletEmptyDirSetUpTakesBootletsDirs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to mount tmpfs")
	}
	kubeletRoot := t.TempDir()
	dirs := PodDirs{Root: t.TempDir(), Data: kubeletRoot}
	size := resource.MustParse("8Mi")
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", UID: "uid-emptydir"},
		Spec: v1.PodSpec{Volumes: []v1.Volume{
			{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &size}}},
		}}}
	t.Cleanup(func() { _ = RemovePodDir(dirs, pod, false) })
	allocatable := v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}
	paths, err := SetupVolumes(dirs, pod, memObjects{}, cri.EnvFacts{NodeAllocatable: allocatable})
	if err != nil {
		t.Fatal(err)
	}
	if got := fsTypeOf(t, paths["mem"]); got != "tmpfs" {
		t.Fatalf("memory emptyDir on %q, want tmpfs", got)
	}
	if opts := mountOptionsOf(t, paths["mem"]); !strings.Contains(opts, "size=8192k") {
		t.Errorf("memory emptyDir mount options %q, want size=8192k (its sizeLimit)", opts)
	}
	for _, name := range []string{"disk", "mem"} {
		if err := os.WriteFile(filepath.Join(paths[name], "marker"), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	plugins := emptydir.ProbeVolumePlugins()
	fake := volumetest.NewFakeKubeletVolumeHost(t, kubeletRoot, nil, nil)
	if err := plugins[0].Init(realMounterHost{VolumeHost: fake, allocatable: allocatable}); err != nil {
		t.Fatal(err)
	}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		m, err := plugins[0].NewMounter(volume.NewSpecFromVolume(vol), pod)
		if err != nil {
			t.Fatal(err)
		}
		if m.GetPath() != paths[vol.Name] {
			t.Errorf("%s: the kubelet's path %s, bootlet's %s", vol.Name, m.GetPath(), paths[vol.Name])
		}
		if err := m.SetUp(volume.MounterArgs{}); err != nil {
			t.Fatalf("%s: the kubelet's SetUp on bootlet's directory: %v", vol.Name, err)
		}
		if b, err := os.ReadFile(filepath.Join(paths[vol.Name], "marker")); err != nil || string(b) != vol.Name {
			t.Errorf("%s: content after the kubelet's SetUp: %q %v", vol.Name, b, err)
		}
	}
	data, _ := os.ReadFile("/proc/self/mounts")
	if n := strings.Count(string(data), " "+paths["mem"]+" "); n != 1 {
		t.Errorf("memory emptyDir mounted %d times after the kubelet's SetUp, want bootlet's one", n)
	}
	// A second bootlet setup (a refresh, a restarted daemon) stacks none
	// either, and the fsGroup-less directory stays 0777 (tmpfs root 1777).
	if _, err := SetupVolumes(dirs, pod, memObjects{}, cri.EnvFacts{NodeAllocatable: allocatable}); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile("/proc/self/mounts")
	if n := strings.Count(string(data), " "+paths["mem"]+" "); n != 1 {
		t.Errorf("memory emptyDir mounted %d times after a second setup", n)
	}
	if err := RemovePodDir(dirs, pod, false); err != nil {
		t.Fatal(err)
	}
	if got := fsTypeOf(t, paths["mem"]); got != "" {
		t.Errorf("memory emptyDir still mounted after RemovePodDir")
	}
	if _, err := os.Stat(mustPath(dirs.Pod(string(pod.UID)))); !os.IsNotExist(err) {
		t.Errorf("pod dir left: %v", err)
	}
}

func mountOptionsOf(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[1] == path {
			return f[3]
		}
	}
	return ""
}

func TestEmptyDirMemorySize(t *testing.T) {
	mi := func(n int64) *resource.Quantity { return resource.NewQuantity(n<<20, resource.BinarySI) }
	alloc := v1.ResourceList{v1.ResourceMemory: *mi(1024)}
	ctr := func(limit *resource.Quantity) v1.Container {
		c := v1.Container{Name: "c"}
		if limit != nil {
			c.Resources.Limits = v1.ResourceList{v1.ResourceMemory: *limit}
		}
		return c
	}
	for _, tc := range []struct {
		name       string
		containers []v1.Container
		sizeLimit  *resource.Quantity
		alloc      v1.ResourceList
		want       int64
	}{
		{"best effort: node allocatable", []v1.Container{ctr(nil)}, nil, alloc, 1024 << 20},
		{"every container has a limit: their sum", []v1.Container{ctr(mi(100)), ctr(mi(50))}, nil, alloc, 150 << 20},
		{"one container without a limit: allocatable", []v1.Container{ctr(mi(100)), ctr(nil)}, nil, alloc, 1024 << 20},
		{"sizeLimit below the pod limit", []v1.Container{ctr(mi(100))}, mi(16), alloc, 16 << 20},
		{"sizeLimit above the pod limit: the pod limit", []v1.Container{ctr(mi(100))}, mi(512), alloc, 100 << 20},
		{"sizeLimit above allocatable: allocatable", []v1.Container{ctr(nil)}, mi(4096), alloc, 1024 << 20},
		{"no allocatable known: sizeLimit", []v1.Container{ctr(nil)}, mi(16), nil, 16 << 20},
		{"nothing known: no size option", []v1.Container{ctr(nil)}, nil, nil, 0},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{Containers: tc.containers}}
		src := &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: tc.sizeLimit}
		if got := emptyDirMemorySize(pod, src, tc.alloc); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestPrepareDataRootShared needs root (mount): with the data root in the
// kubelet's root dir, the manager makes it a shared mount before any pod
// volume is set up, so the kubelet's own DoMakeRShared at its start finds
// it shared and does not bind-mount it on itself over bootlet's mounts. A
// data root of bootlet's own is left alone.
func TestPrepareDataRootShared(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to mount")
	}
	base := t.TempDir()
	kubeletRoot := filepath.Join(base, "kubelet")
	t.Cleanup(func() { _ = syscall.Unmount(kubeletRoot, syscall.MNT_DETACH) })
	m := newManager(context.Background(), Config{RootDir: filepath.Join(base, "bootlet"), Handoff: stubHandoff{}, KubeletRootDir: kubeletRoot}, clock.RealClock{})
	m.prepareDataRoot()
	if !onSharedMount(t, kubeletRoot) {
		t.Fatalf("%s is not on a shared mount after prepareDataRoot", kubeletRoot)
	}
	// A second start finds it shared and stacks nothing.
	before, _ := os.ReadFile("/proc/self/mounts")
	m.prepareDataRoot()
	after, _ := os.ReadFile("/proc/self/mounts")
	if n, m := strings.Count(string(before), " "+kubeletRoot+" "), strings.Count(string(after), " "+kubeletRoot+" "); n != m {
		t.Errorf("%s mounted %d times after a second prepareDataRoot, %d before", kubeletRoot, m, n)
	}

	own := filepath.Join(base, "own")
	m = newManager(context.Background(), Config{RootDir: filepath.Join(base, "bootlet"), PodRootDir: own, Handoff: stubHandoff{}, KubeletRootDir: kubeletRoot}, clock.RealClock{})
	m.prepareDataRoot()
	if isMountPoint(t, own) {
		_ = syscall.Unmount(own, syscall.MNT_DETACH)
		t.Errorf("a data root that is not the kubelet's was bind-mounted")
	}
}

// onSharedMount reports whether the mount that holds dir (the longest
// mount point prefix in /proc/self/mountinfo) has shared propagation
// (optional field shared:N), as the kubelet's isShared decides.
func onSharedMount(t *testing.T, dir string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	best, shared := "", false
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) < 7 {
			continue
		}
		mp := f[4]
		if mp != dir && mp != "/" && !strings.HasPrefix(dir, mp+"/") {
			continue
		}
		if len(mp) < len(best) {
			continue
		}
		best, shared = mp, false
		for _, opt := range f[6:] {
			if opt == "-" {
				break
			}
			if strings.HasPrefix(opt, "shared:") {
				shared = true
			}
		}
	}
	return shared
}

func isMountPoint(t *testing.T, dir string) bool {
	t.Helper()
	data, _ := os.ReadFile("/proc/self/mounts")
	return strings.Contains(string(data), " "+dir+" ")
}
