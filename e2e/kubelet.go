//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"maps"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"github.com/bootlet/bootlet/e2e/nodes"
	"github.com/bootlet/bootlet/manifests"
)

// Kubelet is the real kubelet (v1.36.3, _output/bin/kubelet) run standalone
// (no apiserver, no --kubeconfig) against a test's private containerd, with
// static pods only. It uses the same node name and pod log directory as
// StartBootlet, so the CRI objects of both can be compared field by field.
type Kubelet struct {
	Ctrd        *Containerd
	RootDir     string // --root-dir
	ManifestDir string // staticPodPath
	LogDir      string // podLogsDirectory, the same as Bootlet.LogDir
	ConfigPath  string
	NodeName    string
	Kubeconfig  string // --kubeconfig when set (UseAPIServer in pivot.go); standalone otherwise
	Port        int
	HealthzPort int
	// ClientCert and ClientKey are a client certificate its API accepts:
	// one of the framework's own client CA for a standalone kubelet, the
	// apiserver's kubelet client (render's) with UseAPIServer.
	ClientCert, ClientKey string
	// ClusterDNS and ClusterDomain go into its configuration (the DNS the
	// add-ons' CoreDNS serves); set them before UseAPIServer.
	ClusterDNS    []string
	ClusterDomain string
	// Binary is the kubelet to run; empty: _output/bin/kubelet, this
	// version's. An upgrade test sets the next version's.
	Binary string
	// unit, when set, is the KubeletUnit the upgrade's node agent
	// restarts it through (AsUnit).
	unit    *KubeletUnit
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	started int
	sysctls map[string]string
}

// kubeletSysctls are the kernel tunables the kubelet's container manager
// rewrites at start (setupKernelTunables with protectKernelDefaults=false:
// vm.overcommit_memory=1, kernel.panic=10, kernel.panic_on_oops=1).
// protectKernelDefaults=true would make the kubelet refuse to start on this
// VM instead, so the helper saves them before the kubelet starts and puts
// them back when it stops: a test must not leave the host panicking on oops.
//
// The last four are kube-proxy's, a pod this kubelet runs (its conntrack
// settings, and route_localnet for NodePorts on localhost): a test must
// leave the host's network as it found it. (Seen once: with a make up's
// left in place, the pivot and lifecycle tests each had one probe request
// over its 1 s timeout, and none after they were put back; with the
// machine loaded the same single failure shows without them, so that is
// not proven to be their effect.)
var kubeletSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops",
	"net/ipv4/conf/all/route_localnet", "net/netfilter/nf_conntrack_max",
	"net/netfilter/nf_conntrack_tcp_timeout_established", "net/netfilter/nf_conntrack_tcp_timeout_close_wait"}

// writeConfig writes the kubelet's configuration, from the one generator
// (manifests.KubeletConfiguration, which `bootlet render` also writes make
// up's with): standalone (no apiserver) or registered, trusting the client
// certificates of clientCA only.
//
// The harness lays one thing over it, this machine's disk thresholds
// (nodes.MachineEvictionHard, image GC at 98%): the disk is the one file
// system the Go build cache and every test's images share, which leaves
// the kubelet 10 to 20% available, around its imagefs eviction threshold
// (15%) and its image GC's 85% used. At the defaults, a kubelet there
// refuses the test's pods for disk pressure, and collects the images a
// test tags with ctr (bootlet's imports are pinned) and cannot pull again.
// Local storage isolation stays on (TestSecurityTenant tests it), and the
// shipped configuration keeps the kubelet's defaults: TestSystemdBoot runs
// the node as shipped.
func (k *Kubelet) writeConfig(t testing.TB, standalone bool, clientCA string) {
	t.Helper()
	cfg, err := manifests.KubeletConfiguration(manifests.KubeletOptions{StaticPodPath: k.ManifestDir,
		ContainerRuntimeEndpoint: k.Ctrd.Endpoint(), PodLogsDir: k.LogDir, Port: int32(k.Port), HealthzPort: int32(k.HealthzPort),
		ClientCAFile: clientCA, Standalone: standalone, ClusterDNS: k.ClusterDNS, ClusterDomain: k.ClusterDomain})
	if err != nil {
		t.Fatal(err)
	}
	cfg.EvictionHard = maps.Clone(nodes.MachineEvictionHard)
	cfg.ImageGCHighThresholdPercent, cfg.ImageGCLowThresholdPercent = ptr.To(nodes.MachineImageGCHigh), ptr.To(nodes.MachineImageGCLow)
	data, err := manifests.MarshalKubeletConfiguration(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(k.ConfigPath, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// standaloneClientPKI makes a client CA of the test's own for a standalone
// kubelet (no apiserver, so no webhook: it trusts this CA's certificates
// and nothing else), and one client certificate of it. It returns the CA's
// file and the certificate's and key's.
func standaloneClientPKI(t testing.TB, dir string) (ca, cert, key string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	caKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: "e2e-kubelet-client-ca"}, caKey)
	if err != nil {
		t.Fatal(err)
	}
	clientKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, clientKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, cert, key = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(clientKey)
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string][]byte{
		ca:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}),
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:  keyPEM,
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca, cert, key
}

