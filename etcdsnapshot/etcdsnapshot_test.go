package etcdsnapshot

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/bootlet/bootlet/manifests"
)

func TestMemberValidate(t *testing.T) {
	ok := Member{Name: "node1", PeerURLs: []string{"https://192.0.2.10:2380"}, InitialCluster: "node1=https://192.0.2.10:2380"}
	for _, tc := range []struct {
		name   string
		mutate func(*Member)
		want   string // "" for valid
	}{
		{"render's member", func(*Member) {}, ""},
		{"two peer URLs", func(m *Member) {
			m.PeerURLs = []string{"https://192.0.2.10:2380", "https://[2001:db8::1]:2380"}
			m.InitialCluster = "node1=https://[2001:db8::1]:2380,node1=https://192.0.2.10:2380"
		}, ""},
		{"no name", func(m *Member) { m.Name = "" }, "member name is empty"},
		{"no peer URLs", func(m *Member) { m.PeerURLs = nil }, "peer URLs []"},
		{"peer URL without scheme", func(m *Member) { m.PeerURLs = []string{"192.0.2.10:2380"} }, "peer URLs"},
		{"bad initial cluster", func(m *Member) { m.InitialCluster = "node1" }, "initial cluster \"node1\""},
		{"another member's cluster", func(m *Member) { m.InitialCluster = "node2=https://192.0.2.10:2380" }, "has no member \"node1\""},
		{"peer URL drifted", func(m *Member) { m.PeerURLs = []string{"https://192.0.2.11:2380"} }, "gives member \"node1\" the peer URLs [https://192.0.2.10:2380], but its peer URLs are [https://192.0.2.11:2380]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ok
			m.PeerURLs = slices.Clone(ok.PeerURLs)
			tc.mutate(&m)
			err := m.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
			if tc.want == "" {
				cfg, err := restoreConfig("/s.db", "/d", m)
				if err != nil || cfg.Name != m.Name || cfg.InitialClusterToken != InitialClusterToken || !slices.Equal(cfg.PeerURLs, m.PeerURLs) || cfg.OutputDataDir != "/d" || cfg.SkipHashCheck {
					t.Errorf("restoreConfig = %+v, %v", cfg, err)
				}
			}
		})
	}
}

func TestClientValidate(t *testing.T) {
	tlsFiles := Client{CAFile: "ca.crt", CertFile: "c.crt", KeyFile: "c.key"}
	for _, tc := range []struct {
		name string
		c    Client
		want string
	}{
		{"https with files", Client{Endpoint: "https://127.0.0.1:2379", CAFile: "ca.crt", CertFile: "c.crt", KeyFile: "c.key"}, ""},
		{"plain http needs no files", Client{Endpoint: "http://127.0.0.1:2379"}, ""},
		{"empty", tlsFiles, "endpoint is required"},
		{"no scheme", Client{Endpoint: "127.0.0.1:2379"}, "want an http:// or https:// URL"},
		{"unix", Client{Endpoint: "unix:///run/etcd.sock"}, "want an http:// or https:// URL"},
		{"https without CA", Client{Endpoint: "https://127.0.0.1:2379", CertFile: "c.crt", KeyFile: "c.key"}, "a CA certificate file is required"},
		{"https without key", Client{Endpoint: "https://127.0.0.1:2379", CAFile: "ca.crt", CertFile: "c.crt"}, "a client key file is required"},
	} {
		err := tc.c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate() = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestCheckNewDataDir(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	full := filepath.Join(dir, "full")
	file := filepath.Join(dir, "file")
	for _, d := range []string{empty, filepath.Join(full, "member")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(dir, "absent"), ""},
		{empty, ""},
		{full, "data dir " + full + " exists and is not empty"},
		{file, "exists and is not a directory"},
	} {
		err := CheckNewDataDir(tc.dir)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckNewDataDir(%s) = %v, want %q", tc.dir, err, tc.want)
		}
	}
}

func renderConfig(node string) manifests.Config {
	cfg := manifests.DefaultConfig()
	cfg.NodeName, cfg.AdvertiseAddress, cfg.Addons = node, "192.0.2.10", nil
	return cfg
}

var (
	renderOnce   sync.Once
	renderDir    string
	renderMember manifests.EtcdMember
	renderErr    error
)

// rendered is `bootlet render` of node1 (once per test binary: key
// generation is the slow part) and the etcd member its pod describes. Tests
// must not modify it.
func rendered(t *testing.T) (string, manifests.EtcdMember) {
	t.Helper()
	renderOnce.Do(func() {
		renderDir, renderErr = os.MkdirTemp("", "bootlet-etcdsnapshot-")
		if renderErr == nil {
			renderErr = manifests.Render(renderConfig("node1"), renderDir)
		}
		if renderErr == nil {
			renderMember, renderErr = manifests.LoadEtcdMember(renderDir)
		}
	})
	if renderErr != nil {
		t.Fatal(renderErr)
	}
	return renderDir, renderMember
}

