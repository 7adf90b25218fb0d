package noderecover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/bootlet/bootlet/etcdsnapshot"
	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/noderecover/recoverlock"
)

// node is a rendered node whose old state recover moves aside: bootlet's
// root dir and a static copy; its etcd data dir is lost.
type node struct {
	dir, assets, root, static, data string
}

func newNode(t *testing.T) node {
	t.Helper()
	dir := t.TempDir()
	n := node{dir: dir, assets: renderNode(t, dir), root: filepath.Join(dir, "bootlet"), static: filepath.Join(dir, "manifests"), data: filepath.Join(dir, "etcd")}
	write(t, filepath.Join(n.root, "checkpoints", "pod.json"), "old pod")
	write(t, filepath.Join(n.static, "bootlet_kube-system_etcd.yaml"), "old etcd")
	return n
}

func (n node) options(snapshot string) Options {
	return Options{AssetDir: n.assets, RootDir: n.root, StaticPodPath: n.static, Snapshot: snapshot}
}

// assertNothingMoved: the old state is where it was, nothing is moved
// aside, no data dir was made, no scratch directory is left.
func (n node) assertNothingMoved(t *testing.T) {
	t.Helper()
	for _, p := range []string{filepath.Join(n.root, "checkpoints", "pod.json"), filepath.Join(n.static, "bootlet_kube-system_etcd.yaml")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("moved: %v", err)
		}
	}
	if _, err := os.Stat(n.data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir %s: %v", n.data, err)
	}
	ents, _ := os.ReadDir(n.dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".pre-recover-") || strings.HasPrefix(e.Name(), ".etcd") {
			t.Errorf("left in %s: %s", n.dir, e.Name())
		}
	}
}

func quiet(Options, manifests.EtcdMember) []string { return nil }

var now = time.Date(2026, 11, 27, 1, 2, 3, 0, time.UTC)

// TestRunRefusesADamagedSnapshot: a snapshot whose sha256 trailer does
// not match is refused by etcd's own check, naming the file and the
// cause, before anything is moved.
func TestRunRefusesADamagedSnapshot(t *testing.T) {
	n := newNode(t)
	snap := filepath.Join(n.dir, "damaged.db")
	write(t, snap, string(make([]byte, 4096+32))) // a database and a sha256 that is not its
	var out bytes.Buffer
	_, err := run(n.options(snap), now, &out, quiet)
	var re *RefusedError
	if !errors.As(err, &re) || len(re.Reasons) != 1 || !strings.Contains(err.Error(), "snapshot "+snap+": "+snap+" is not an intact etcd snapshot") ||
		!strings.Contains(err.Error(), "expected sha256") {
		t.Errorf("want a refusal naming %s and the sha256, got %v", snap, err)
	}
	n.assertNothingMoved(t)
	if out.Len() > 0 {
		t.Errorf("printed actions:\n%s", out.String())
	}
	if lk, err := recoverlock.Acquire(n.root, recoverlock.Daemon); err != nil {
		t.Errorf("the lock was not released: %v", err)
	} else {
		lk.Release()
	}
}

// TestRunRefusesWhileTheLockIsHeld: a daemon holding the lock (shared,
// as its start takes it) is a refusal naming it, even when its socket is
// not where recover looks; nothing is moved. So is another recover.
func TestRunRefusesWhileTheLockIsHeld(t *testing.T) {
	n := newNode(t)
	write(t, filepath.Join(n.data, "member", "snap", "db"), "db")
	for _, role := range []recoverlock.Role{recoverlock.Daemon, recoverlock.Recover} {
		lk, err := recoverlock.Acquire(n.root, role)
		if err != nil {
			t.Fatal(err)
		}
		_, err = run(n.options(""), now, &bytes.Buffer{}, quiet)
		want := fmt.Sprintf("(lock %s.lock held by pid %d)", n.root, os.Getpid())
		if !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("%s holds the lock: %v, want %q", role, err, want)
		}
		lk.Release()
	}
	for _, p := range []string{filepath.Join(n.root, "checkpoints", "pod.json"), filepath.Join(n.static, "bootlet_kube-system_etcd.yaml")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("moved: %v", err)
		}
	}
}

// TestRunLooksAgainBeforeMoving: what answers is asked again right before
// the first move; a service that came up after the first look is a
// refusal, and nothing is moved.
func TestRunLooksAgainBeforeMoving(t *testing.T) {
	n := newNode(t)
	write(t, filepath.Join(n.data, "member", "snap", "db"), "db")
	calls := 0
	late := func(Options, manifests.EtcdMember) []string {
		calls++
		if calls == 1 {
			return nil
		}
		return []string{"the kubelet at http://127.0.0.1:10248/healthz"}
	}
	_, err := run(n.options(""), now, &bytes.Buffer{}, late)
	if calls != 2 || !strings.Contains(fmt.Sprint(err), "the kubelet at http://127.0.0.1:10248/healthz still answers") {
		t.Errorf("%d looks, %v", calls, err)
	}
	for _, p := range []string{filepath.Join(n.root, "checkpoints", "pod.json"), filepath.Join(n.static, "bootlet_kube-system_etcd.yaml")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("moved: %v", err)
		}
	}
}

// TestRunRestoresAVerifiedSnapshot: a whole snapshot of a real etcd is
// verified, then the old state is moved aside and the snapshot restored;
// the lock is let go at the end.
func TestRunRestoresAVerifiedSnapshot(t *testing.T) {
	n := newNode(t)
	snap := filepath.Join(n.dir, "good.db")
	saveSnapshot(t, filepath.Join(t.TempDir(), "etcd"), snap)
	var out bytes.Buffer
	m, err := run(n.options(snap), now, &out, quiet)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	const sfx = ".pre-recover-20261127T010203Z"
	for _, p := range []string{n.root + sfx + "/checkpoints/pod.json", n.static + sfx + "/bootlet_kube-system_etcd.yaml", n.data + "/member/snap/db"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after recover: %v", err)
		}
	}
	got := out.String()
	if m.Name != "n1" || !strings.HasPrefix(got, "verified snapshot "+snap+": revision ") || !strings.Contains(got, "restore into "+n.data) {
		t.Errorf("member %q, output:\n%s", m.Name, got)
	}
	if lk, err := recoverlock.Acquire(n.root, recoverlock.Daemon); err != nil {
		t.Errorf("the lock was not released: %v", err)
	} else {
		lk.Release()
	}
}

// saveSnapshot runs an embedded etcd on dir with a key in it and saves its
// snapshot to path.
func saveSnapshot(t *testing.T, dir, path string) {
	t.Helper()
	// Two ports nobody listened on a moment ago.
	var ports []string
	var ls []net.Listener
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	for _, l := range ls {
		l.Close()
	}
	client, _ := url.Parse("http://127.0.0.1:" + ports[0])
	peer, _ := url.Parse("http://127.0.0.1:" + ports[1])
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.LogLevel = "s", dir, "error"
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*client}, []url.URL{*client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	cfg.InitialCluster = "s=" + peer.String()
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("embedded etcd not ready after 30s")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(context.Background(), "/registry/configmaps/a", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := etcdsnapshot.Save(context.Background(), etcdsnapshot.Client{Endpoint: client.String()}, path); err != nil {
		t.Fatal(err)
	}
}