// NewKubelet prepares (but does not start) a kubelet for c: root dir
// c.Dir/kubelet, staticPodPath c.Dir/kubelet-manifests, pod logs in
// c.Dir/pod-logs (bootlet's --pod-log-dir in StartBootlet), node e2e-node.
// It is standalone (see manifests.KubeletOptions.Standalone): its API
// listens on 127.0.0.1 only and takes only client certificates of a CA of
// the test's own (ClientCert), no anonymous request.
func NewKubelet(t testing.TB, c *Containerd) *Kubelet {
	t.Helper()
	k := &Kubelet{Ctrd: c, RootDir: filepath.Join(c.Dir, "kubelet"), ManifestDir: filepath.Join(c.Dir, "kubelet-manifests"),
		LogDir: filepath.Join(c.Dir, "pod-logs"), ConfigPath: filepath.Join(c.Dir, "kubelet-config.yaml"), NodeName: "e2e-node",
		Port: FreePort(t), HealthzPort: FreePort(t)}
	for _, d := range []string{k.RootDir, k.ManifestDir, k.LogDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ca, cert, key := standaloneClientPKI(t, filepath.Join(c.Dir, "kubelet-client-pki"))
	k.ClientCert, k.ClientKey = cert, key
	k.writeConfig(t, true, ca)
	return k
}

// StartKubelet prepares and starts a kubelet on c and registers its stop.
func StartKubelet(t testing.TB, c *Containerd) *Kubelet {
	t.Helper()
	k := NewKubelet(t, c)
	k.Start(t)
	t.Cleanup(k.Stop)
	return k
}

// Args are the kubelet's command-line flags (everything else is in the
// config file).
func (k *Kubelet) Args() []string {
	args := []string{"--config", k.ConfigPath, "--root-dir", k.RootDir, "--hostname-override", k.NodeName,
		"--cert-dir", filepath.Join(k.RootDir, "pki"), "-v=2"}
	if k.Kubeconfig != "" {
		args = append(args, "--kubeconfig", k.Kubeconfig)
	}
	return args
}

// Start runs the kubelet and waits until its healthz answers ok.
func (k *Kubelet) Start(t testing.TB) {
	t.Helper()
	k.Spawn(t)
	k.WaitHealthy(t, 60*time.Second)
}

// Spawn runs the kubelet and does not wait for it, as a supervisor
// (systemd's Restart=always) does.
func (k *Kubelet) Spawn(t testing.TB) {
	t.Helper()
	if err := k.spawn(); err != nil {
		t.Fatal(err)
	}
}

// spawn is Spawn, for a supervisor that must not end the test (KubeletUnit).
func (k *Kubelet) spawn() error {
	k.started++
	if k.sysctls == nil {
		k.sysctls = map[string]string{}
		for _, name := range kubeletSysctls {
			if b, err := os.ReadFile(filepath.Join("/proc/sys", name)); err == nil {
				k.sysctls[name] = string(b)
			}
		}
	}
	k.logPath = filepath.Join(k.Ctrd.Dir, fmt.Sprintf("kubelet-%d.log", k.started))
	logf, err := os.Create(k.logPath)
	if err != nil {
		return err
	}
	bin := k.Binary
	if bin == "" {
		bin = filepath.Join(Repo, "_output", "bin", "kubelet")
	}
	k.cmd = exec.Command(bin, k.Args()...)
	k.cmd.Stdout, k.cmd.Stderr = logf, logf
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := k.cmd.Start(); err != nil {
		return err
	}
	k.exited = make(chan struct{})
	go func(cmd *exec.Cmd, f *os.File, done chan struct{}) { _ = cmd.Wait(); f.Close(); close(done) }(k.cmd, logf, k.exited)
	return nil
}

// WaitHealthy waits until the running kubelet's healthz answers ok; its
// exit fails t.
func (k *Kubelet) WaitHealthy(t testing.TB, timeout time.Duration) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort)
	Eventually(t, timeout, func() (bool, string) {
		select {
		case <-k.exited:
			return false, "kubelet exited:\n" + k.Log()
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false, fmt.Sprintf("kubelet healthz: %v\n%s", err, k.Log())
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("kubelet healthz: %s\n%s", resp.Status, k.Log())
	})
	select {
	case <-k.exited:
		t.Fatalf("kubelet exited right after start:\n%s", k.Log())
	default:
	}
}

