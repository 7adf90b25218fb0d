//go:build e2e

package main

// The bootstrap suite (bootstrap.json): a node agent's start to kube-apiserver /readyz, contenders
// interleaved; method and fields:
// docs/bench.md, "Bootstrap of the control plane (`_output/bench/bootstrap.json`)".

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/bootlet/bootlet/e2e"
)

const bootstrapNode = "e2e-node"

// bootstrapRun is one contender's run in one repetition (seconds from its
// start).
type bootstrapRun struct {
	ApiserverReady float64 `json:"apiserver_ready_seconds"`
	EtcdReady      float64 `json:"etcd_ready_seconds"`
	DaemonReady    float64 `json:"daemon_ready_seconds,omitempty"` // bootlet: its API answers /readyz (after the image import)
	ImageImport    float64 `json:"image_import_seconds,omitempty"` // bootlet: --preload-images, from its log
}

type bootstrapRep struct {
	Rep                 int          `json:"rep"`
	LoadAverage         string       `json:"load_average"`
	Bootlet             bootstrapRun `json:"bootlet"`
	Kubelet             bootstrapRun `json:"kubelet"`
	Floor               bootstrapRun `json:"floor"`
	RatioBootletFloor   float64      `json:"ratio_bootlet_floor"`
	RatioBootletKubelet float64      `json:"ratio_bootlet_kubelet"`
}

// bootstrapEnv is what every run shares.
type bootstrapEnv struct {
	c        *e2e.Containerd
	dir      string // scratch: etcd data, pod logs, bootlet roots
	assets   string
	etcdDir  string
	logDir   string
	preload  string // pause + control-plane archives, bootlet's --preload-images
	pods     map[string]*v1.Pod
	admin    *kubernetes.Clientset
	etcdHTTP *http.Client
}

