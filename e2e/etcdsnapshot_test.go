//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestEtcdSnapshotSaveRestore brings up the bootstrap control plane (as
// TestControlPlane, no kubelet), creates ConfigMaps through the apiserver,
// saves a snapshot with `bootlet etcd snapshot save` (defaults: the
// rendered pod's loopback client URL and the etcd healthcheck client
// certificate), creates more, restores the snapshot with `bootlet etcd
// snapshot restore` (the rendered member's identity) into a new directory,
// and starts a second etcd (_output/bin/etcd, the control plane's version)
// on it on loopback ports: exactly the first ConfigMaps are there, with
// their data. The live cluster is not touched by either command.
//
// It binds the control plane's fixed host ports, so like TestControlPlane
// it must not call t.Parallel.
func TestEtcdSnapshotSaveRestore(t *testing.T) {
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)
	Bin(t, "bootlet-tools") // `bootlet etcd` runs it
	etcdBin := Bin(t, "etcd")

	c, b, assets := startControlPlaneDaemon(t)
	if out, err := b.CLI(t, "apply", "-f", filepath.Join(assets, "bootstrap-manifests")); err != nil {
		t.Fatalf("bootlet apply: %v\n%s", err, out)
	}
	admin := AdminClient(t, assets)
	waitAPIReadyz(t, admin, 5*time.Minute)

	ctx := context.Background()
	const ns = "e2e-snap"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	before := []string{"before-0", "before-1", "before-2"}
	after := []string{"after-0", "after-1"}
	createConfigMaps(t, admin, ns, before)

	snap := filepath.Join(c.Dir, "etcd-snapshot.db")
	// Another user planted FILE.part, their own file: the snapshot (every
	// Secret) must not be written into it, nor become it.
	plantedPart := plantForeign(t, snap+".part", "planted by uid 65534")
	start := time.Now()
	out, err := exec.Command(Bin(t, "bootlet"), "etcd", "snapshot", "save", snap, "--asset-dir", assets).CombinedOutput()
	if err != nil {
		t.Fatalf("bootlet etcd snapshot save: %v\n%s", err, out)
	}
	t.Logf("bootlet etcd snapshot save (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	for _, want := range []string{"saved " + snap + " from https://127.0.0.1:2379", "REVISION", "TOTAL KEYS"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("save's output lacks %q", want)
		}
	}
	if left, _ := filepath.Glob(snap + ".part-*"); len(left) > 0 {
		t.Errorf("save left %v", left)
	}
	plantedPart.assertUntouched(t)
	assertOwnSnapshotFile(t, snap)

	// FILE.part a symlink to another file of theirs, and FILE one too:
	// neither target is written, FILE becomes a file of its own.
	linked := filepath.Join(c.Dir, "etcd-snapshot-2.db")
	victimPart, victimFile := plantForeign(t, filepath.Join(c.Dir, "victim-part"), "theirs"), plantForeign(t, filepath.Join(c.Dir, "victim-file"), "theirs too")
	for link, target := range map[string]string{linked + ".part": victimPart.path, linked: victimFile.path} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(Bin(t, "bootlet"), "etcd", "snapshot", "save", linked, "--asset-dir", assets).CombinedOutput(); err != nil {
		t.Fatalf("bootlet etcd snapshot save %s: %v\n%s", linked, err, out)
	}
	victimPart.assertUntouched(t)
	victimFile.assertUntouched(t)
	assertOwnSnapshotFile(t, linked)
	createConfigMaps(t, admin, ns, after)

	restored := filepath.Join(c.Dir, "etcd-restored")
	out, err = exec.Command(Bin(t, "bootlet"), "etcd", "snapshot", "restore", snap, "--asset-dir", assets, "--data-dir", restored).CombinedOutput()
	if err != nil {
		t.Fatalf("bootlet etcd snapshot restore: %v\n%s", err, out)
	}
	t.Logf("bootlet etcd snapshot restore:\n%s", out)
	if want := "as member " + b.NodeName; !strings.Contains(string(out), want) {
		t.Errorf("restore's output lacks %q", want)
	}
	// A second restore into the same directory is refused, and names it.
	out, err = exec.Command(Bin(t, "bootlet"), "etcd", "snapshot", "restore", snap, "--asset-dir", assets, "--data-dir", restored).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "data dir "+restored+" exists and is not empty") {
		t.Errorf("second restore into %s: %v\n%s", restored, err, out)
	}

	// The live cluster still has everything.
	live, err := admin.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ownConfigMaps(live.Items); !slices.Equal(got, sorted(append(slices.Clone(before), after...))) {
		t.Errorf("live ConfigMaps in %s after save and restore: %v", ns, got)
	}

	// The restored member, run by a second etcd on loopback ports: its
	// membership keeps the rendered peer URL, which it only advertises.
	endpoint := startRestoredEtcd(t, etcdBin, b.NodeName, restored, c.Dir)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	prefix := "/registry/configmaps/" + ns + "/"
	var resp *clientv3.GetResponse
	Eventually(t, 30*time.Second, func() (bool, string) {
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err = cli.Get(gctx, prefix, clientv3.WithPrefix())
		return err == nil, fmt.Sprintf("get %s from the restored etcd at %s: %v", prefix, endpoint, err)
	})
	var got []string
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), prefix)
		if name == rootCAConfigMap {
			continue
		}
		got = append(got, name)
		// The apiserver stores protobuf, in which strings are raw bytes.
		if !strings.Contains(string(kv.Value), "payload of "+name) {
			t.Errorf("restored %s lacks its data: %q", kv.Key, kv.Value)
		}
	}
	if want := sorted(slices.Clone(before)); !slices.Equal(got, want) {
		t.Errorf("restored etcd holds ConfigMaps %v under %s, want exactly %v (the ones created before the save)", got, prefix, want)
	}
}

