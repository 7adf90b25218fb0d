package runner

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/volume/util/hostutil"

	"github.com/bootlet/bootlet/cri"
	btypes "github.com/bootlet/bootlet/types"
)

// Pod directories over two roots: kubelet-layout data in the kubelet's root dir, materialised
// volumes in bootlet's (docs/design/runner.md, "Pod directories").

// Volume plugin directory names (utilstrings.EscapeQualifiedName of the
// kubelet's plugin names).
const (
	pluginEmptyDir    = "kubernetes.io~empty-dir"
	pluginSecret      = "kubernetes.io~secret"
	pluginConfigMap   = "kubernetes.io~configmap"
	pluginProjected   = "kubernetes.io~projected"
	pluginDownwardAPI = "kubernetes.io~downward-api"
)

// PodDirs is the kubelet's per-pod directory layout over bootlet's root and
// the data root (see above).
type PodDirs struct {
	// Root is bootlet's --root-dir: ROOT/pods/UID/volumes/PLUGIN/NAME of
	// the materialised volumes.
	Root string
	// Data is the root of the kubelet-layout data; empty: Root.
	Data string
}

func (d PodDirs) dataRoot() string {
	if d.Data == "" {
		return d.Root
	}
	return d.Data
}

// Pod is the pod's directory under the data root: the kubelet's pod dir.
// Every path below refuses a UID, container or volume name that is not one
// clean path element (cri.PathElement): these directories are removed with
// RemoveAll, and a UID of ".." made the pod's directory bootlet's root.
func (d PodDirs) Pod(uid string) (string, error) {
	if err := cri.PathElement("pod uid", uid); err != nil {
		return "", err
	}
	return filepath.Join(d.dataRoot(), "pods", uid), nil
}

// Objects is the pod's directory under bootlet's root, which holds its
// materialised volumes.
func (d PodDirs) Objects(uid string) (string, error) {
	if err := cri.PathElement("pod uid", uid); err != nil {
		return "", err
	}
	return filepath.Join(d.Root, "pods", uid), nil
}

func (d PodDirs) EtcHosts(uid string) (string, error) {
	dir, err := d.Pod(uid)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "etc-hosts"), nil
}

func (d PodDirs) Container(uid, name string) (string, error) {
	dir, err := d.Pod(uid)
	if err != nil {
		return "", err
	}
	if err := cri.PathElement("container name", name); err != nil {
		return "", err
	}
	return filepath.Join(dir, "containers", name), nil
}

// Volume is the directory of a pod volume: emptyDirs under the data root,
// everything bootlet materialises under its own root.
func (d PodDirs) Volume(uid, plugin, name string) (string, error) {
	base, err := d.Objects(uid)
	if dataPlugin(plugin) {
		base, err = d.Pod(uid)
	}
	if err != nil {
		return "", err
	}
	if err := cri.PathElements("volume plugin", plugin, "volume name", name); err != nil {
		return "", err
	}
	return filepath.Join(base, "volumes", plugin, name), nil
}

// dataPlugin reports whether a volume plugin's directories belong under the
// data root. Only emptyDir: its content is state a restarted container must
// find, and the static copy keeps it an emptyDir, so the kubelet's desired
// state has it and its SetUp takes the directory as it is. A downwardAPI
// volume (and a projected one without Secret or ConfigMap sources) also
// stays itself in the static copy, but its content is derived from the pod:
// the kubelet writes its own, and two writers never share one directory.
func dataPlugin(plugin string) bool { return plugin == pluginEmptyDir }

// PodDataRoot is the configured data root: --pod-root-dir when set, else
// the kubelet's root dir when the handoff is on (handoffRootDir, "" when it
// is off), else --root-dir.
func PodDataRoot(podRootDir, rootDir, handoffRootDir string) string {
	switch {
	case podRootDir != "":
		return podRootDir
	case handoffRootDir != "":
		return handoffRootDir
	}
	return rootDir
}