func benchBootstrap(t *tb, o options) {
	reps := o.repsFor(5)
	e2e.RequireRoot(t)
	e2e.RequirePortsFree(t, e2e.ControlPlanePorts)
	env := &bootstrapEnv{c: e2e.StartContainerd(t)}
	coldImport := e2e.ImportControlPlaneImages(t, env.c)
	env.dir = filepath.Join(env.c.Dir, "bootstrap")
	env.etcdDir = filepath.Join(env.dir, "etcd")
	env.logDir = filepath.Join(env.c.Dir, "pod-logs") // also the kubelet's (e2e.NewKubelet)
	env.assets = e2e.RenderControlPlane(t, filepath.Join(env.dir, "assets"), env.etcdDir, bootstrapNode, e2e.AdvertiseAddress(t))
	env.preload = filepath.Join(env.dir, "preload")
	env.linkPreload(t)
	env.pods = loadBootstrapPods(t, filepath.Join(env.assets, "bootstrap-manifests"))
	env.admin = e2e.AdminClient(t, env.assets)
	env.etcdHTTP = etcdClient(t, env.assets)

	loadStart := loadAverage()
	fmt.Fprintf(os.Stderr, "bootstrap: cold import of the control-plane images %.2fs; %d repetitions; load average %s\n",
		coldImport.Seconds(), reps, loadStart)
	var out []bootstrapRep
	for rep := 1; rep <= reps; rep++ {
		r := bootstrapRep{Rep: rep, LoadAverage: loadAverage()}
		r.Bootlet = env.runBootlet(t, rep)
		r.Kubelet = env.runKubelet(t)
		r.Floor = env.runFloor(t, rep)
		r.RatioBootletFloor = r.Bootlet.ApiserverReady / r.Floor.ApiserverReady
		r.RatioBootletKubelet = r.Bootlet.ApiserverReady / r.Kubelet.ApiserverReady
		fmt.Fprintf(os.Stderr, "bootstrap rep %d: bootlet %6.2fs (import %.2fs, API %.2fs, etcd %.2fs)  kubelet %6.2fs (etcd %.2fs)  floor %6.2fs (etcd %.2fs)  bootlet/floor %.2f  bootlet/kubelet %.2f  load %s\n",
			rep, r.Bootlet.ApiserverReady, r.Bootlet.ImageImport, r.Bootlet.DaemonReady, r.Bootlet.EtcdReady,
			r.Kubelet.ApiserverReady, r.Kubelet.EtcdReady, r.Floor.ApiserverReady, r.Floor.EtcdReady,
			r.RatioBootletFloor, r.RatioBootletKubelet, r.LoadAverage)
		out = append(out, r)
	}
	loadEnd := loadAverage()

	pick := func(f func(bootstrapRep) float64) float64 {
		v := make([]float64, len(out))
		for i, r := range out {
			v[i] = f(r)
		}
		return median(v)
	}
	res := map[string]any{
		"bootlet_seconds":              pick(func(r bootstrapRep) float64 { return r.Bootlet.ApiserverReady }),
		"kubelet_seconds":              pick(func(r bootstrapRep) float64 { return r.Kubelet.ApiserverReady }),
		"floor_seconds":                pick(func(r bootstrapRep) float64 { return r.Floor.ApiserverReady }),
		"median_ratio_bootlet_floor":   pick(func(r bootstrapRep) float64 { return r.RatioBootletFloor }),
		"median_ratio_bootlet_kubelet": pick(func(r bootstrapRep) float64 { return r.RatioBootletKubelet }),
		"bootlet_phases_median": map[string]float64{
			"image_import_seconds":    pick(func(r bootstrapRep) float64 { return r.Bootlet.ImageImport }),
			"daemon_ready_seconds":    pick(func(r bootstrapRep) float64 { return r.Bootlet.DaemonReady }),
			"etcd_ready_seconds":      pick(func(r bootstrapRep) float64 { return r.Bootlet.EtcdReady }),
			"apiserver_ready_seconds": pick(func(r bootstrapRep) float64 { return r.Bootlet.ApiserverReady }),
		},
		"cold_image_import_seconds": coldImport.Seconds(),
		"load_average_start":        loadStart,
		"load_average_end":          loadEnd,
		"cpus":                      runtime.NumCPU(),
		"repetitions":               out,
		"method": "per repetition: bootlet, kubelet, floor, each from its exec to kube-apiserver /readyz (admin client certificate), " +
			"fresh etcd data and an empty runtime each run; images imported once beforehand (cold_image_import_seconds)",
	}
	path := writeJSON(t, "bootstrap.json", res)
	fmt.Printf("\nbootstrap (start → kube-apiserver /readyz, median of %d interleaved repetitions; load average %s → %s on %d CPUs)\n",
		reps, loadStart, loadEnd, runtime.NumCPU())
	fmt.Printf("  bootlet %.2fs   kubelet %.2fs   floor %.2fs   bootlet/floor %.2f (target ≤ 1.10)   bootlet/kubelet %.2f (target ≤ 1.00)\n",
		res["bootlet_seconds"], res["kubelet_seconds"], res["floor_seconds"], res["median_ratio_bootlet_floor"], res["median_ratio_bootlet_kubelet"])
	ph := res["bootlet_phases_median"].(map[string]float64)
	fmt.Printf("  bootlet phases (median): image import %.2fs, its API ready %.2fs, etcd /health %.2fs, apiserver /readyz %.2fs; cold image import %.2fs\n",
		ph["image_import_seconds"], ph["daemon_ready_seconds"], ph["etcd_ready_seconds"], ph["apiserver_ready_seconds"], coldImport.Seconds())
	fmt.Printf("wrote %s\n", path)
}

