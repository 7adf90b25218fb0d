//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Control-plane helpers shared by TestControlPlane and the bootstrap bench
// (e2e/bench/bootstrap.go): ports, images, `bootlet render`, admin client.

// ControlPlanePorts are the host ports the bootstrap pods listen on
// (hostNetwork, as kubeadm's static pods): kube-apiserver, etcd client, peer
// and metrics, kube-controller-manager and kube-scheduler secure ports.
var ControlPlanePorts = []int{6443, 2379, 2380, 2381, 10257, 10259}

// ControlPlanePods are the bootstrap pods `bootlet render` writes.
var ControlPlanePods = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// RequirePortsFree fails the test, naming the holder, when one of ports is
// taken: a control plane that cannot bind would otherwise only show up as a
// crash-looping pod minutes later.
func RequirePortsFree(t testing.TB, ports []int) {
	t.Helper()
	var taken []string
	for _, p := range ports {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", p))
		if err != nil {
			holder, _ := exec.Command("ss", "-Hltnp", fmt.Sprintf("sport = :%d", p)).CombinedOutput()
			taken = append(taken, fmt.Sprintf("port %d: %v %s", p, err, strings.TrimSpace(string(holder))))
			continue
		}
		l.Close()
	}
	if len(taken) > 0 {
		t.Fatalf("the control plane needs host ports %v, but some are taken (a `make up` cluster, another "+
			"kubernetes or an earlier run's leftovers; stop them first):\n%s", ports, strings.Join(taken, "\n"))
	}
}

// AdvertiseAddress is the host's IPv4 address on its default route (what
// kubeadm picks): connecting a UDP socket sends nothing.
func AdvertiseAddress(t testing.TB) string {
	t.Helper()
	conn, err := net.Dial("udp4", "192.0.2.255:9")
	if err != nil {
		t.Fatalf("no IPv4 default route to take an advertise address from: %v", err)
	}
	defer conn.Close()
	return conn.LocalAddr().(*net.UDPAddr).IP.String()
}

// ImportControlPlaneImages imports _output/images/control-plane/*.tar into c
// (StartContainerd imports only the small images every test needs).
func ImportControlPlaneImages(t testing.TB, c *Containerd) time.Duration {
	t.Helper()
	return importImageDir(t, c, "control-plane", 5)
}

// ImportAddonImages imports _output/images/addons/*.tar (flannel and its
// CNI plugin, kube-proxy, CoreDNS) into c.
func ImportAddonImages(t testing.TB, c *Containerd) time.Duration {
	t.Helper()
	return importImageDir(t, c, "addons", 4)
}

// importImageDir imports the archives of _output/images/SUB (at least want
// of them) into c with `bootlet images import`, and says how long it took.
func importImageDir(t testing.TB, c *Containerd, sub string, want int) time.Duration {
	t.Helper()
	dir := filepath.Join(Repo, "_output", "images", sub)
	if files, _ := filepath.Glob(filepath.Join(dir, "*.tar")); len(files) < want {
		t.Fatalf("%s holds %d archives, want %d: run `make images`", dir, len(files), want)
	}
	start := time.Now()
	run(t, Bin(t, "bootlet"), "images", "import", "--address", c.Socket, dir)
	return time.Since(start)
}

// RenderControlPlane runs `bootlet render` into dir with etcd's data in
// etcdDir and returns dir. The control plane alone: with no extra flags,
// --addons is empty, since the add-ons' pod network would take the host's
// CNI directories and devices (StartAddonsNode renders them).
func RenderControlPlane(t testing.TB, dir, etcdDir, nodeName, address string, extra ...string) string {
	t.Helper()
	args := []string{"render", "--asset-dir", dir, "--node-name", nodeName, "--advertise-address", address, "--etcd-data-dir", etcdDir}
	if len(extra) == 0 {
		extra = []string{"--addons="}
	}
	run(t, Bin(t, "bootlet"), append(args, extra...)...)
	for _, p := range ControlPlanePods {
		if _, err := os.Stat(filepath.Join(dir, "bootstrap-manifests", p+".yaml")); err != nil {
			t.Fatalf("bootlet render wrote no %s bootstrap pod: %v", p, err)
		}
	}
	return dir
}

// AdminClient is a clientset for the rendered admin.conf.
func AdminClient(t testing.TB, assets string) *kubernetes.Clientset {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(assets, "admin.conf"))
	if err != nil {
		t.Fatalf("admin.conf: %v", err)
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// StartControlPlaneNode starts a private containerd with the control-plane
// images imported, a kubelet on it (stopped at the end of the test), and
// renders the control plane's assets for that node; the kubelet then uses
// the rendered apiserver. It returns render's assets directory.
func StartControlPlaneNode(t testing.TB) (*Containerd, *Kubelet, string) {
	t.Helper()
	c := StartContainerd(t)
	t.Logf("imported the control-plane images in %s", ImportControlPlaneImages(t, c).Round(time.Millisecond))
	k := NewKubelet(t, c)
	t.Cleanup(k.Stop)
	assets := RenderControlPlane(t, filepath.Join(c.Dir, "assets"), filepath.Join(c.Dir, "etcd"), k.NodeName, AdvertiseAddress(t))
	k.UseAPIServer(t, filepath.Join(assets, "kubelet.conf"))
	return c, k, assets
}

// The add-ons node's networks: render's defaults, as make up's.
const (
	AddonsPodCIDR     = "10.244.0.0/16"
	AddonsServiceCIDR = "10.96.0.0/12"
	AddonsDNSIP       = "10.96.0.10"
)

// StartAddonsNode is StartControlPlaneNode for a cluster with the add-ons,
// as make up makes it: containerd's pod network is the flannel add-on's
// (StartContainerdCNI), the add-on images are imported, render writes
// flannel, kube-proxy and CoreDNS with the instance's CNI directories and
// flannel's run dir under c.Dir, and the kubelet's cluster DNS is
// kube-dns's IP.
func StartAddonsNode(t testing.TB) (*Containerd, *Kubelet, string) {
	t.Helper()
	c := StartContainerdCNI(t, AddonsPodCIDR, AddonsServiceCIDR)
	t.Logf("imported the control-plane images in %s, the add-ons' in %s",
		ImportControlPlaneImages(t, c).Round(time.Millisecond), ImportAddonImages(t, c).Round(time.Millisecond))
	k := NewKubelet(t, c)
	t.Cleanup(k.Stop)
	k.ClusterDNS, k.ClusterDomain = []string{AddonsDNSIP}, "cluster.local"
	assets := RenderControlPlane(t, filepath.Join(c.Dir, "assets"), filepath.Join(c.Dir, "etcd"), k.NodeName, AdvertiseAddress(t),
		"--pod-cidr", AddonsPodCIDR, "--service-cidr", AddonsServiceCIDR,
		"--cni-bin-dir", c.CNIBinDir(), "--cni-conf-dir", c.CNIConfDir(), "--cni-data-dir", c.CNIDataDir(),
		"--flannel-run-dir", filepath.Join(c.State, "flannel"))
	k.UseAPIServer(t, filepath.Join(assets, "kubelet.conf"))
	return c, k, assets
}