// freePorts returns n TCP ports on 127.0.0.1 nobody listened on a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func mustURL(t *testing.T, s string) url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return *u
}

// startEtcd runs an embedded etcd named name on dir, with its client URL
// (https with tls, else http) and its peer URL on loopback ports, and
// returns the client URL. An existing dir keeps its membership: the peer
// URL here is only where this process listens.
func startEtcd(t *testing.T, name, dir string, tls *transport.TLSInfo) string {
	t.Helper()
	ports := freePorts(t, 2)
	scheme := "http"
	if tls != nil {
		scheme = "https"
	}
	client := mustURL(t, fmt.Sprintf("%s://127.0.0.1:%d", scheme, ports[0]))
	peer := mustURL(t, fmt.Sprintf("http://127.0.0.1:%d", ports[1]))
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = name + "=" + peer.String()
	cfg.LogLevel = "error"
	if tls != nil {
		cfg.ClientTLSInfo = *tls
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("embedded etcd on %s: %v", dir, err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatalf("embedded etcd on %s: %v", dir, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("embedded etcd on %s not ready after 30s", dir)
	}
	return client.String()
}

func newClient(t *testing.T, endpoint string, tls *transport.TLSInfo) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if tls != nil {
		tc, err := tls.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func keys(t *testing.T, cli *clientv3.Client, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Key))
	}
	return out
}

