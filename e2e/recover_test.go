//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/bootlet/bootlet/noderecover/recoverlock"
	"github.com/bootlet/bootlet/pivot"
)

// TestRecover is `bootlet recover`, a master rebuilt from an etcd
// snapshot: a self-hosted master (as
// TestLifecycle's first boot, adoption and pivot) gets ConfigMaps A, a
// snapshot (`bootlet etcd snapshot save`), then ConfigMaps B. recover
// refuses while the node runs. The node then loses everything but the
// snapshot and render's pki/ and kubeconfigs: every process (SIGKILL, as a
// power loss), every pod and container, etcd's data dir, render's
// bootstrap-manifests/ and self-hosted/, bootlet's root (checkpoints, the
// pivot record), the kubelet's root and static pods. recover refuses
// without the bootstrap manifests; `bootlet render` with the same flags
// writes them again and keeps pki/ byte for byte; `bootlet recover
// --snapshot` restores the data. Started again in their boot order,
// bootlet runs the bootstrap pods, the kubelet adopts them and runs the
// self-hosted pods etcd holds, and the pivot hands back to those same
// objects (their UIDs are the snapshot's: nothing is created again). A
// exists, B does not, and the running containers are etcd's and the
// self-hosted pods' alone, one per pod. It binds fixed host ports: no t.Parallel.
func TestRecover(t *testing.T) {
	RequireRoot(t)
	RequirePortsFree(t, ControlPlanePorts)
	Bin(t, "bootlet-tools") // render, etcd snapshot and recover run it
	ctx := context.Background()
	testStart := time.Now()

	// A self-hosted master.
	c, k, assets := StartControlPlaneNode(t)
	etcdDir := filepath.Join(c.Dir, "etcd")
	// After bootlet's stop, before containerd's (cleanups run last first):
	// the kubelet's root dir is a bind mount bootlet made, which a daemon
	// killed by the wipe and never restarted (a failure) leaves behind.
	t.Cleanup(func() {
		unmountUnder(k.RootDir)
		for i := 0; i < 4 && syscall.Unmount(k.RootDir, syscall.MNT_DETACH) == nil; i++ {
		}
	})
	b := StartLifecycleBootlet(t, c, k, assets)
	admin := AdminClient(t, assets)
	waitAPIReadyz(t, admin, 5*time.Minute)
	uids := WaitControlPlaneReady(t, b)
	AdoptControlPlane(t, b, c, k, uids)
	WaitBootstrapWithdrawn(t, b, admin, pivoted)
	waitSelfHosted(t, admin, b, k.NodeName, time.Time{}, true, "", 3*time.Minute)
	if t.Failed() {
		t.FailNow()
	}
	selfHostedAt := time.Since(testStart)
	objUIDs := selfHostedObjectUIDs(t, admin)

	// ConfigMaps A, the snapshot, ConfigMaps B.
	const ns = "e2e-recover"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, bs := []string{"a-0", "a-1", "a-2"}, []string{"b-0", "b-1"}
	createConfigMaps(t, admin, ns, a)
	backup := filepath.Join(c.Dir, "backup")
	if err := os.MkdirAll(backup, 0o700); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(backup, "etcd.db")
	if out, err := exec.Command(Bin(t, "bootlet"), "etcd", "snapshot", "save", snap, "--asset-dir", assets).CombinedOutput(); err != nil {
		t.Fatalf("bootlet etcd snapshot save: %v\n%s", err, out)
	}
	createConfigMaps(t, admin, ns, bs)

	recoverArgs := []string{"recover", "--snapshot", snap, "--asset-dir", assets, "--root-dir", b.Dir,
		"--kubelet-static-pod-path", k.ManifestDir, "--kubelet-healthz-url", fmt.Sprintf("http://127.0.0.1:%d/healthz", k.HealthzPort),
		"--server", "unix://" + b.Socket}
	recoverCmd := func() (string, error) {
		out, err := exec.Command(Bin(t, "bootlet"), recoverArgs...).CombinedOutput()
		return string(out), err
	}
	// While the node runs, recover refuses and names each service.
	out, err := recoverCmd()
	for _, want := range []string{"recover refused", "a bootlet daemon runs on this root dir (lock " + b.Dir + ".lock held by pid", "bootlet at unix://" + b.Socket + " still answers", "etcd at https://127.0.0.1:2379 still answers", "the kubelet at http://127.0.0.1:"} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("recover on a running node: err %v, output lacks %q:\n%s", err, want, out)
		}
	}

	// Everything but the snapshot and pki/ and the kubeconfigs is lost.
	keep := assetDigest(t, assets)
	wipeNode(t, c, b, k, etcdDir, assets)

	// Without the bootstrap manifests recover refuses, naming them and
	// render.
	out, err = recoverCmd()
	if err == nil || !strings.Contains(out, filepath.Join(assets, "bootstrap-manifests", "kube-apiserver.yaml")+" is missing: run `bootlet render --asset-dir "+assets+"`") {
		t.Errorf("recover without the bootstrap manifests: err %v:\n%s", err, out)
	}
	RenderControlPlane(t, assets, etcdDir, k.NodeName, AdvertiseAddress(t))
	if got := assetDigest(t, assets); got != keep {
		t.Fatalf("render changed pki/ or a kubeconfig: the node's identity is not the snapshot's:\nbefore:\n%s\nafter:\n%s", keep, got)
	}
	recoverStart := time.Now()
	out, err = recoverCmd()
	recoverTook := time.Since(recoverStart)
	if err != nil {
		t.Fatalf("bootlet recover: %v\n%s", err, out)
	}
	t.Logf("bootlet recover (%s):\n%s", recoverTook.Round(time.Millisecond), out)
	if !strings.Contains(out, "restore into "+etcdDir) {
		t.Errorf("recover did not restore into %s", etcdDir)
	}

	// The boot order: containerd (running), bootlet, the kubelet.
	bootletStart := time.Now()
	b.Start(t)
	waitAPIReadyz(t, admin, 5*time.Minute)
	toReadyz := time.Since(bootletStart)
	WaitControlPlaneReady(t, b)
	// The scenario the pivot must not be fooled by: etcd holds the
	// self-hosted pods Running and Ready, as the snapshot had them, and
	// nothing of them runs.
	for _, comp := range pivoted {
		pods, err := selfHostedPods(ctx, admin, k.NodeName, comp)
		stale := 0
		for i := range pods {
			if Running(&pods[i]) && Ready(&pods[i]) {
				stale++
			}
		}
		if err != nil || stale == 0 {
			t.Errorf("before the kubelet's start, want %s's restored self-hosted pods Running and Ready in etcd: %v\n%s", comp, err, podsSummary(pods))
		}
	}
	kubeletStart := time.Now()
	k.Start(t)
	WaitBootstrapWithdrawn(t, b, admin, pivoted)
	// Fresh: Ready since bootlet's start, not a status from the snapshot.
	waitSelfHosted(t, admin, b, k.NodeName, bootletStart, true, "", 5*time.Minute)
	toSelfHosted := time.Since(bootletStart)
	if t.Failed() {
		t.FailNow()
	}
	// The record follows the pivot's next round.
	Eventually(t, 30*time.Second, func() (bool, string) {
		r, err := pivot.ReadDone(pivot.RecordPath(b.Dir))
		return err == nil && r != nil && len(r.Components) == len(pivoted), fmt.Sprintf("bootlet's record of the completed pivot after the recovery: %+v %v", r, err)
	})
	// Each withdrawal named a pod that ran on this node by then: a
	// container of it created before the withdrawal (a restored status
	// would have named a pod whose container the kubelet made later). The
	// kubelet rewrites the restored statuses before it adopts the bootstrap
	// pods here, so this holds with the pivot's process check disabled too
	// (docs/operations.md, "Recovery"): it is the property, not a test of
	// that check.
	for comp, w := range pivotWithdrawals(t, b) {
		p, err := admin.CoreV1().Pods("kube-system").Get(ctx, w.pod, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s was handed to %s at %s: %v", comp, w.pod, w.at.Format(time.RFC3339Nano), err)
			continue
		}
		cs, err := c.RT.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(p.UID)}})
		if err != nil {
			t.Fatal(err)
		}
		ran := false
		for _, ct := range cs {
			if time.Unix(0, ct.CreatedAt).Before(w.at) {
				ran = true
			}
		}
		if !ran {
			t.Errorf("%s's bootstrap pod was withdrawn at %s for %s, none of whose containers existed then (%d now): the pivot trusted a restored status", comp, w.at.Format(time.RFC3339Nano), w.pod, len(cs))
		}
	}
	if got := selfHostedObjectUIDs(t, admin); got != objUIDs {
		t.Errorf("the self-hosted objects are not the snapshot's (the pivot must hand back to them, not create them):\nbefore:\n%s\nafter:\n%s", objUIDs, got)
	}
	if log, _ := os.ReadFile(b.LogPath()); !bytes.Contains(log, []byte(`"Self-hosted objects in place"`)) || !bytes.Contains(log, []byte(`created=0`)) {
		t.Errorf("the pivot after the recovery created self-hosted objects, or did not check them:\n%s", tail(b.Log(), 3000))
	}
	for _, n := range a {
		if cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{}); err != nil || cm.Data["payload"] != "payload of "+n {
			t.Errorf("ConfigMap %s/%s from before the snapshot: %v %v", ns, n, err, cm)
		}
	}
	for _, n := range bs {
		if _, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s/%s from after the snapshot: want NotFound, got %v", ns, n, err)
		}
	}
	// Nothing of the old node runs: every running container of the control
	// plane is etcd's (bootlet's pod) or a self-hosted pod's, one per pod
	// (the Deployments run 2 replicas on the one node); no bootstrap one is
	// left beside them.
	etcd := b.Pod(t, "kube-system", "etcd")
	if !Running(etcd) {
		t.Errorf("etcd: %s", statusSummary(etcd))
	}
	want := map[string]string{string(etcd.UID): "etcd"}
	for _, comp := range pivoted {
		pods, err := selfHostedPods(ctx, admin, k.NodeName, comp)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			want[string(p.UID)] = comp
		}
	}
	got := map[string]string{}
	for _, ct := range runningContainers(t, c) {
		uid, name := ct.GetLabels()["io.kubernetes.pod.uid"], ct.GetMetadata().GetName()
		if _, dup := got[uid]; dup || want[uid] != name {
			t.Errorf("running container %s of pod %s (%s): not one per pod of etcd's and the self-hosted pods' %v", name, uid, ct.GetLabels()["io.kubernetes.pod.name"], want)
		}
		got[uid] = name
	}
	if len(got) != len(want) {
		t.Errorf("running containers by pod %v, want %v", got, want)
	}
	t.Logf("RECOVER: self-hosted master in %.1fs; recover %.2fs; bootlet start -> /readyz %.1fs; kubelet start %.1fs after bootlet's; bootlet start -> self-hosted again %.1fs; test %.1fs",
		selfHostedAt.Seconds(), recoverTook.Seconds(), toReadyz.Seconds(), kubeletStart.Sub(bootletStart).Seconds(), toSelfHosted.Seconds(), time.Since(testStart).Seconds())
}

