package etcd

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/bootlet/bootlet/cmd/internal/clitest"
	"github.com/bootlet/bootlet/etcdsnapshot"
	"github.com/bootlet/bootlet/manifests"
)

var renderedMember = manifests.EtcdMember{
	Name: "node1", PeerURLs: []string{"https://192.0.2.10:2380"}, InitialCluster: "node1=https://192.0.2.10:2380",
	DataDir: "/var/lib/etcd", ClientURL: "https://127.0.0.1:2379",
	CAFile: "/a/pki/etcd/ca.crt", CertFile: "/a/pki/etcd/healthcheck-client.crt", KeyFile: "/a/pki/etcd/healthcheck-client.key",
}

// fakeLoad serves renderedMember for /a and counts its calls.
func fakeLoad(calls *int) loadMember {
	return func(dir string) (manifests.EtcdMember, error) {
		*calls++
		if dir != "/a" {
			return manifests.EtcdMember{}, errors.New("reading the rendered etcd pod: no such file")
		}
		return renderedMember, nil
	}
}

func TestSaveClient(t *testing.T) {
	all := etcdSaveFlags{assetDir: "/nowhere", endpoints: "https://10.0.0.1:2379", cacert: "ca", cert: "c", key: "k"}
	for _, tc := range []struct {
		name      string
		f         etcdSaveFlags
		want      etcdsnapshot.Client
		wantErr   string
		wantLoads int
	}{
		{"all from the rendered pod", etcdSaveFlags{assetDir: "/a", dialTimeout: time.Second}, etcdsnapshot.Client{
			Endpoint: "https://127.0.0.1:2379", CAFile: renderedMember.CAFile, CertFile: renderedMember.CertFile, KeyFile: renderedMember.KeyFile, DialTimeout: time.Second,
		}, "", 1},
		{"endpoint overridden", etcdSaveFlags{assetDir: "/a", endpoints: "https://192.0.2.10:2379"}, etcdsnapshot.Client{
			Endpoint: "https://192.0.2.10:2379", CAFile: renderedMember.CAFile, CertFile: renderedMember.CertFile, KeyFile: renderedMember.KeyFile,
		}, "", 1},
		{"everything given: no asset dir read", all, etcdsnapshot.Client{Endpoint: all.endpoints, CAFile: "ca", CertFile: "c", KeyFile: "k"}, "", 0},
		{"two endpoints", etcdSaveFlags{assetDir: "/a", endpoints: "https://a:2379,https://b:2379"}, etcdsnapshot.Client{}, "give one endpoint", 0},
		{"no asset dir", etcdSaveFlags{assetDir: "/b"}, etcdsnapshot.Client{}, "no such file; or give --endpoints, --cacert, --cert and --key", 1},
		{"bad endpoint", etcdSaveFlags{assetDir: "/a", endpoints: "127.0.0.1:2379"}, etcdsnapshot.Client{}, "want an http:// or https:// URL", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var loads int
			got, err := saveClient(tc.f, fakeLoad(&loads))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
			} else if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("saveClient = %+v, %v\nwant %+v", got, err, tc.want)
			}
			if loads != tc.wantLoads {
				t.Errorf("read the asset dir %d times, want %d", loads, tc.wantLoads)
			}
		})
	}
}

func TestRestoreMember(t *testing.T) {
	rendered := etcdsnapshot.Member{Name: "node1", PeerURLs: []string{"https://192.0.2.10:2380"}, InitialCluster: "node1=https://192.0.2.10:2380"}
	for _, tc := range []struct {
		name        string
		f           etcdRestoreFlags
		want        etcdsnapshot.Member
		wantDataDir string
		wantErr     string
	}{
		{"the rendered member", etcdRestoreFlags{assetDir: "/a"}, rendered, "/var/lib/etcd", ""},
		{"everything given", etcdRestoreFlags{assetDir: "/b", name: "m", initialCluster: "m=https://10.0.0.1:2380", peerURLs: "https://10.0.0.1:2380"},
			etcdsnapshot.Member{Name: "m", PeerURLs: []string{"https://10.0.0.1:2380"}, InitialCluster: "m=https://10.0.0.1:2380"}, "", ""},
		{"a name that is not the rendered cluster's", etcdRestoreFlags{assetDir: "/a", name: "node2"}, etcdsnapshot.Member{}, "",
			`etcd member: initial cluster "node1=https://192.0.2.10:2380" has no member "node2"`},
		{"a peer URL that drifted", etcdRestoreFlags{assetDir: "/a", peerURLs: "https://192.0.2.11:2380"}, etcdsnapshot.Member{}, "", "but its peer URLs are [https://192.0.2.11:2380]"},
		{"no asset dir", etcdRestoreFlags{assetDir: "/b"}, etcdsnapshot.Member{}, "", "or give --name, --initial-cluster and --initial-advertise-peer-urls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var loads int
			got, dataDir, err := restoreMember(tc.f, fakeLoad(&loads))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) || dataDir != tc.wantDataDir {
				t.Errorf("restoreMember = %+v, %q, %v\nwant %+v, %q", got, dataDir, err, tc.want, tc.wantDataDir)
			}
		})
	}
}

func TestEtcdSnapshotCLIErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "full", "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"etcd", "snapshot", "restore", filepath.Join(dir, "s.db")}, "--data-dir is required"},
		{[]string{"etcd", "snapshot", "restore", filepath.Join(dir, "s.db"), "--data-dir", filepath.Join(dir, "new"), "--asset-dir", dir},
			"is " + dir + " the --asset-dir of `bootlet render`?"},
		{[]string{"etcd", "snapshot", "restore", filepath.Join(dir, "s.db"), "--data-dir", filepath.Join(dir, "new"),
			"--name", "n", "--initial-cluster", "n=https://10.0.0.1:2380", "--initial-advertise-peer-urls", "https://10.0.0.1:2380"}, "s.db: no such file"},
		{[]string{"etcd", "snapshot", "save", filepath.Join(dir, "s.db"), "--asset-dir", dir}, "or give --endpoints, --cacert, --cert and --key"},
		{[]string{"etcd", "snapshot", "save"}, "accepts 1 arg(s)"},
	} {
		_, err := runRoot(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bootlet %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// runRoot runs args as bootlet would, with this package's verbs.
func runRoot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return clitest.Run(t, func(*string) []*cobra.Command { return []*cobra.Command{NewCommand()} }, args...)
}