// linkPreload fills the --preload-images directory with the sandbox image and
// the control-plane archives (hard links: they are large).
func (env *bootstrapEnv) linkPreload(t *tb) {
	if err := os.MkdirAll(env.preload, 0o755); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(e2e.Repo, "_output", "images", "control-plane", "*.tar"))
	files = append(files, filepath.Join(e2e.Repo, "_output", "images", "pause.tar"))
	for _, f := range files {
		dst := filepath.Join(env.preload, filepath.Base(f))
		if err := os.Link(f, dst); err != nil {
			data, rerr := os.ReadFile(f)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if err := os.WriteFile(dst, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

var importedRE = regexp.MustCompile(`"Imported images".* duration="([^"]+)"`)

func (env *bootstrapEnv) runBootlet(t *tb, rep int) bootstrapRun {
	b := &e2e.Bootlet{Ctrd: env.c, Dir: filepath.Join(env.dir, fmt.Sprintf("bootlet-%d", rep)), LogDir: env.logDir,
		Socket: filepath.Join(env.dir, fmt.Sprintf("bootlet-%d.sock", rep)), NodeName: bootstrapNode,
		Args: []string{"--preload-images", env.preload, "--manifests-dir", filepath.Join(env.assets, "bootstrap-manifests")}}
	start := time.Now()
	b.Spawn(t)
	t.Cleanup(b.Stop) // a failed run must not leave the daemon behind
	daemonReady := make(chan float64, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			body, err := b.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
			if err == nil && string(body) == "ok" {
				daemonReady <- time.Since(start).Seconds()
				return
			}
			time.Sleep(poll)
		}
		daemonReady <- 0
	}()
	run := env.waitUp(t, start, func() string { return "bootlet daemon log:\n" + b.Log() })
	cancel()
	run.DaemonReady = <-daemonReady
	if m := importedRE.FindStringSubmatch(b.Log()); m != nil {
		if d, err := time.ParseDuration(m[1]); err == nil {
			run.ImageImport = d.Seconds()
		}
	}
	// The last repetition's daemon log stays, to see where bootlet's time
	// goes (its timestamps), as the pods scenario keeps bootlet.log.
	_ = os.WriteFile(filepath.Join(e2e.Repo, "_output", "bench", "bootstrap-bootlet.log"), []byte(b.Log()), 0o644)
	b.Stop()
	env.reset(t)
	return run
}

func (env *bootstrapEnv) runKubelet(t *tb) bootstrapRun {
	k := e2e.NewKubelet(t, env.c)
	t.Cleanup(k.Stop) // idempotent; puts the kubelet's sysctls back
	for name := range env.pods {
		data, err := os.ReadFile(filepath.Join(env.assets, "bootstrap-manifests", name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		k.WriteManifest(t, name, string(data))
	}
	start := time.Now()
	done := make(chan bootstrapRun, 1)
	go func() { done <- env.waitUp(t, start, func() string { return "kubelet log:\n" + k.Log() }) }()
	k.Start(t) // returns once its healthz answers; the clock runs from before the exec
	run := <-done
	k.Stop()
	k.RemoveManifests(t)
	env.reset(t)
	_ = os.RemoveAll(k.RootDir)
	return run
}

func (env *bootstrapEnv) runFloor(t *tb, rep int) bootstrapRun {
	var cmds []*exec.Cmd
	for _, name := range []string{"etcd", "kube-apiserver"} {
		pod := env.pods[name]
		if pod == nil {
			t.Fatalf("no %s bootstrap pod in %s", name, env.assets)
		}
		argv := floorArgv(pod)
		cmd := exec.Command(e2e.Bin(t, filepath.Base(argv[0])), argv[1:]...)
		logf, err := os.Create(filepath.Join(env.dir, fmt.Sprintf("floor-%s-%d.log", name, rep)))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmds = append(cmds, cmd)
	}
	start := time.Now()
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatalf("floor: %v", err)
		}
	}
	stop := func() {
		for _, cmd := range cmds {
			if cmd.Process != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}
	}
	t.Cleanup(stop)
	run := env.waitUp(t, start, func() string {
		data, _ := os.ReadFile(filepath.Join(env.dir, fmt.Sprintf("floor-kube-apiserver-%d.log", rep)))
		return "floor kube-apiserver log:\n" + tailString(string(data), 4000)
	})
	stop()
	env.reset(t)
	return run
}

// waitUp polls etcd /health (with the apiserver's etcd client certificate)
// and kube-apiserver /readyz (admin) until the apiserver is ready.
func (env *bootstrapEnv) waitUp(t *tb, start time.Time, logs func() string) bootstrapRun {
	var run bootstrapRun
	ctx := context.Background()
	deadline := start.Add(5 * time.Minute)
	for {
		if run.EtcdReady == 0 && etcdHealthy(env.etcdHTTP) {
			run.EtcdReady = time.Since(start).Seconds()
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		body, err := env.admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		cancel()
		if err == nil && string(body) == "ok" {
			run.ApiserverReady = time.Since(start).Seconds()
			if run.EtcdReady == 0 { // the apiserver is never ready before etcd
				run.EtcdReady = run.ApiserverReady
			}
			return run
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready after 5m: %v %s\n%s", err, body, tailString(logs(), 6000))
		}
		time.Sleep(poll)
	}
}

// reset puts the machine back to nothing between runs: no sandbox in the
// runtime, the control-plane ports free, etcd's data and the pod logs gone.
func (env *bootstrapEnv) reset(t *tb) {
	waitEmpty(t, env.c, 60*time.Second, true)
	deadline := time.Now().Add(30 * time.Second)
	for {
		busy := ""
		for _, p := range e2e.ControlPlanePorts {
			if l, err := net.Listen("tcp", fmt.Sprintf(":%d", p)); err != nil {
				busy = fmt.Sprintf("port %d: %v", p, err)
				break
			} else {
				l.Close()
			}
		}
		if busy == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("control-plane ports still busy 30s after the run: %s", busy)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, d := range []string{env.etcdDir, env.logDir} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
}

// floorArgv is the pod's first container's command line with every path
// under one of its volume mounts mapped back to the hostPath it mounts.
func floorArgv(pod *v1.Pod) []string {
	ctr := pod.Spec.Containers[0]
	host := map[string]string{}
	for _, vol := range pod.Spec.Volumes {
		if vol.HostPath != nil {
			host[vol.Name] = vol.HostPath.Path
		}
	}
	type mapping struct{ from, to string }
	var maps []mapping
	for _, m := range ctr.VolumeMounts {
		if h, ok := host[m.Name]; ok {
			maps = append(maps, mapping{m.MountPath, h})
		}
	}
	// Longest mount path first: /etc/kubernetes/pki/etcd before /etc/kubernetes/pki.
	sort.Slice(maps, func(i, j int) bool { return len(maps[i].from) > len(maps[j].from) })
	mapPath := func(p string) string {
		for _, m := range maps {
			if p == m.from || strings.HasPrefix(p, m.from+"/") {
				return m.to + strings.TrimPrefix(p, m.from)
			}
		}
		return p
	}
	var argv []string
	for _, a := range append(append([]string{}, ctr.Command...), ctr.Args...) {
		flag, val, isFlag := strings.Cut(a, "=")
		if !isFlag || !strings.HasPrefix(flag, "-") {
			argv = append(argv, mapPath(a))
			continue
		}
		parts := strings.Split(val, ",")
		for i := range parts {
			parts[i] = mapPath(parts[i])
		}
		argv = append(argv, flag+"="+strings.Join(parts, ","))
	}
	return argv
}

func loadBootstrapPods(t *tb, dir string) map[string]*v1.Pod {
	pods := map[string]*v1.Pod{}
	for _, name := range e2e.ControlPlanePods {
		f, err := os.Open(filepath.Join(dir, name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		pod := &v1.Pod{}
		err = yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(pod)
		f.Close()
		if err != nil {
			t.Fatalf("decode %s: %v", f.Name(), err)
		}
		pods[name] = pod
	}
	return pods
}

// etcdClient talks to etcd's client port with the apiserver's etcd client
// certificate (kubeadm's file names).
func etcdClient(t *tb, assets string) *http.Client {
	pki := filepath.Join(assets, "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "apiserver-etcd-client.crt"), filepath.Join(pki, "apiserver-etcd-client.key"))
	if err != nil {
		t.Fatalf("etcd client certificate: %v", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(pki, "etcd", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}}}
}

func etcdHealthy(c *http.Client) bool {
	resp, err := c.Get("https://127.0.0.1:2379/health")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"health":"true"`)
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