// Stop stops the kubelet (SIGTERM, then SIGKILL after 10s). Its pods keep
// running in the runtime.
func (k *Kubelet) Stop() {
	if k.cmd != nil && k.cmd.Process != nil {
		_ = k.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-k.exited:
		case <-time.After(10 * time.Second):
			_ = k.cmd.Process.Kill()
			<-k.exited
		}
		k.cmd = nil
	}
	// The kubelet's log manager also links every container log into the
	// hard-coded /var/log/containers; drop the links into our pod log dir.
	links, _ := filepath.Glob("/var/log/containers/*.log")
	for _, l := range links {
		if dst, err := os.Readlink(l); err == nil && strings.HasPrefix(dst, k.LogDir+"/") {
			_ = os.Remove(l)
		}
	}
	for name, v := range k.sysctls {
		_ = os.WriteFile(filepath.Join("/proc/sys", name), []byte(v), 0o644)
	}
}

// Exited reports whether the kubelet was started and its process has
// ended since (a crash, or a start that failed).
func (k *Kubelet) Exited() bool {
	if k.cmd == nil || k.exited == nil {
		return false
	}
	select {
	case <-k.exited:
		return true
	default:
		return false
	}
}

// Kill9 kills the kubelet with SIGKILL and reaps it, as a crash would: its
// pods keep running and the host's sysctls stay as it set them (Stop puts
// them back at the end).
func (k *Kubelet) Kill9() {
	if k.cmd == nil || k.cmd.Process == nil {
		return
	}
	_ = k.cmd.Process.Kill()
	<-k.exited
	k.cmd = nil
}

// APIClient is an HTTPS client for the kubelet's API (port Port) with its
// ClientCert; the kubelet's serving certificate is self-signed.
func (k *Kubelet) APIClient(t testing.TB) *http.Client {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(k.ClientCert, k.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{ //nolint:gosec // the kubelet's self-signed serving cert on 127.0.0.1
		InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}}}}
}

// PID is the running kubelet's process id (0 when it is not running).
func (k *Kubelet) PID() int {
	if k.cmd == nil || k.cmd.Process == nil {
		return 0
	}
	return k.cmd.Process.Pid
}

// Log returns the tail of the kubelet's current log.
func (k *Kubelet) Log() string {
	data, _ := os.ReadFile(k.logPath)
	if len(data) > 8000 {
		data = data[len(data)-8000:]
	}
	return string(data)
}

// LogPath is the file the current kubelet process logs to.
func (k *Kubelet) LogPath() string { return k.logPath }

// WriteManifest writes a static pod file atomically (temp file + rename, so
// the kubelet never reads half a file) and returns its path.
func (k *Kubelet) WriteManifest(t testing.TB, name, manifest string) string {
	t.Helper()
	p := filepath.Join(k.ManifestDir, name+".yaml")
	tmp := filepath.Join(k.ManifestDir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// RemoveManifests deletes every static pod file.
func (k *Kubelet) RemoveManifests(t testing.TB) {
	t.Helper()
	entries, err := os.ReadDir(k.ManifestDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(k.ManifestDir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// WaitRunningCRI waits until, for every pod UID in want, at least want[uid]
// containers of that pod are CONTAINER_RUNNING in the runtime.
func WaitRunningCRI(t testing.TB, c *Containerd, timeout time.Duration, want map[string]int, logs func() string) {
	t.Helper()
	Eventually(t, timeout, func() (bool, string) {
		cs, err := c.RT.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
		if err != nil {
			return false, err.Error()
		}
		running := map[string]int{}
		for _, ct := range cs {
			running[ct.Labels["io.kubernetes.pod.uid"]]++
		}
		var missing []string
		for uid, n := range want {
			if running[uid] < n {
				missing = append(missing, fmt.Sprintf("%s (%d/%d running)", uid, running[uid], n))
			}
		}
		msg := "pods not running in CRI: " + strings.Join(missing, ", ")
		if len(missing) > 0 && logs != nil {
			msg += "\n" + logs()
		}
		return len(missing) == 0, msg
	})
}

// RemoveAllPods stops and removes every sandbox (and so every container) in
// the runtime, the way `crictl rmp -fa` does.
func RemoveAllPods(t testing.TB, c *Containerd) {
	t.Helper()
	ctx := context.Background()
	sbs, err := c.RT.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		if err := c.RT.StopPodSandbox(ctx, sb.Id); err != nil {
			t.Fatalf("StopPodSandbox %s: %v", sb.Id, err)
		}
		if err := c.RT.RemovePodSandbox(ctx, sb.Id); err != nil {
			t.Fatalf("RemovePodSandbox %s: %v", sb.Id, err)
		}
	}
	Eventually(t, 30*time.Second, func() (bool, string) {
		sbs, err := c.RT.ListPodSandbox(ctx, nil)
		if err != nil {
			return false, err.Error()
		}
		cs, err := c.RT.ListContainers(ctx, nil)
		if err != nil {
			return false, err.Error()
		}
		return len(sbs) == 0 && len(cs) == 0, fmt.Sprintf("%d sandboxes and %d containers left", len(sbs), len(cs))
	})
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