// PrepareRootDir makes bootlet's --root-dir 0700 and its pods/ 0750,
// creating them or, when they exist already (made by hand, by an older
// version, or by a package with the umask's modes), tightening them: the
// root holds the checkpoint store with Secret data and the PKI, pods/ the
// pods' materialised Secret volumes.
func PrepareRootDir(rootDir string) error {
	for dir, mode := range map[string]os.FileMode{rootDir: 0o700, filepath.Join(rootDir, "pods"): 0o750} {
		if err := os.MkdirAll(dir, mode); err != nil {
			return err
		}
	}
	if err := os.Chmod(rootDir, 0o700); err != nil {
		return err
	}
	return os.Chmod(filepath.Join(rootDir, "pods"), 0o750)
}

// CheckPodDirs rejects a configuration that would put bootlet's
// materialised volumes in the kubelet's pod volume directories, where the
// kubelet's volume reconstruction would tear them down under the running
// containers.
// handoffRootDir is the kubelet's root dir when the handoff is on, "" when
// it is off.
func CheckPodDirs(rootDir, handoffRootDir string) error {
	if handoffRootDir != "" && filepath.Clean(rootDir) == filepath.Clean(handoffRootDir) {
		return fmt.Errorf("--root-dir %s is the kubelet's root dir: the kubelet would tear down the Secret and ConfigMap volumes bootlet keeps under ROOT/pods; use a directory of its own (the pod data goes to the kubelet's root dir anyway)", rootDir)
	}
	return nil
}

// choosePodDataRoot picks the data root of one pod. A pod keeps the
// directories it started with, across bootlet restarts and flag changes
// (a pod that started before the data root moved keeps its emptyDir
// content and its etc-hosts): the configured root when it holds the pod's
// data or no root does, else the first candidate that holds it.
func choosePodDataRoot(configured string, candidates []string, holds map[string]bool) string {
	if holds[configured] {
		return configured
	}
	for _, c := range candidates {
		if holds[c] {
			return c
		}
	}
	return configured
}

// dataRootCandidates lists, without duplicates, the roots a pod's data may
// be under: the configured one, bootlet's root (the layout before the data
// root existed), and the kubelet's root dir.
func dataRootCandidates(configured, rootDir, kubeletRootDir string) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range []string{configured, rootDir, kubeletRootDir} {
		if r == "" || seen[filepath.Clean(r)] {
			continue
		}
		seen[filepath.Clean(r)] = true
		out = append(out, r)
	}
	return out
}

// podDataOnDisk reports whether a pod directory holds kubelet-layout data
// of the pod. Materialised volumes do not count: in the old layout they
// lay next to the data, and in the new one they are all bootlet's root
// holds of the pod.
func podDataOnDisk(podDir string) bool {
	for _, p := range []string{"etc-hosts", "containers", filepath.Join("volumes", pluginEmptyDir), "volume-subpaths"} {
		if _, err := os.Lstat(filepath.Join(podDir, p)); err == nil {
			return true
		}
	}
	return false
}

// keepDataDir reports whether bootlet leaves a finished pod's data
// directory alone: it is the kubelet's pod directory (the data root is the
// kubelet's root dir) and the kubelet owns the pod (it adopted it, or
// bootlet released it to it) or made the directory its own (its plugins/
// subdirectory, makePodDataDirs: the kubelet synced the pod). The kubelet
// removes its pod directories itself (cleanupOrphanedPodDirs), after it
// unmounted what it mounted there.
func keepDataDir(owner btypes.Owner, dataRoot, kubeletRootDir string, kubeletMadeIt bool) bool {
	if kubeletRootDir == "" || filepath.Clean(dataRoot) != filepath.Clean(kubeletRootDir) {
		return false
	}
	return owner != btypes.OwnerBootlet || kubeletMadeIt
}

