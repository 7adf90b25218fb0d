//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bootlet/bootlet/manifests"
)

// TestThreeMastersRenderedProcesses's addresses: three masters and the
// control-plane endpoint, added to lo by the test and removed (/32 each:
// reachable on this machine only, no route out). Each
// etcd member and apiserver binds its master's address only; the peer
// port is render's (2380) on those addresses, the others are moved off
// the host's control-plane ports, so it runs next to a node or a bench.
const (
	mastersVIP       = "10.250.91.10"
	mastersAPIPort   = 37443
	mastersEtcdPort  = 37379
	mastersEtcdMetrc = 37381
)

var mastersAddrs = []string{"10.250.91.11", "10.250.91.12", "10.250.91.13"}

// TestThreeMastersRenderedProcesses proves, without a kubelet, that the
// assets `bootlet render --master ×3 --control-plane-endpoint` writes make
// a working three-master control plane: each master's rendered etcd and
// kube-apiserver run as plain processes with the rendered flags (client and
// metrics ports moved, --etcd-servers the master's own member at its
// address instead of 127.0.0.1, which the three cannot share on one host).
// The three etcd members form one cluster from the rendered
// --initial-cluster and --initial-cluster-state=new (3 members, one
// leader); each apiserver serves /readyz with its master's certificate,
// which verifies for every master's IP and for the endpoint; a write
// through one apiserver is read through another; with master-3's etcd and
// apiserver killed, the other two still answer and still write (quorum 2
// of 3). It does not prove the kubelet's adoption, the pivot on three
// nodes, or the VIP (docs/cluster.md, "Three masters").
func TestThreeMastersRenderedProcesses(t *testing.T) {
	RequireRoot(t)
	dir := t.TempDir()
	addLocalAddresses(t, append([]string{mastersVIP}, mastersAddrs...))
	for _, a := range mastersAddrs {
		for _, p := range []int{2380, mastersEtcdPort, mastersEtcdMetrc, mastersAPIPort} {
			l, err := net.Listen("tcp", net.JoinHostPort(a, fmt.Sprint(p)))
			if err != nil {
				t.Fatalf("%s:%d is taken: %v", a, p, err)
			}
			l.Close()
		}
	}

	assets := filepath.Join(dir, "assets")
	args := []string{"render", "--asset-dir", assets, "--addons=", "--api-server-port", fmt.Sprint(mastersAPIPort),
		"--control-plane-endpoint", net.JoinHostPort(mastersVIP, fmt.Sprint(mastersAPIPort))}
	names := []string{"master-1", "master-2", "master-3"}
	for i, n := range names {
		args = append(args, "--master", n+"="+mastersAddrs[i])
	}
	start := time.Now()
	run(t, Bin(t, "bootlet"), args...)
	t.Logf("rendered three masters in %s", time.Since(start).Round(time.Millisecond))

	type master struct {
		name, addr, assets, etcdURL string
		stop                        []func()
	}
	var masters []*master
	for i, n := range names {
		m := &master{name: n, addr: mastersAddrs[i], assets: filepath.Join(assets, n),
			etcdURL: fmt.Sprintf("https://%s:%d", mastersAddrs[i], mastersEtcdPort)}
		logs := filepath.Join(dir, "logs", n)
		if err := os.MkdirAll(logs, 0o755); err != nil {
			t.Fatal(err)
		}
		// The rendered --name, --initial-cluster, --initial-cluster-state,
		// peer URLs and certificates are kept as they are. One change:
		// etcd checks that a peer's client certificate names the address
		// the connection comes from, and on one host the kernel gives a
		// connection to a local address that address as its source (a
		// member at .11 dialing .12 comes from .12), which no member's
		// certificate names but the callee's; on separate masters the
		// source is the caller's own address, which its certificate names.
		m.stop = append(m.stop, startRendered(t, m.assets, logs, manifests.Etcd, map[string]string{
			"listen-client-urls": m.etcdURL, "advertise-client-urls": m.etcdURL,
			"listen-metrics-urls":               fmt.Sprintf("http://%s:%d", m.addr, mastersEtcdMetrc),
			"data-dir":                          filepath.Join(dir, "etcd", n),
			"peer-skip-client-san-verification": "true",
		}))
		masters = append(masters, m)
	}
	for _, m := range masters {
		m.stop = append(m.stop, startRendered(t, m.assets, filepath.Join(dir, "logs", m.name), manifests.KubeAPIServer, map[string]string{
			"bind-address": m.addr, "etcd-servers": m.etcdURL,
		}))
	}

	etcd := func(t *testing.T, endpoints ...string) *clientv3.Client {
		t.Helper()
		pki := filepath.Join(masters[0].assets, manifests.PKIDir)
		tlsCfg, err := transport.TLSInfo{CertFile: filepath.Join(pki, manifests.EtcdHealthcheckClient+".crt"),
			KeyFile: filepath.Join(pki, manifests.EtcdHealthcheckClient+".key"), TrustedCAFile: filepath.Join(pki, manifests.EtcdCA+".crt")}.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, TLS: tlsCfg, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cli
	}
	// requireLeader: the cluster has the three members, and every live
	// member reports the same leader, one of them.
	requireLeader := func(t *testing.T, live []*master) {
		t.Helper()
		var eps []string
		for _, m := range live {
			eps = append(eps, m.etcdURL)
		}
		cli := etcd(t, eps...)
		Eventually(t, 120*time.Second, func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			ml, err := cli.MemberList(ctx)
			if err != nil {
				return false, "member list: " + err.Error()
			}
			var ids []uint64
			var memberNames []string
			for _, mem := range ml.Members {
				ids = append(ids, mem.ID)
				memberNames = append(memberNames, mem.Name)
			}
			slices.Sort(memberNames)
			if !slices.Equal(memberNames, names) {
				return false, fmt.Sprintf("members %v", memberNames)
			}
			var leader uint64
			for _, ep := range eps {
				st, err := cli.Status(ctx, ep)
				if err != nil {
					return false, fmt.Sprintf("status of %s: %v", ep, err)
				}
				if st.Leader == 0 || !slices.Contains(ids, st.Leader) || (leader != 0 && st.Leader != leader) {
					return false, fmt.Sprintf("%s sees leader %x (members %x)", ep, st.Leader, ids)
				}
				leader = st.Leader
			}
			return true, ""
		})
	}
	t.Run("etcd has three members and a leader", func(t *testing.T) { requireLeader(t, masters) })

	caPEM, err := os.ReadFile(filepath.Join(masters[0].assets, manifests.PKIDir, manifests.CA+".crt"))
	if err != nil {
		t.Fatal(err)
	}
	// client is admin.conf (which names the endpoint) sent to master m's
	// apiserver, verifying its certificate as serverName.
	client := func(t *testing.T, m *master, serverName string) *kubernetes.Clientset {
		t.Helper()
		cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(m.assets, manifests.AdminKubeconfig))
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("https://%s:%d", mastersVIP, mastersAPIPort); cfg.Host != want {
			t.Fatalf("%s: admin.conf names %s, want %s", m.name, cfg.Host, want)
		}
		cfg.Host = fmt.Sprintf("https://%s:%d", m.addr, mastersAPIPort)
		cfg.TLSClientConfig.ServerName = serverName
		cfg.Timeout = 5 * time.Second
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	readyz := func(t *testing.T, m *master) {
		t.Helper()
		cs := client(t, m, mastersVIP)
		Eventually(t, 120*time.Second, func() (bool, string) {
			body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
			return err == nil && string(body) == "ok", fmt.Sprintf("%s /readyz: %v %s (log: %s)", m.name, err, body,
				logTail(filepath.Join(dir, "logs", m.name, "kube-apiserver.log")))
		})
	}
	t.Run("every apiserver is ready", func(t *testing.T) {
		for _, m := range masters {
			readyz(t, m)
		}
	})
	t.Run("every serving certificate verifies for every master and the endpoint", func(t *testing.T) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		for _, m := range masters {
			for _, name := range append([]string{mastersVIP}, append(slices.Clone(mastersAddrs), names...)...) {
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(m.addr, fmt.Sprint(mastersAPIPort)),
					&tls.Config{RootCAs: pool, ServerName: name})
				if err != nil {
					t.Errorf("%s's apiserver as %s: %v", m.name, name, err)
					continue
				}
				conn.Close()
			}
		}
	})

	ctx := context.Background()
	// writeRead creates a ConfigMap through from and reads it through to.
	writeRead := func(t *testing.T, from, to *master, name string) {
		t.Helper()
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}, Data: map[string]string{"from": from.name}}
		if _, err := client(t, from, mastersVIP).CoreV1().ConfigMaps(metav1.NamespaceDefault).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create through %s: %v", from.name, err)
		}
		got, err := client(t, to, to.addr).CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, name, metav1.GetOptions{})
		if err != nil || got.Data["from"] != from.name {
			t.Fatalf("read through %s: %v %v", to.name, err, got)
		}
	}
	t.Run("a write through one master is read through another", func(t *testing.T) {
		writeRead(t, masters[0], masters[1], "written-on-master-1")
		writeRead(t, masters[2], masters[0], "written-on-master-3")
	})

	t.Run("two masters keep serving without the third", func(t *testing.T) {
		for i := len(masters[2].stop) - 1; i >= 0; i-- {
			masters[2].stop[i]()
		}
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(masters[2].addr, fmt.Sprint(mastersAPIPort)), time.Second); err == nil {
			c.Close()
			t.Fatal("master-3's apiserver still accepts connections")
		}
		// Still three members, of which two answer: quorum.
		requireLeader(t, masters[:2])
		for _, m := range masters[:2] {
			readyz(t, m)
		}
		writeRead(t, masters[1], masters[0], "written-without-master-3")
	})
}

// addLocalAddresses adds each address as a /32 to lo (this kernel may have
// no dummy interfaces): local to this machine, not loopback addresses to
// render's validation (which refuses 127.0.0.0/8), skipped by bootlet's
// node IP (runner.NodeIPs skips loopback interfaces). Each is removed at
// the end of the test; one already there fails the test.
func addLocalAddresses(t *testing.T, addrs []string) {
	t.Helper()
	for _, a := range addrs {
		if out, err := exec.Command("ip", "addr", "add", a+"/32", "dev", "lo").CombinedOutput(); err != nil {
			t.Fatalf("ip addr add %s/32 dev lo: %v\n%s", a, err, out)
		}
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "addr", "del", a+"/32", "dev", "lo").CombinedOutput(); err != nil {
				t.Errorf("ip addr del %s/32 dev lo: %v\n%s", a, err, out)
			}
		})
	}
}
