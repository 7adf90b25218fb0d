package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critesting "k8s.io/cri-api/pkg/apis/testing"
	utilstrings "k8s.io/utils/strings"

	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/runner/runnertest"
	btypes "github.com/bootlet/bootlet/types"
)

// TestPodDirsLayout: the paths are the kubelet's (kubelet_getters.go
// getPodDir/getPodVolumeDir/getPodContainerDir, kubelet_pods.go
// getEtcHostsPath) under the data root, and bootlet's materialised volumes
// are under its own root in the same layout.
func TestPodDirsLayout(t *testing.T) {
	d := PodDirs{Root: "/var/lib/bootlet", Data: "/var/lib/kubelet"}
	legacy := PodDirs{Root: "/var/lib/bootlet"}
	for _, tc := range []struct{ got, want string }{
		{mustPath(d.Pod("U")), "/var/lib/kubelet/pods/U"},
		{mustPath(d.EtcHosts("U")), "/var/lib/kubelet/pods/U/etc-hosts"},
		{mustPath(d.Container("U", "c")), "/var/lib/kubelet/pods/U/containers/c"},
		{mustPath(d.Volume("U", pluginEmptyDir, "e")), "/var/lib/kubelet/pods/U/volumes/kubernetes.io~empty-dir/e"},
		{mustPath(d.Objects("U")), "/var/lib/bootlet/pods/U"},
		{mustPath(d.Volume("U", pluginSecret, "s")), "/var/lib/bootlet/pods/U/volumes/kubernetes.io~secret/s"},
		{mustPath(d.Volume("U", pluginConfigMap, "c")), "/var/lib/bootlet/pods/U/volumes/kubernetes.io~configmap/c"},
		{mustPath(d.Volume("U", pluginProjected, "p")), "/var/lib/bootlet/pods/U/volumes/kubernetes.io~projected/p"},
		{mustPath(d.Volume("U", pluginDownwardAPI, "d")), "/var/lib/bootlet/pods/U/volumes/kubernetes.io~downward-api/d"},
		// No data root: everything under --root-dir, the layout before it.
		{mustPath(legacy.Pod("U")), "/var/lib/bootlet/pods/U"},
		{mustPath(legacy.Volume("U", pluginEmptyDir, "e")), "/var/lib/bootlet/pods/U/volumes/kubernetes.io~empty-dir/e"},
		{mustPath(legacy.EtcHosts("U")), "/var/lib/bootlet/pods/U/etc-hosts"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
	// The plugin directory names are the kubelet's escaped plugin names.
	for dir, plugin := range map[string]string{pluginEmptyDir: "kubernetes.io/empty-dir", pluginSecret: "kubernetes.io/secret",
		pluginConfigMap: "kubernetes.io/configmap", pluginProjected: "kubernetes.io/projected", pluginDownwardAPI: "kubernetes.io/downward-api"} {
		if got := utilstrings.EscapeQualifiedName(plugin); got != dir {
			t.Errorf("plugin %s: directory %s, want %s", plugin, dir, got)
		}
	}
}

func TestPodDataRoot(t *testing.T) {
	for _, tc := range []struct {
		name, flag, handoffRootDir string
		want                       string
	}{
		{"handoff on: the kubelet's root dir", "", "/var/lib/kubelet", "/var/lib/kubelet"},
		{"handoff off: bootlet's root dir", "", "", "/var/lib/bootlet"},
		{"flag wins, handoff on", "/srv/pods", "/var/lib/kubelet", "/srv/pods"},
		{"flag wins, handoff off", "/srv/pods", "", "/srv/pods"},
	} {
		if got := PodDataRoot(tc.flag, "/var/lib/bootlet", tc.handoffRootDir); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestCheckPodDirs(t *testing.T) {
	on, off := "/var/lib/kubelet", ""
	if err := CheckPodDirs("/var/lib/kubelet/", on); err == nil || !strings.Contains(err.Error(), "--root-dir") {
		t.Errorf("--root-dir = the kubelet's root dir with the handoff on: %v, want an error", err)
	}
	for _, root := range []string{"/var/lib/bootlet", "/var/lib/kubelet/bootlet"} {
		if err := CheckPodDirs(root, on); err != nil {
			t.Errorf("--root-dir %s: %v", root, err)
		}
	}
	if err := CheckPodDirs("/var/lib/kubelet", off); err != nil {
		t.Errorf("handoff off: %v", err)
	}
}

// stubHandoff is a handoff that is on and never takes a pod.
type stubHandoff struct{}

func (stubHandoff) Step(*v1.Pod, bool, bool, map[string]string) bool { return false }
func (stubHandoff) Owner(types.UID) (btypes.Owner, bool)             { return "", false }
func (stubHandoff) Hold() func()                                     { return func() {} }

func TestChoosePodDataRoot(t *testing.T) {
	cands := []string{"/k", "/b"}
	for _, tc := range []struct {
		name  string
		holds map[string]bool
		want  string
	}{
		{"new pod: the configured root", nil, "/k"},
		{"data where configured", map[string]bool{"/k": true}, "/k"},
		{"pod of the old layout keeps its dirs", map[string]bool{"/b": true}, "/b"},
		{"data in both: the configured root", map[string]bool{"/k": true, "/b": true}, "/k"},
	} {
		if got := choosePodDataRoot("/k", cands, tc.holds); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestDataRootCandidates(t *testing.T) {
	for _, tc := range []struct {
		configured, root, kubelet string
		want                      []string
	}{
		{"/k", "/b", "/k", []string{"/k", "/b"}},
		{"/b", "/b", "/k", []string{"/b", "/k"}},
		{"/b", "/b/", "", []string{"/b"}},
		{"/p", "/b", "/k", []string{"/p", "/b", "/k"}},
	} {
		if got := dataRootCandidates(tc.configured, tc.root, tc.kubelet); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("dataRootCandidates(%s, %s, %s) = %v, want %v", tc.configured, tc.root, tc.kubelet, got, tc.want)
		}
	}
}

func TestKeepDataDir(t *testing.T) {
	for _, tc := range []struct {
		name          string
		owner         btypes.Owner
		dataRoot      string
		kubeletMadeIt bool
		want          bool
	}{
		{"bootlet's pod in bootlet's root", btypes.OwnerBootlet, "/b", false, false},
		{"adopted pod, data in bootlet's root (old layout)", btypes.OwnerKubeletStatic, "/b", true, false},
		{"released pod, data in bootlet's root", btypes.OwnerReleased, "/b", false, false},
		{"bootlet's pod in the kubelet's root, never synced by it", btypes.OwnerBootlet, "/k", false, false},
		{"bootlet's pod in the kubelet's root, synced by it", btypes.OwnerBootlet, "/k/", true, true},
		{"adopted pod in the kubelet's root", btypes.OwnerKubeletStatic, "/k", true, true},
		{"released pod in the kubelet's root", btypes.OwnerReleased, "/k", false, true},
	} {
		if got := keepDataDir(tc.owner, tc.dataRoot, "/k", tc.kubeletMadeIt); got != tc.want {
			t.Errorf("%s: keep=%v, want %v", tc.name, got, tc.want)
		}
	}
	if keepDataDir(btypes.OwnerReleased, "/k", "", true) {
		t.Errorf("no kubelet root configured: nothing is the kubelet's")
	}
}

// TestPodDirsOnDisk: with the data root in a kubelet root, a pod's
// etc-hosts, termination log and emptyDir are created there and its Secret
// volume under bootlet's root; a pod whose data is under bootlet's root
// (the layout before the data root) keeps it there; removing a pod cleans
// both roots, and leaves the kubelet's directory of an adopted pod alone.
func TestPodDirsOnDisk(t *testing.T) {
	rec := &mountRecorder{mounts: map[string][]*runtimeapi.Mount{}}
	e := newTestEnv(t, context.Background(), func(f *critesting.FakeRuntimeService) cri.Runtime {
		rec.FakeRuntimeService = f
		return cri.Runtime{RuntimeService: rec}
	})
	kubeletRoot := filepath.Join(e.root, "kubelet")
	e.m.cfg.KubeletRootDir = kubeletRoot
	e.m.dirs.Data = kubeletRoot
	e.m.cfg.Objects = memObjects{}

	mkPod := func(name string) *v1.Pod {
		p := e.pod(name, "busybox")
		p.Spec.HostNetwork = false
		p.Spec.Volumes = []v1.Volume{
			{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}}},
		}
		p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "work", MountPath: "/work"}, {Name: "cfg", MountPath: "/cfg"}}
		return runnertest.Defaulted(p)
	}
	// The fake runtime gives the sandbox no IP; a pod network pod gets
	// /etc/hosts only with one, so use the host network's file.
	hostNet := func(p *v1.Pod) *v1.Pod { p.Spec.HostNetwork = true; return p }

	fresh := hostNet(mkPod("fresh"))
	w := newWorker(e.m, fresh)
	e.syncUntil(w, "running", runnertest.Running)
	uid := string(fresh.UID)
	for _, p := range []string{
		filepath.Join(kubeletRoot, "pods", uid, "etc-hosts"),
		filepath.Join(kubeletRoot, "pods", uid, "volumes", pluginEmptyDir, "work"),
		filepath.Join(kubeletRoot, "pods", uid, "containers", "c0"),
		filepath.Join(e.m.cfg.RootDir, "pods", uid, "volumes", pluginConfigMap, "cfg", "k"),
	} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("fresh pod: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(kubeletRoot, "pods", uid, "plugins")); !os.IsNotExist(err) {
		t.Errorf("bootlet made the kubelet's plugins/ dir, its sign of a synced pod: %v", err)
	}
	if _, err := os.Stat(filepath.Join(kubeletRoot, "pods", uid, "volumes", pluginConfigMap)); !os.IsNotExist(err) {
		t.Errorf("a materialised volume in the kubelet's volumes dir: %v", err)
	}
	var hosts, work string
	for _, m := range rec.of("c0") {
		switch m.ContainerPath {
		case "/etc/hosts":
			hosts = m.HostPath
		case "/work":
			work = m.HostPath
		}
	}
	if want := filepath.Join(kubeletRoot, "pods", uid, "etc-hosts"); hosts != want {
		t.Errorf("/etc/hosts from %s, want %s", hosts, want)
	}
	if want := filepath.Join(kubeletRoot, "pods", uid, "volumes", pluginEmptyDir, "work"); work != want {
		t.Errorf("/work from %s, want %s", work, want)
	}

	// A pod of the old layout: its etc-hosts and emptyDir are under
	// bootlet's root already (a checkpointed pod of an older bootlet).
	old := hostNet(mkPod("old"))
	oldDir := filepath.Join(e.m.cfg.RootDir, "pods", string(old.UID))
	if err := os.MkdirAll(filepath.Join(oldDir, "volumes", pluginEmptyDir, "work"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(oldDir, "volumes", pluginEmptyDir, "work", "marker"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	wo := newWorker(e.m, old)
	e.syncUntil(wo, "running", runnertest.Running)
	if got := mustPath(wo.podDirs(old.UID).Pod(string(old.UID))); got != oldDir {
		t.Errorf("old-layout pod moved to %s, want it kept in %s", got, oldDir)
	}
	if _, err := os.Stat(filepath.Join(kubeletRoot, "pods", string(old.UID))); !os.IsNotExist(err) {
		t.Errorf("old-layout pod got a directory in the kubelet's root: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(oldDir, "volumes", pluginEmptyDir, "work", "marker")); err != nil || string(b) != "kept" {
		t.Errorf("old-layout pod's emptyDir content: %q %v", b, err)
	}
	// A new worker (a restarted bootlet) decides the same from disk.
	if got := mustPath(newWorker(e.m, fresh).podDirs(fresh.UID).Pod(uid)); got != filepath.Join(kubeletRoot, "pods", uid) {
		t.Errorf("fresh pod after a restart: %s", got)
	}

	// Removal: bootlet's pod, both roots go.
	if err := w.removePodDirs(fresh); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(kubeletRoot, "pods", uid), filepath.Join(e.m.cfg.RootDir, "pods", uid)} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left after removal: %v", d, err)
		}
	}
	// An adopted pod: bootlet's root goes, the kubelet's directory stays.
	adopted := mkPod("adopted")
	adopted.Annotations = map[string]string{btypes.AnnotationOwner: string(btypes.OwnerKubeletStatic)}
	wa := newWorker(e.m, adopted)
	d := wa.podDirs(adopted.UID)
	if _, err := SetupVolumes(d, adopted, memObjects{}, cri.EnvFacts{}); err != nil {
		t.Fatal(err)
	}
	if err := wa.removePodDirs(adopted); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mustPath(d.Volume(string(adopted.UID), pluginEmptyDir, "work"))); err != nil {
		t.Errorf("the kubelet's directory of an adopted pod was removed: %v", err)
	}
	if _, err := os.Stat(mustPath(d.Objects(string(adopted.UID)))); !os.IsNotExist(err) {
		t.Errorf("bootlet's directory of an adopted pod left: %v", err)
	}
	// The old-layout pod: everything is in bootlet's root, which goes.
	if err := wo.removePodDirs(old); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(oldDir); !os.IsNotExist(err) {
		t.Errorf("old-layout pod dir left: %v", err)
	}
}

// mountRecorder keeps the mounts of each container created, by name.
type mountRecorder struct {
	*critesting.FakeRuntimeService
	mu     sync.Mutex
	mounts map[string][]*runtimeapi.Mount
}

func (r *mountRecorder) CreateContainer(ctx context.Context, sb string, c *runtimeapi.ContainerConfig, sbc *runtimeapi.PodSandboxConfig) (string, error) {
	r.mu.Lock()
	r.mounts[c.Metadata.Name] = c.Mounts
	r.mu.Unlock()
	return r.FakeRuntimeService.CreateContainer(ctx, sb, c, sbc)
}

func (r *mountRecorder) of(name string) []*runtimeapi.Mount {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mounts[name]
}

func TestWithoutDataVolumes(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Volumes: []v1.Volume{
		{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "x"}}},
		{Name: "m", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		{Name: "d", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{}}},
	}}}
	got := withoutDataVolumes(pod)
	var names []string
	for _, v := range got.Spec.Volumes {
		names = append(names, v.Name)
	}
	if strings.Join(names, ",") != "s,d" {
		t.Errorf("volumes %v, want s,d", names)
	}
	if len(pod.Spec.Volumes) != 4 {
		t.Errorf("the pod itself was changed: %d volumes", len(pod.Spec.Volumes))
	}
}