// selfHostedObjectUIDs lists the UIDs of the self-hosted objects render
// writes for the control plane (the apiserver DaemonSet, the two
// Deployments, the Secrets they mount), one line each.
func selfHostedObjectUIDs(t testing.TB, admin *kubernetes.Clientset) string {
	t.Helper()
	ctx := context.Background()
	var lines []string
	add := func(kind, name string, uid types.UID, err error) {
		if err != nil {
			t.Fatalf("%s kube-system/%s: %v", kind, name, err)
		}
		lines = append(lines, fmt.Sprintf("%s %s %s", kind, name, uid))
	}
	ds, err := admin.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-apiserver", metav1.GetOptions{})
	add("DaemonSet", "kube-apiserver", uidOf(ds, err), err)
	for _, n := range []string{"kube-controller-manager", "kube-scheduler"} {
		d, err := admin.AppsV1().Deployments("kube-system").Get(ctx, n, metav1.GetOptions{})
		add("Deployment", n, uidOf(d, err), err)
	}
	for _, n := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		sec, err := admin.CoreV1().Secrets("kube-system").Get(ctx, n, metav1.GetOptions{})
		add("Secret", n, uidOf(sec, err), err)
	}
	return strings.Join(lines, "\n")
}

func uidOf(o metav1.Object, err error) types.UID {
	if err != nil {
		return ""
	}
	return o.GetUID()
}

