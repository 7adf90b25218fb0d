package noderecover

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/pivot"
)

// renderNode renders a node's assets under dir, its etcd data in
// dir/etcd, as `bootlet render` does.
func renderNode(t *testing.T, dir string) string {
	t.Helper()
	cfg := manifests.DefaultConfig()
	cfg.NodeName, cfg.AdvertiseAddress, cfg.EtcdDataDir, cfg.Addons = "n1", "10.0.0.5", filepath.Join(dir, "etcd"), nil
	assets := filepath.Join(dir, "assets")
	if err := manifests.Render(cfg, assets); err != nil {
		t.Fatal(err)
	}
	return assets
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestObserveAndApplyFromTheDataDir: recover from a surviving data dir,
// with the old bootlet root (a pivot record) and bootlet's static copies
// still there: both are moved aside, the operator's own static pod and the
// data are left, and nothing is deleted.
func TestObserveAndApplyFromTheDataDir(t *testing.T) {
	dir := t.TempDir()
	assets := renderNode(t, dir)
	data := filepath.Join(dir, "etcd")
	write(t, filepath.Join(data, "member", "snap", "db"), "db")
	root := filepath.Join(dir, "bootlet")
	if err := pivot.WriteDone(pivot.RecordPath(root), pivot.DoneRecord{Components: []string{"kube-apiserver"}}); err != nil {
		t.Fatal(err)
	}
	static := filepath.Join(dir, "manifests")
	write(t, filepath.Join(static, "bootlet_kube-system_etcd.yaml"), "old etcd")
	write(t, filepath.Join(static, "operator.yaml"), "mine")

	now := time.Date(2026, 11, 27, 1, 2, 3, 0, time.UTC)
	f, m, err := Observe(Options{AssetDir: assets, RootDir: root, StaticPodPath: static}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.MissingAssets) != 0 || f.DataDir != data || f.DataDirState != DirNonEmpty || !f.DataDirHasMember || f.RootState != DirNonEmpty ||
		!slices.Equal(f.StaticCopies, []string{filepath.Join(static, "bootlet_kube-system_etcd.yaml")}) || m.Name != "n1" {
		t.Fatalf("facts %+v member %+v", f, m)
	}
	f.Answering = nil // another test's etcd may listen on 127.0.0.1:2379 (TestAnswering checks it)
	plan, err := Decide(f)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Apply(plan, "", m, &out); err != nil {
		t.Fatal(err)
	}
	const sfx = ".pre-recover-20261127T010203Z"
	for _, p := range []string{root + sfx + "/pivot-done.json", static + sfx + "/bootlet_kube-system_etcd.yaml", static + "/operator.yaml", data + "/member/snap/db"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after recover: %v", err)
		}
	}
	for _, p := range []string{root, filepath.Join(static, "bootlet_kube-system_etcd.yaml")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there: %v", p, err)
		}
	}
	if !strings.Contains(out.String(), "move "+root+" aside to "+root+sfx) || !strings.Contains(out.String(), "use "+data) {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestObserveRefusals: the lost bootstrap manifests and etcd's CA key,
// a snapshot that is not there, a non-empty data dir: one refusal names
// them all, and nothing is changed.
func TestObserveRefusals(t *testing.T) {
	dir := t.TempDir()
	assets := renderNode(t, dir)
	data := filepath.Join(dir, "etcd")
	write(t, filepath.Join(data, "member", "snap", "db"), "db")
	for _, p := range []string{"bootstrap-manifests/kube-apiserver.yaml", "pki/etcd/ca.key"} {
		if err := os.Remove(filepath.Join(assets, p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(assets, "self-hosted")); err != nil {
		t.Fatal(err)
	}
	f, _, err := Observe(Options{AssetDir: assets, RootDir: filepath.Join(dir, "bootlet"), Snapshot: filepath.Join(dir, "nope.db")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f.Answering = nil
	_, err = Decide(f)
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("want a refusal, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		filepath.Join(assets, "bootstrap-manifests/kube-apiserver.yaml") + " is missing: run `bootlet render",
		filepath.Join(assets, "pki/etcd/ca.key") + " is missing: the node's PKI cannot be re-made",
		filepath.Join(assets, "self-hosted/*.yaml") + " is missing",
		"snapshot " + filepath.Join(dir, "nope.db") + ": stat",
		"etcd data dir " + data + " is not empty",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal lacks %q:\n%s", want, msg)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "member", "snap", "db")); err != nil {
		t.Errorf("the data was touched: %v", err)
	}
}

// TestAnswering: a daemon socket that accepts connections is reported; a
// stale socket file (nothing listening) and a kubelet URL where nothing
// listens are not.
func TestAnswering(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "bootlet.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	etcdURL := "https://" + tcp.Addr().String()
	got := answering(Options{DaemonSocket: sock}, manifests.EtcdMember{ClientURL: etcdURL})
	if !slices.Equal(got, []string{"bootlet at unix://" + sock, "etcd at " + etcdURL}) {
		t.Errorf("listening: %q", got)
	}
	l.Close()
	tcp.Close()
	// A closed unix listener removes its file; leave a stale one, as a
	// killed daemon does.
	write(t, sock, "")
	if got := answering(Options{DaemonSocket: sock, KubeletHealthzURL: "http://" + tcp.Addr().String() + "/healthz"}, manifests.EtcdMember{ClientURL: etcdURL}); len(got) != 0 {
		t.Errorf("nothing listens, yet %q", got)
	}
}