// mustPath is a PodDirs path that the test knows to be valid.
func mustPath(p string, err error) string {
	if err != nil {
		panic(err)
	}
	return p
}

// TestPodDirsRefuseBadElements: a UID, container or volume name that is not
// one clean path element gets an error, never a path. A UID of ".." made
// Objects bootlet's root itself, which RemovePodDir then removed.
func TestPodDirsRefuseBadElements(t *testing.T) {
	root := t.TempDir()
	d := PodDirs{Root: filepath.Join(root, "bootlet"), Data: filepath.Join(root, "kubelet")}
	for _, uid := range []string{"", ".", "..", "../../x", "a/b", "x\x00"} {
		for name, f := range map[string]func() (string, error){
			"Pod":       func() (string, error) { return d.Pod(uid) },
			"Objects":   func() (string, error) { return d.Objects(uid) },
			"EtcHosts":  func() (string, error) { return d.EtcHosts(uid) },
			"Container": func() (string, error) { return d.Container(uid, "c") },
			"Volume":    func() (string, error) { return d.Volume(uid, pluginSecret, "v") },
		} {
			if p, err := f(); err == nil {
				t.Errorf("%s(uid %q) = %q, want an error", name, uid, p)
			}
		}
		// Removing such a pod removes nothing.
		sentinel := filepath.Join(d.Root, "keep")
		if err := os.MkdirAll(d.Root, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sentinel, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := RemovePodDir(d, &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}, false); err == nil {
			t.Errorf("RemovePodDir(uid %q) succeeded, want an error", uid)
		}
		if _, err := os.Stat(sentinel); err != nil {
			t.Errorf("RemovePodDir(uid %q) removed %s: %v", uid, sentinel, err)
		}
	}
	for _, name := range []string{"", ".", "..", "a/b"} {
		if p, err := d.Container("U", name); err == nil {
			t.Errorf("Container(%q) = %q, want an error", name, p)
		}
		if p, err := d.Volume("U", pluginEmptyDir, name); err == nil {
			t.Errorf("Volume(%q) = %q, want an error", name, p)
		}
	}
}