// assetDigest is the sha256 of every file of the node's identity in
// render's asset dir: pki/ and the kubeconfigs, one line each (the workers'
// bootstrap-kubelet.conf too: render keeps its token when join.yaml is lost,
// so the restored cluster's token Secret stays the only one).
func assetDigest(t testing.TB, assets string) string {
	t.Helper()
	var lines []string
	sum := func(p string) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(assets, p)
		lines = append(lines, fmt.Sprintf("%x %s", sha256.Sum256(data), rel))
	}
	if err := filepath.WalkDir(filepath.Join(assets, "pki"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			sum(p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	confs, _ := filepath.Glob(filepath.Join(assets, "*.conf"))
	for _, p := range confs {
		sum(p)
	}
	if len(lines) < 20 || len(confs) < 4 {
		t.Fatalf("render's asset dir %s holds %d identity files, %d kubeconfigs", assets, len(lines), len(confs))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// wipeNode is the loss recover starts from: a power loss (the kubelet and
// bootlet SIGKILLed, containerd stopped with every container killed, its
// /run state gone: SimulateReboot), then on the disk every pod and
// container (containerd's images stay: the node's software), etcd's data
// dir, render's bootstrap-manifests/, self-hosted/ and kubelet-config.yaml,
// bootlet's root, the kubelet's root (its mounts first) and its static
// pods. Left: render's pki/ and kubeconfigs, and the snapshot (under
// c.Dir/backup). containerd runs again afterwards, as it would at boot.
func wipeNode(t testing.TB, c *Containerd, b *Bootlet, k *Kubelet, etcdDir, assets string) {
	t.Helper()
	if pid := k.PID(); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	k.Stop()
	SimulateReboot(t, c, b)
	c.Restart(t)
	RemoveAllPods(t, c)
	unmountUnder(k.RootDir) // poddirs_test.go
	for _, p := range []string{etcdDir, filepath.Join(assets, "bootstrap-manifests"), filepath.Join(assets, "self-hosted"),
		filepath.Join(assets, "kubelet-config.yaml"), b.Dir} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatalf("wiping %s: %v", p, err)
		}
	}
	// The kubelet's root dir is a mount point (bootlet makes it a shared
	// bind mount), like a disk's: its content goes, not the directory.
	for _, d := range []string{k.RootDir, k.ManifestDir} {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(d, e.Name())); err != nil {
				t.Fatalf("wiping %s: %v", d, err)
			}
		}
	}
}