// TestSaveRestoreRoundTrip saves a snapshot from a real etcd (embedded, the
// server bootlet's control plane runs) over TLS with the PKI render writes,
// restores it with the identity of render's etcd pod, and starts etcd on the
// restored directory: it holds what was there at the save, and nothing
// written after.
func TestSaveRestoreRoundTrip(t *testing.T) {
	assets, member := rendered(t)
	pki := filepath.Join(assets, manifests.PKIDir)
	serverTLS := &transport.TLSInfo{
		CertFile: filepath.Join(pki, manifests.EtcdServer+".crt"), KeyFile: filepath.Join(pki, manifests.EtcdServer+".key"),
		TrustedCAFile: member.CAFile, ClientCertAuth: true,
	}
	clientTLS := &transport.TLSInfo{CertFile: member.CertFile, KeyFile: member.KeyFile, TrustedCAFile: member.CAFile}

	work := t.TempDir()
	endpoint := startEtcd(t, member.Name, filepath.Join(work, "etcd"), serverTLS)
	cli := newClient(t, endpoint, clientTLS)
	ctx := context.Background()
	const prefix = "/registry/configmaps/snap/"
	put := func(names ...string) int64 {
		var rev int64
		for _, n := range names {
			resp, err := cli.Put(ctx, prefix+n, "value of "+n)
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		return rev
	}
	rev := put("a", "b", "c")

	snap := filepath.Join(work, "snap.db")
	res, err := Save(ctx, Client{Endpoint: endpoint, CAFile: member.CAFile, CertFile: member.CertFile, KeyFile: member.KeyFile}, snap)
	if err != nil {
		t.Fatal(err)
	}
	put("d", "e")
	if _, err := cli.Delete(ctx, prefix+"a"); err != nil {
		t.Fatal(err)
	}

	if res.Revision != rev || res.TotalKey < 3 || res.TotalSize <= 0 || res.Path != snap || res.Endpoint != endpoint || res.ServerVersion == "" || res.Hash == 0 {
		t.Errorf("Save = %+v, want revision %d, at least 3 keys", res, rev)
	}
	if _, err := os.Stat(snap + ".part"); !os.IsNotExist(err) {
		t.Errorf("%s.part left behind: %v", snap, err)
	}
	if err := VerifyChecksum(snap); err != nil {
		t.Error(err)
	}
	if fi, err := os.Stat(snap); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("snapshot file: %v, %v: want mode 0600 (it holds every Secret)", fi, err)
	}

	restored := filepath.Join(work, "restored", "etcd")
	m := Member{Name: member.Name, PeerURLs: member.PeerURLs, InitialCluster: member.InitialCluster}
	st, err := Restore(snap, restored, m)
	if err != nil {
		t.Fatal(err)
	}
	if st != res.Status {
		t.Errorf("Restore's status %+v, Save's %+v", st, res.Status)
	}
	if left, _ := filepath.Glob(filepath.Join(work, "restored", ".*")); len(left) > 0 {
		t.Errorf("restore left %v", left)
	}
	if _, err := Restore(snap, restored, m); err == nil || !strings.Contains(err.Error(), "exists and is not empty") {
		t.Errorf("second restore into %s: %v", restored, err)
	}

	// An existing empty data dir (a fresh volume's mount point, which
	// rename(2) cannot replace) is filled in place.
	emptyDir := filepath.Join(work, "volume")
	if err := os.Mkdir(emptyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(snap, emptyDir, m); err != nil {
		t.Fatalf("restore into the empty %s: %v", emptyDir, err)
	}
	if ents, err := os.ReadDir(emptyDir); err != nil || len(ents) != 1 || ents[0].Name() != "member" {
		t.Errorf("restore into the empty %s left %v (%v), want only member/", emptyDir, ents, err)
	}
	if _, err := os.Stat(filepath.Join(emptyDir, "member", "snap", "db")); err != nil {
		t.Errorf("restore into the empty %s: %v", emptyDir, err)
	}

	// The restored member has render's peer URL (192.0.2.10:2380) in its
	// membership; a member restarting on its data takes that from the data
	// and only listens where it is told, which is what lets this test (and
	// an operator checking a restore) open it on loopback ports.
	got := keys(t, newClient(t, startEtcd(t, member.Name, restored, nil), nil), prefix)
	if want := []string{prefix + "a", prefix + "b", prefix + "c"}; !slices.Equal(got, want) {
		t.Errorf("restored keys %v, want %v", got, want)
	}
}

func TestSaveErrorsNameTheCause(t *testing.T) {
	_, member := rendered(t)
	dir := t.TempDir()
	closed := fmt.Sprintf("https://127.0.0.1:%d", freePorts(t, 1)[0])
	good := Client{Endpoint: closed, CAFile: member.CAFile, CertFile: member.CertFile, KeyFile: member.KeyFile, DialTimeout: 2 * time.Second}
	for _, tc := range []struct {
		name   string
		c      Client
		path   string
		wants  []string
		noPart bool
	}{
		{"nothing listens", good, filepath.Join(dir, "s.db"), []string{"cannot reach etcd at " + closed, "connection refused"}, true},
		{"no such directory", good, filepath.Join(dir, "nope", "s.db"), []string{"its directory " + filepath.Join(dir, "nope") + " does not exist"}, true},
		{"missing CA", Client{Endpoint: closed, CAFile: filepath.Join(dir, "ca.crt"), CertFile: member.CertFile, KeyFile: member.KeyFile}, filepath.Join(dir, "s.db"),
			[]string{filepath.Join(dir, "ca.crt"), "no such file"}, true},
	} {
		_, err := Save(context.Background(), tc.c, tc.path)
		for _, w := range tc.wants {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want it to contain %q", tc.name, err, w)
			}
		}
		if _, err := os.Stat(tc.path + ".part"); !os.IsNotExist(err) {
			t.Errorf("%s: left %s.part", tc.name, tc.path)
		}
	}

	// A server whose certificate another CA signed: the handshake error,
	// not a bare deadline.
	other := t.TempDir()
	if err := manifests.Render(renderConfig("other"), other); err != nil {
		t.Fatal(err)
	}
	opki := filepath.Join(other, manifests.PKIDir)
	endpoint := startEtcd(t, "other", filepath.Join(dir, "etcd"), &transport.TLSInfo{
		CertFile: filepath.Join(opki, manifests.EtcdServer+".crt"), KeyFile: filepath.Join(opki, manifests.EtcdServer+".key"),
		TrustedCAFile: filepath.Join(opki, manifests.EtcdCA+".crt"), ClientCertAuth: true,
	})
	good.Endpoint = endpoint
	_, err := Save(context.Background(), good, filepath.Join(dir, "s.db"))
	if err == nil || !strings.Contains(err.Error(), "TLS handshake with etcd at "+endpoint) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("wrong CA: %v", err)
	}
}

func TestRestoreRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	m := Member{Name: "node1", PeerURLs: []string{"https://192.0.2.10:2380"}, InitialCluster: "node1=https://192.0.2.10:2380"}
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "full")
	if err := os.MkdirAll(filepath.Join(full, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, snap, data string
		m                Member
		want             string
	}{
		{"missing snapshot", filepath.Join(dir, "absent.db"), filepath.Join(dir, "new"), m, "absent.db: no such file"},
		{"not a snapshot", junk, filepath.Join(dir, "new"), m, "is not a readable etcd snapshot"},
		{"existing data dir", junk, full, m, "exists and is not empty"},
		{"bad member", junk, filepath.Join(dir, "new"), Member{Name: "node1", PeerURLs: m.PeerURLs, InitialCluster: "node2=https://192.0.2.10:2380"}, "has no member \"node1\""},
	} {
		_, err := Restore(tc.snap, tc.data, tc.m)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
			t.Errorf("%s: created the data dir", tc.name)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
		t.Errorf("left %v", left)
	}
}

func TestVerifyChecksum(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"short", make([]byte, 100), "does not end with etcd's sha256 digest"},
		{"wrong digest", make([]byte, 4096+32), "sha256 mismatch"},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := VerifyChecksum(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if renderDir != "" {
		os.RemoveAll(renderDir)
	}
	os.Exit(code)
}