// rootCAConfigMap is the controller-manager's kube-root-ca.crt, published
// into every namespace at a time of its own choosing: it may or may not
// be in the snapshot.
const rootCAConfigMap = "kube-root-ca.crt"

func createConfigMaps(t *testing.T, admin *kubernetes.Clientset, ns string, names []string) {
	t.Helper()
	for _, n := range names {
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}, Data: map[string]string{"payload": "payload of " + n}}
		if _, err := admin.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create configmap %s/%s: %v", ns, n, err)
		}
	}
}

func ownConfigMaps(cms []v1.ConfigMap) []string {
	var out []string
	for _, cm := range cms {
		if cm.Name != rootCAConfigMap {
			out = append(out, cm.Name)
		}
	}
	return sorted(out)
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

// startRestoredEtcd runs etcd on a restored data dir with plain-HTTP client
// and peer listeners on free loopback ports (none of the control plane's),
// stops it at the end of the test, and returns its client URL. Its log is
// dir/etcd-restored.log, shown if the test fails.
func startRestoredEtcd(t *testing.T, bin, name, dataDir, dir string) string {
	t.Helper()
	clientPort := FreePort(t)
	peerPort := FreePort(t)
	for peerPort == clientPort {
		peerPort = FreePort(t)
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	logPath := filepath.Join(dir, "etcd-restored.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--name", name, "--data-dir", dataDir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", name+"="+peer)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			t.Logf("--- restored etcd log tail:\n%s", tail(string(data), 4000))
		}
	})
	return client
}

// foreignFile is a file another user (uid 65534) planted.
type foreignFile struct{ path, content string }

func plantForeign(t testing.TB, path, content string) foreignFile {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return foreignFile{path, content}
}

// assertUntouched: still the planted file, its content and its owner.
func (f foreignFile) assertUntouched(t testing.TB) {
	t.Helper()
	data, err := os.ReadFile(f.path)
	fi, lerr := os.Lstat(f.path)
	if err != nil || lerr != nil || string(data) != f.content || fi.Sys().(*syscall.Stat_t).Uid != 65534 || fi.Mode().Perm() != 0o644 {
		t.Errorf("the planted %s was written, replaced or moved: %q %v %v %v", f.path, data, fi, err, lerr)
	}
}

// assertOwnSnapshotFile: path is a regular file of root's (the saver),
// mode 0600, with one link.
func assertOwnSnapshotFile(t testing.TB, path string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || st.Uid != 0 || st.Nlink != 1 {
		t.Errorf("snapshot %s: %v, uid %d, %d links: want a regular file of root's, mode 0600, one link (it holds every Secret)", path, fi.Mode(), st.Uid, st.Nlink)
	}
}