// withdrawal is one of the pivot's withdrawals, from bootlet's log.
type withdrawal struct {
	at  time.Time
	pod string // the self-hosted pod that took over
}

// pivotWithdrawals reads, from the current daemon log, when the pivot
// withdrew each component's bootstrap pod and for which self-hosted pod
// (the "Pivot" lines with withdraw=true; klog's time is the local clock's,
// without the year). Every pivoted component must have one.
func pivotWithdrawals(t testing.TB, b *Bootlet) map[string]withdrawal {
	t.Helper()
	data, err := os.ReadFile(b.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^I(\d{4} \d{2}:\d{2}:\d{2}\.\d{6}) .*"Pivot" component="([^"]+)" withdraw=true .*reason="self-hosted pod (\S+) `)
	out := map[string]withdrawal{}
	for _, line := range strings.Split(string(data), "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.ParseInLocation("0102 15:04:05.000000", m[1], time.Local)
		if err != nil {
			t.Fatalf("klog time %q: %v", m[1], err)
		}
		at = at.AddDate(time.Now().Year(), 0, 0)
		if _, ok := out[m[2]]; !ok {
			out[m[2]] = withdrawal{at: at, pod: m[3]}
		}
	}
	for _, comp := range pivoted {
		if _, ok := out[comp]; !ok {
			t.Errorf("no withdrawal of %s in bootlet's log %s", comp, b.LogPath())
		}
	}
	return out
}

// runningContainers lists the running CRI containers.
func runningContainers(t testing.TB, c *Containerd) []*runtimeapi.Container {
	t.Helper()
	cs, err := listRunning(c)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestRecoverChecksBeforeItMoves: `bootlet recover` on a node with a
// bootlet root dir and a static copy to move aside, and a snapshot of a
// real etcd (_output/bin/etcd on loopback ports). While a daemon runs,
// recover refuses and names the lock the daemon holds, even when the
// daemon's socket is not where recover looks. With the daemon stopped, a
// snapshot with one byte changed fails etcd's integrity check: refused,
// naming the file and the cause, and nothing is moved. While recover
// holds the lock, the daemon does not start and says why. Then the
// whole snapshot is verified and restored, and the daemon starts again.
func TestRecoverChecksBeforeItMoves(t *testing.T) {
	RequireRoot(t)
	RequirePortsFree(t, []int{2379}) // the rendered etcd's client port, which recover probes
	Bin(t, "bootlet-tools")
	etcdBin := Bin(t, "etcd")
	c := StartContainerd(t)
	b := NewBootlet(t, c)
	assets, etcdDir, static := filepath.Join(c.Dir, "assets"), filepath.Join(c.Dir, "etcd"), filepath.Join(c.Dir, "manifests")
	RenderControlPlane(t, assets, etcdDir, b.NodeName, AdvertiseAddress(t))
	copyPath := filepath.Join(static, "bootlet_kube-system_etcd.yaml")
	if err := os.MkdirAll(static, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyPath, []byte("old etcd"), 0o600); err != nil {
		t.Fatal(err)
	}

	// A snapshot of a real etcd, and a copy with one byte of a value
	// changed: bbolt's structure holds, etcd's sha256 does not.
	src := startRestoredEtcd(t, etcdBin, "src", filepath.Join(c.Dir, "etcd-src"), c.Dir)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{src}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	value := strings.Repeat("v", 4096)
	Eventually(t, 30*time.Second, func() (bool, string) {
		pctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := cli.Put(pctx, "/registry/configmaps/e2e/a", value)
		return err == nil, fmt.Sprintf("put into the etcd at %s: %v", src, err)
	})
	snap, damaged := filepath.Join(c.Dir, "good.db"), filepath.Join(c.Dir, "damaged.db")
	if out, err := exec.Command(Bin(t, "bootlet"), "etcd", "snapshot", "save", snap, "--endpoints", src, "--asset-dir", assets).CombinedOutput(); err != nil {
		t.Fatalf("bootlet etcd snapshot save: %v\n%s", err, out)
	}
	data, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(value))
	if i < 0 {
		t.Fatalf("the value is not in %s", snap)
	}
	data[i+len(value)/2] ^= 0xff
	if err := os.WriteFile(damaged, data, 0o600); err != nil {
		t.Fatal(err)
	}

	recoverWith := func(snapshot, server string) (string, error) {
		out, err := exec.Command(Bin(t, "bootlet"), "recover", "--snapshot", snapshot, "--asset-dir", assets, "--root-dir", b.Dir,
			"--kubelet-static-pod-path", static, "--kubelet-healthz-url", "", "--server", server).CombinedOutput()
		return string(out), err
	}
	nothingMoved := func(what string) {
		t.Helper()
		for _, p := range []string{b.Dir, copyPath} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
		for _, p := range []string{b.Dir, static, etcdDir} {
			if aside, _ := filepath.Glob(p + ".pre-recover-*"); len(aside) > 0 {
				t.Errorf("%s: moved aside %v", what, aside)
			}
		}
		if _, err := os.Stat(etcdDir); !os.IsNotExist(err) {
			t.Errorf("%s: made the data dir %s: %v", what, etcdDir, err)
		}
	}

	// A running daemon whose socket recover does not look at (another
	// --socket): the lock it holds is what refuses.
	b.Start(t)
	lockPath := b.Dir + ".lock"
	out, err := recoverWith(snap, "unix://"+filepath.Join(c.Dir, "elsewhere.sock"))
	if want := fmt.Sprintf("a bootlet daemon runs on this root dir (lock %s held by pid %d)", lockPath, b.PID()); err == nil || !strings.Contains(out, want) {
		t.Errorf("recover while the daemon runs: %v, want %q:\n%s", err, want, out)
	}
	nothingMoved("recover while the daemon runs")
	b.WaitReady(t, 10*time.Second)
	b.Stop()
	b.WaitExit(t)

	// The damaged snapshot: etcd's check refuses it before any move.
	out, err = recoverWith(damaged, "unix://"+b.Socket)
	for _, want := range []string{"recover refused", "snapshot " + damaged + ": " + damaged + " is not an intact etcd snapshot", "expected sha256"} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("recover with a damaged snapshot: %v, output lacks %q:\n%s", err, want, out)
		}
	}
	nothingMoved("recover with a damaged snapshot")

	// While a recover holds the lock, the daemon does not start.
	lk, err := recoverlock.Acquire(b.Dir, recoverlock.Recover)
	if err != nil {
		t.Fatal(err)
	}
	b.Spawn(t)
	b.WaitExit(t)
	if log, want := b.Log(), fmt.Sprintf("a bootlet recover is under way (lock %s held by pid %d)", lockPath, os.Getpid()); !strings.Contains(log, want) {
		t.Errorf("the daemon started during a recover, or did not say why: want %q in its log:\n%s", want, log)
	}
	lk.Release()

	// The whole snapshot: verified, then the old state moved aside and the
	// data restored; the daemon starts again once recover has let go.
	out, err = recoverWith(snap, "unix://"+b.Socket)
	if err != nil {
		t.Fatalf("bootlet recover: %v\n%s", err, out)
	}
	t.Logf("bootlet recover:\n%s", out)
	for _, want := range []string{"verified snapshot " + snap, "move " + b.Dir + " aside", "restore into " + etcdDir} {
		if !strings.Contains(out, want) {
			t.Errorf("recover's output lacks %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(etcdDir, "member", "snap", "db")); err != nil {
		t.Errorf("restored data: %v", err)
	}
	b.Start(t)
}