// prepareDataRoot makes the data root a shared mount, as the kubelet makes
// its root dir at its start (kubelet.go setupDataDirs, with the kubelet's
// own hostutil.DoMakeRShared), when the data root is the kubelet's root
// dir. Done by the kubelet later, on a node whose / is not shared, that
// bind mount of the directory on itself would hide every tmpfs bootlet
// mounted under it before (memory emptyDirs): the kubelet would mount a
// new, empty one for the containers it restarts, and could never remove
// the directory. Once it is shared, the kubelet leaves it as it is. Run
// before any worker sets up a volume; a failure is logged, and only
// memory emptyDirs are then not lined up.
func (m *Manager) prepareDataRoot() {
	if m.cfg.Handoff == nil {
		return
	}
	root := m.dirs.dataRoot()
	if filepath.Clean(root) != filepath.Clean(m.cfg.KubeletRootDir) {
		return
	}
	if err := os.MkdirAll(root, 0o750); err != nil {
		klog.ErrorS(err, "Creating the pod data root failed", "dir", root)
		return
	}
	if err := hostutil.DoMakeRShared(root, "/proc/self/mountinfo"); err != nil {
		klog.ErrorS(err, "Making the pod data root a shared mount failed; the kubelet will bind-mount it on itself and hide bootlet's memory emptyDirs", "dir", root)
	}
}

// withoutDataVolumes is the pod without its emptyDir volumes, for the
// volume refresh of a pod the kubelet is in charge of: those directories
// are the kubelet's now (it set them up again, and tears them down when the
// pod ends); setting one up again after that teardown would leave a stray
// directory, or a tmpfs, in the kubelet's pod directory.
func withoutDataVolumes(pod *v1.Pod) *v1.Pod {
	out := *pod
	out.Spec.Volumes = nil
	for _, vol := range pod.Spec.Volumes {
		if vol.EmptyDir == nil {
			out.Spec.Volumes = append(out.Spec.Volumes, vol)
		}
	}
	return &out
}

// resolvePodDirs finds the data root of a pod (choosePodDataRoot) from what
// is on disk.
func (m *Manager) resolvePodDirs(uid types.UID) PodDirs {
	configured := m.dirs.dataRoot()
	candidates := dataRootCandidates(configured, m.dirs.Root, m.cfg.KubeletRootDir)
	holds := map[string]bool{}
	for _, r := range candidates {
		if dir, err := (PodDirs{Root: m.dirs.Root, Data: r}).Pod(string(uid)); err == nil {
			holds[r] = podDataOnDisk(dir)
		}
	}
	return PodDirs{Root: m.dirs.Root, Data: choosePodDataRoot(configured, candidates, holds)}
}

// podDirs is the worker's pod's directories, resolved once per worker (the
// first sync), outside w.mu.
func (w *worker) podDirs(uid types.UID) PodDirs {
	w.mu.Lock()
	d, ok := w.dirs, w.dirsResolved
	w.mu.Unlock()
	if ok {
		return d
	}
	d = w.m.resolvePodDirs(uid)
	w.mu.Lock()
	w.dirs, w.dirsResolved = d, true
	w.mu.Unlock()
	return d
}

// removePodDirs removes the pod's directories once nothing of it runs:
// bootlet's own always, the data directory unless keepDataDir says it is
// the kubelet's to remove.
func (w *worker) removePodDirs(pod *v1.Pod) error {
	dirs := w.podDirs(pod.UID)
	uid := string(pod.UID)
	kubeletRoot := w.m.cfg.KubeletRootDir
	madeIt := false
	if kubeletRoot != "" {
		kubeletPodDir, err := (PodDirs{Root: kubeletRoot}).Objects(uid)
		if err != nil {
			return err
		}
		fi, err := os.Stat(filepath.Join(kubeletPodDir, "plugins"))
		madeIt = err == nil && fi.IsDir()
	}
	keep := keepDataDir(w.m.ownerOf(pod.UID, w.apiPod()), dirs.dataRoot(), kubeletRoot, madeIt)
	return RemovePodDir(dirs, pod, keep)
}
