//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"

	"github.com/bootlet/bootlet/e2e/nodes"
	"github.com/bootlet/bootlet/manifests"
	"github.com/bootlet/bootlet/masters/nodekeys"
)

// TestClusterThreeMasters is the highly available control plane's scenarios on
// the harness of `make cluster MASTERS=3 WORKERS=1` (docs/cluster.md): one
// render for the three masters, booted together, each bootstrapping to
// self-hosted; keepalived on one master holds the VIP 172.30.90.10, the one
// API address every kubeconfig names; the worker joins through it.
//
// Scenario 1: every node Ready; on each master the control plane
// self-hosted (the apiserver's, controller-manager's and scheduler's
// DaemonSets each with one Ready pod per master and none elsewhere), etcd three started voting members, the control-plane
// containers 0 restarts after the adoption; keepalived active on every
// node, the VIP on exactly one master.
//
// Scenario 2: a Deployment of 4 replicas spreads over at least 3 nodes; a
// pod on the worker reaches, by name, a Service whose pods run on the
// masters.
//
// Scenario 3: the master holding the VIP powered off. A keep-alive client
// (the lifecycle's: /version and a pod list in turn every 50 ms, 1 s
// timeout, no retries) on the VIP records its failed requests and their windows;
// kubectl (client-go's retries) sees no error; a new pod is scheduled and
// runs; the master powered on again rejoins: Ready, its control-plane pods
// back, etcd three members again.
//
// Scenario 5: a rolling upgrade of the apiserver DaemonSet over the three
// masters (a second tag of its image) under both probe clients on the VIP:
// 0 failed requests. Scenario 6: the worker power-cycled, its pods back.
// Scenario 4: every master power-cycled at once: the control plane back
// self-hosted on each, with 300 ConfigMaps written before all there
// (cluster_ha.go).
//
// The cluster is torn down at the end, failed or not; no machine lock (see
// TestClusterJoinWorker).
func TestClusterThreeMasters(tt *testing.T) {
	t := NewFailureRecorder(tt)
	start := time.Now()
	c, phases, testserver := upTestCluster(t, 3, 1, []string{"bootlet", "bootlet-tools", "containerd", "kubelet", "kubectl"}, func(c *nodes.Cluster) {
		clusterDump(t, c)
		for _, m := range c.Members {
			if pid := m.Node().PID1(); pid > 0 && m.Role == nodes.Master {
				out, _ := nodes.Inside(pid, "journalctl", "-b", "--no-pager", "-o", "short-precise", "-u", "keepalived.service")
				t.Logf("keepalived on %s:\n%s", m.Name, out)
			}
		}
	})
	checkRacesAtEnd(t, c)
	var masters []nodes.Member
	var worker nodes.Member
	for _, m := range c.Members {
		if m.Role == nodes.Master {
			masters = append(masters, m)
		} else {
			worker = m
		}
	}
	admin := AdminClient(t, nodes.StateDir)
	endpoint := "https://" + nodes.ControlPlaneEndpoint()

	// --- Scenario 1: the control plane on every master.
	checkServers(t, endpoint, masters, worker)
	t0 := time.Now()
	for _, m := range masters {
		pid := m.Node().PID1()
		if pid == 0 {
			t.Fatalf("%s does not run", m.Name)
		}
		b := nodeBootlet(t, pid, m.Name)
		waitSelfHosted(t, admin, b, m.Name, start, true, "", 10*time.Minute)
		t.Logf("%s self-hosted %s after make cluster returned (load %s)", m.Name, time.Since(t0).Round(time.Millisecond), nodes.Load1())
		waitPivotDone(t, b, admin, 3*time.Minute)
		checkPortRouted(t, pid, m.Name)
	}
	var booted time.Duration // the phases before nspawn started
	for _, p := range phases[:2] {
		booted += p.Took
	}
	coldReady := apiserversReadyAt(t, admin, masters).Sub(start.Add(booted))
	t.Logf("cold start: the last master's self-hosted apiserver Ready %s after the nodes started", coldReady.Round(time.Millisecond))
	checkOnePerMaster(t, admin, masters)
	checkEtcdMembers(t, masters)
	checkVIP(t, masters, worker)

	before := map[string]map[string]containerState{}
	for _, m := range masters {
		before[m.Name] = nodeContainers(t, admin, m.Name)
		var others []string
		cp := 0
		for key, cs := range before[m.Name] {
			switch {
			case isControlPlane(key) && cs.restarts != 0:
				cp++
				t.Errorf("%s on %s: %d restarts after the adoption, want 0", cs.name, m.Name, cs.restarts)
			case cs.restarts != 0:
				others = append(others, fmt.Sprintf("%s %d", key, cs.restarts))
			}
		}
		sort.Strings(others)
		t.Logf("%s's %d containers: %d control-plane containers restarted; others restarted during the bootstrap: %v", m.Name, len(before[m.Name]), cp, others)
	}
	checkWorkerJoined(t, admin, worker, worker.Node().PID1())
	waitNodePodsReady(t, admin, worker.Name, map[string]string{"kube-system": "k8s-app=kube-proxy", manifests.FlannelNamespace: "app=flannel"}, 5*time.Minute)

	// --- Scenario 2: workloads over the nodes.
	t0 = time.Now()
	for _, m := range c.Members {
		if out, err := importImage(m, testserver); err != nil {
			t.Fatalf("importing the test image into %s: %v\n%s", m.Name, err, out)
		}
	}
	t.Logf("test image imported into the %d nodes in %s", len(c.Members), time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	spread := runDeployment(t, admin, "spread", 4, nil)
	t.Logf("Deployment spread: 4 replicas Ready in %s on %v", time.Since(t0).Round(time.Millisecond), spread)
	if distinct(spread) < 3 {
		t.Errorf("Deployment spread's 4 replicas are on %v: fewer than 3 nodes", spread)
	}
	var names []string
	for _, m := range masters {
		names = append(names, m.Name)
	}
	t0 = time.Now()
	onMasters := runDeployment(t, admin, "masters-web", 3, names)
	t.Logf("Deployment masters-web: 3 replicas Ready on %v in %s", onMasters, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	seen := clusterNameClient(t, admin, worker.Name, "masters-web", onMasters)
	t.Logf("the client on %s reached Service masters-web by name in %s; answered by %v", worker.Name, time.Since(t0).Round(time.Millisecond), seen)

	// --- Scenario 3: the master holding the VIP powered off.
	threeLoseAMaster(t, c, admin, masters)

	// --- Scenario 5: a rolling upgrade of the apiserver DaemonSet over the
	// three masters, 0 failed requests through the VIP.
	rollingUpgrade(t, admin, nodes.AdminConf, masters)

	// --- Scenario 6: the worker power-cycled; its pods come back.
	workerReboot(t, admin, worker)

	// --- Scenario 4: every master power-cycled at once; the control plane
	// comes back self-hosted with every object. Against the cold start,
	// measured the same way: from the nodes' start to the last master's
	// self-hosted apiserver pod turning Ready.
	r := allMastersReboot(t, admin, masters, 300)
	rebootReady := apiserversReadyAt(t, admin, masters).Sub(r.PoweredOn)
	t.Logf("ALL MASTERS REBOOTED: the last self-hosted apiserver Ready %s after the power-on, against %s from the cold start's nspawn (ratio %.2f)",
		rebootReady.Round(time.Millisecond), coldReady.Round(time.Millisecond), rebootReady.Seconds()/coldReady.Seconds())

	// Nothing of the other masters' control plane restarted meanwhile is
	// not required (etcd loses a member): logged.
	t.Logf("TestClusterThreeMasters took %s before the teardown (load %s)", time.Since(start).Round(time.Second), nodes.Load1())
}

func isControlPlane(key string) bool {
	for _, p := range []string{"kube-system/etcd", "kube-system/kube-apiserver", "kube-system/kube-controller-manager", "kube-system/kube-scheduler"} {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// checkServers checks that every kubeconfig names the VIP: the harness's
// admin.conf, each master's kubelet.conf, the worker's (the TLS bootstrap
// wrote it from bootstrap-kubelet.conf, from the join line), and
// cluster-info. A worker with no Name is none.
func checkServers(t testing.TB, endpoint string, masters []nodes.Member, worker nodes.Member) {
	t.Helper()
	files := []string{nodes.AdminConf}
	if worker.Name != "" {
		files = append(files, filepath.Join(worker.Node().Root, "etc/kubernetes/kubelet.conf"))
	}
	for _, m := range masters {
		files = append(files, filepath.Join(m.Node().Root, "etc/kubernetes/kubelet.conf"), filepath.Join(m.Node().Root, "etc/kubernetes/admin.conf"))
	}
	for _, f := range files {
		cfg, err := clientcmd.LoadFromFile(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		for name, cl := range cfg.Clusters {
			if cl.Server != endpoint {
				t.Errorf("%s: cluster %s's server is %s, want the VIP %s", f, name, cl.Server, endpoint)
			}
		}
	}
	cs := AdminClient(t, nodes.StateDir)
	cm, err := cs.CoreV1().ConfigMaps("kube-public").Get(context.Background(), "cluster-info", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.Load([]byte(cm.Data["kubeconfig"]))
	if err != nil {
		t.Fatalf("cluster-info's kubeconfig: %v", err)
	}
	for name, cl := range cfg.Clusters {
		if cl.Server != endpoint {
			t.Errorf("cluster-info: cluster %s's server is %s, want the VIP %s", name, cl.Server, endpoint)
		}
	}
	t.Logf("admin.conf, every kubelet.conf and cluster-info name the VIP %s", endpoint)
}

// checkOnePerMaster checks that the apiserver, the controller-manager and
// the scheduler are each a DaemonSet (render's for several masters: one pod
// per master by the DaemonSet controller, not a Deployment's replicas
// placed by the scheduler, docs/cluster.md "Three masters") with one Ready
// pod, its own, on each master and none elsewhere.
func checkOnePerMaster(t testing.TB, admin *kubernetes.Clientset, masters []nodes.Member) {
	t.Helper()
	Eventually(t, 5*time.Minute, func() (bool, string) {
		var why []string
		for _, comp := range pivoted {
			ds, err := admin.AppsV1().DaemonSets("kube-system").Get(context.Background(), comp, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Sprintf("DaemonSet kube-system/%s: %v", comp, err)
			}
			if _, err := admin.AppsV1().Deployments("kube-system").Get(context.Background(), comp, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				why = append(why, fmt.Sprintf("%s: a Deployment beside the DaemonSet (err %v)", comp, err))
			}
			pods, err := admin.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app=" + comp})
			if err != nil {
				return false, err.Error()
			}
			per := map[string]int{}
			for i := range pods.Items {
				p := &pods.Items[i]
				if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != ds.UID {
					why = append(why, fmt.Sprintf("%s: pod %s on %s is not the DaemonSet's (controller %v)", comp, p.Name, p.Spec.NodeName, ref))
				}
				if Running(p) && Ready(p) && p.DeletionTimestamp == nil {
					per[p.Spec.NodeName]++
				}
			}
			for _, m := range masters {
				if per[m.Name] != 1 {
					why = append(why, fmt.Sprintf("%s: %d Ready pods on %s, want 1:\n%s", comp, per[m.Name], m.Name, podsSummary(pods.Items)))
				}
				delete(per, m.Name)
			}
			if len(per) > 0 {
				why = append(why, fmt.Sprintf("%s: pods beside the masters: %v", comp, per))
			}
			if comp == manifests.KubeAPIServer {
				continue
			}
			// The budget resolves for a DaemonSet's pods (an integer
			// minAvailable, masters-1) and allows one eviction.
			pdb, err := admin.PolicyV1().PodDisruptionBudgets("kube-system").Get(context.Background(), comp, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Sprintf("PodDisruptionBudget kube-system/%s: %v", comp, err)
			}
			if pdb.Status.DisruptionsAllowed != 1 || pdb.Status.ExpectedPods != int32(len(masters)) {
				why = append(why, fmt.Sprintf("%s: PDB allows %d disruptions of %d expected pods (%d healthy), want 1 of %d: %+v",
					comp, pdb.Status.DisruptionsAllowed, pdb.Status.ExpectedPods, pdb.Status.CurrentHealthy, len(masters), pdb.Status.Conditions))
			}
		}
		return len(why) == 0, strings.Join(why, "\n")
	})
	t.Logf("kube-apiserver, kube-controller-manager, kube-scheduler: DaemonSets, one Ready pod on each of the %d masters; the PDBs allow one eviction", len(masters))
}

// etcdClient is a client of the masters' etcd members with the first
// master's healthcheck client pair (render's, kubeadm's).
func etcdClient(t testing.TB, masters []nodes.Member, endpoints []string) *clientv3.Client {
	t.Helper()
	root := masters[0].Node().Root
	em, err := manifests.LoadEtcdMember(filepath.Join(root, "etc/kubernetes"))
	if err != nil {
		// A promoted master has no rendered member: its own pair (server
		// and client auth), where masters/nodekeys writes it.
		dir := filepath.Join(root, nodekeys.DefaultDir)
		if _, serr := os.Stat(filepath.Join(dir, "server.crt")); serr != nil {
			t.Fatalf("%s: no rendered etcd member (%v) and no member pair (%v)", masters[0].Name, err, serr)
		}
		em.CAFile, em.CertFile, em.KeyFile = filepath.Join(dir, "ca.crt"), filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	}
	hostPath := func(p string) string {
		// LoadEtcdMember joined the asset dir it was given: already host paths.
		if strings.HasPrefix(p, root) {
			return p
		}
		return filepath.Join(root, p)
	}
	cert, err := tls.LoadX509KeyPair(hostPath(em.CertFile), hostPath(em.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := certutil.NewPool(hostPath(em.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second,
		TLS: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// checkEtcdMembers waits until etcd has one started voting member per
// master, every member answering with the same leader.
func checkEtcdMembers(t testing.TB, masters []nodes.Member) {
	t.Helper()
	var eps []string
	for _, m := range masters {
		eps = append(eps, "https://"+m.Addr().String()+":2379")
	}
	cli := etcdClient(t, masters, eps)
	var summary string
	Eventually(t, 3*time.Minute, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ml, err := cli.MemberList(ctx)
		if err != nil {
			return false, "member list: " + err.Error()
		}
		var names []string
		for _, mb := range ml.Members {
			if mb.Name == "" || mb.IsLearner {
				return false, fmt.Sprintf("member %x: name %q (empty: not started), learner %v", mb.ID, mb.Name, mb.IsLearner)
			}
			names = append(names, mb.Name)
		}
		sort.Strings(names)
		if len(names) != len(masters) {
			return false, fmt.Sprintf("etcd members %v, want one per master", names)
		}
		leaders := map[uint64]bool{}
		for _, ep := range eps {
			st, err := cli.Status(ctx, ep)
			if err != nil {
				return false, ep + ": " + err.Error()
			}
			leaders[st.Leader] = true
		}
		summary = fmt.Sprintf("%v, one leader (%d)", names, len(leaders))
		return len(leaders) == 1, fmt.Sprintf("the members see different leaders: %v", leaders)
	})
	t.Logf("etcd members: %s", summary)
}

// vipHolders are the nodes among masters that have the VIP on eth0.
func vipHolders(t testing.TB, masters []nodes.Member) []string {
	t.Helper()
	var holders []string
	for _, m := range masters {
		n := m.Node()
		if _, err := os.Stat("/run/netns/" + n.Netns); err != nil {
			continue
		}
		out, err := nodes.Run("ip", "-n", n.Netns, "-4", "-o", "addr", "show", "dev", "eth0")
		if err != nil {
			t.Errorf("%s's addresses: %v", m.Name, err)
			continue
		}
		if strings.Contains(out, " "+nodes.VIP.String()+"/") {
			holders = append(holders, m.Name)
		}
	}
	return holders
}

// checkVIP: keepalived active on every node, masters and workers (every
// node is in the address's group: docs/cluster.md, "The API address"), the
// VIP on exactly one node and that one a master, and how often keepalived
// changed state so far (flaps show as more transitions than nodes).
func checkVIP(t testing.TB, masters []nodes.Member, workers ...nodes.Member) {
	t.Helper()
	all := append(slices.Clone(masters), workers...)
	for _, m := range all {
		out, _ := nodes.Inside(m.Node().PID1(), "systemctl", "is-active", "keepalived.service")
		if strings.TrimSpace(out) != "active" {
			t.Errorf("keepalived on %s: %q, want active", m.Name, out)
		}
		logs, _ := nodes.Inside(m.Node().PID1(), "journalctl", "-b", "--no-pager", "-o", "cat", "-u", "keepalived.service")
		t.Logf("keepalived on %s: %d times MASTER, %d times BACKUP, %d FAULT", m.Name,
			strings.Count(logs, "Entering MASTER STATE"), strings.Count(logs, "Entering BACKUP STATE"), strings.Count(logs, "Entering FAULT STATE"))
	}
	Eventually(t, time.Minute, func() (bool, string) {
		h := vipHolders(t, all)
		return len(h) == 1 && len(vipHolders(t, masters)) == 1, fmt.Sprintf("the VIP is on %v, want one master", h)
	})
	t.Logf("the VIP %s is on %v", nodes.VIP, vipHolders(t, all))
}

// runDeployment runs a Deployment of the test server, its pods on the
// given nodes when set, behind a Service of its name, and returns the
// nodes its Ready pods run on.
func runDeployment(t testing.TB, admin *kubernetes.Clientset, name string, replicas int32, on []string) []string {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app": name}
	spec := v1.PodSpec{
		Tolerations: controlPlaneToleration,
		Containers: []v1.Container{{
			Name: "web", Image: "bootlet.dev/testserver:1", ImagePullPolicy: v1.PullNever,
			Ports: []v1.ContainerPort{{ContainerPort: 8080}},
			ReadinessProbe: &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{
				HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)},
			}},
		}},
	}
	if len(on) > 0 {
		spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{
			NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{{
				Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: on}}}}}}}
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}
	if err := createRetried(func() error {
		_, err := admin.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("creating Deployment %s: %v", name, err)
	}
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.ServiceSpec{Selector: labels, Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if err := createRetried(func() error {
		_, err := admin.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("creating Service %s: %v", name, err)
	}
	var where []string
	Eventually(t, 4*time.Minute, func() (bool, string) {
		pods, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err.Error()
		}
		where = nil
		for i := range pods.Items {
			if p := &pods.Items[i]; Running(p) && Ready(p) && p.DeletionTimestamp == nil {
				where = append(where, p.Spec.NodeName)
			}
		}
		sort.Strings(where)
		return len(where) == int(replicas), fmt.Sprintf("Deployment %s: %d of %d Ready:\n%s", name, len(where), replicas, podsSummary(pods.Items))
	})
	for _, n := range where {
		if len(on) > 0 && !contains(on, n) {
			t.Errorf("a pod of %s runs on %s, not on %v", name, n, on)
		}
	}
	return where
}

// createRetried creates as a person does after the VIP moved: client-go
// retries a GET whose connection was reset, not a POST, and the first
// request on a connection to the master that lost the address is reset by
// the new holder; etcd may be electing a leader. It tries again on such
// errors for up to 30 s; AlreadyExists means an earlier try got through.
func createRetried(create func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := create()
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		transient := apierrors.ReasonForError(err) == metav1.StatusReasonUnknown || apierrors.IsInternalError(err) ||
			apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err)
		if !transient || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func distinct(list []string) int {
	m := map[string]bool{}
	for _, s := range list {
		m[s] = true
	}
	return len(m)
}

// clusterNameScript asks the Service by name for the answering pod's name,
// the first answer retried for up to a minute (kube-proxy's and CoreDNS's
// first sync), then 12 more, each printed on a line "ANSWER name".
const clusterNameScript = `
n=0; until out=$(/testserver get -timeout 3s http://$SVC.default.svc.cluster.local/hostname); do n=$((n+1)); [ $n -ge 30 ] && echo "FAILED: $out" && exit 1; sleep 2; done
echo "ANSWER $(echo "$out" | tail -n 1)"
i=0; while [ $i -lt 12 ]; do out=$(/testserver get -timeout 3s http://$SVC.default.svc.cluster.local/hostname) || { echo "FAILED: $out"; exit 1; }; echo "ANSWER $(echo "$out" | tail -n 1)"; i=$((i+1)); done
`

// clusterNameClient runs a pod on node that asks Service svc by name, and
// returns the nodes of the pods that answered; every answer must come from
// a pod of the Service, on one of the nodes in backends.
func clusterNameClient(t testing.TB, admin *kubernetes.Clientset, node, svc string, backends []string) []string {
	t.Helper()
	ctx := context.Background()
	name := svc + "-client"
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.PodSpec{
			RestartPolicy: v1.RestartPolicyNever,
			NodeSelector:  map[string]string{"kubernetes.io/hostname": node},
			Tolerations:   controlPlaneToleration,
			Containers: []v1.Container{{
				Name: "client", Image: "bootlet.dev/testserver:1", ImagePullPolicy: v1.PullNever,
				Command: []string{"sh", "-c", clusterNameScript},
				Env:     []v1.EnvVar{{Name: "SVC", Value: svc}},
			}},
		},
	}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the client pod: %v", err)
	}
	var done *v1.Pod
	Eventually(t, 5*time.Minute, func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		done = p
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed, "the client pod: " + statusSummary(p)
	})
	logs, err := admin.CoreV1().Pods("default").GetLogs(name, &v1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Errorf("the client pod's logs: %v", err)
	}
	if done.Spec.NodeName != node || done.Status.Phase != v1.PodSucceeded {
		t.Fatalf("the client pod on %q (want %s) %s:\n%s", done.Spec.NodeName, node, done.Status.Phase, logs)
	}
	pods, err := admin.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + svc})
	if err != nil {
		t.Fatal(err)
	}
	podNode := map[string]string{}
	for _, p := range pods.Items {
		podNode[p.Name] = p.Spec.NodeName
	}
	var seen []string
	answers := 0
	for _, l := range strings.Split(string(logs), "\n") {
		host, ok := strings.CutPrefix(l, "ANSWER ")
		if !ok {
			continue
		}
		answers++
		n, ok := podNode[host]
		if !ok || !contains(backends, n) {
			t.Errorf("an answer from %q (on %q), not a pod of %s on %v", host, n, svc, backends)
			continue
		}
		if !contains(seen, n) {
			seen = append(seen, n)
		}
	}
	if answers != 13 {
		t.Errorf("the client got %d answers, want 13:\n%s", answers, logs)
	}
	sort.Strings(seen)
	return seen
}

// threeLoseAMaster is scenario 3: the master holding the VIP powered off
// under the lifecycle's keep-alive probe client on the VIP and a kubectl loop;
// a new pod scheduled meanwhile; the master powered on again rejoins.
func threeLoseAMaster(t testing.TB, c *nodes.Cluster, admin *kubernetes.Clientset, masters []nodes.Member) {
	t.Helper()
	holders := vipHolders(t, masters)
	if len(holders) != 1 {
		t.Fatalf("the VIP is on %v, want one master", holders)
	}
	victim, err := nodes.ParseMember(holders[0])
	if err != nil {
		t.Fatal(err)
	}
	loseAMaster(t, c, admin, masters, victim, masters)
}

// loseAMaster is threeLoseAMaster with the victim chosen, holding the VIP
// or not; `bootlet master status` is checked on the first of firstBoot
// (the masters render made) left running, else on a promoted master.
func loseAMaster(t testing.TB, c *nodes.Cluster, admin *kubernetes.Clientset, masters []nodes.Member, victim nodes.Member, firstBoot []nodes.Member) {
	t.Helper()
	heldIt := slices.Equal(vipHolders(t, masters), []string{victim.Name})
	var rest []nodes.Member
	for _, m := range masters {
		if m.Name != victim.Name {
			rest = append(rest, m)
		}
	}
	prober := StartProber(t, "vip", nodes.AdminConf, true)
	// kubectl as a person runs it, its default retries and timeouts, one
	// call after the other.
	kubectl := Bin(t, "kubectl")
	stop := make(chan struct{})
	type kcall struct {
		at   time.Time
		took time.Duration
		err  error
		out  string
	}
	calls := make(chan kcall, 10000)
	// offAt as Unix nanoseconds, for the loop to count the calls started
	// after the power-off (0 before it).
	var offNanos, doneAfterOff atomic.Int64
	go func() {
		defer close(calls)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			at := time.Now()
			args := []string{"--kubeconfig", nodes.AdminConf, "get", "pods", "-A", "-o", "name"}
			if i%2 == 1 {
				args = []string{"--kubeconfig", nodes.AdminConf, "version", "-o", "json"}
			}
			out, err := nodes.Run(kubectl, args...)
			if off := offNanos.Load(); off != 0 && at.UnixNano() > off {
				doneAfterOff.Add(1)
			}
			calls <- kcall{at: at, took: time.Since(at), err: err, out: out}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	// Its journal goes with its power (a volatile journal): read it first.
	checkNodeRaces(t, victim)
	time.Sleep(3 * time.Second)
	offAt := time.Now()
	offNanos.Store(offAt.UnixNano())
	if err := nodes.PowerOff(victim); err != nil {
		t.Fatalf("powering off %s: %v", victim.Name, err)
	}
	offDone := time.Now()
	t.Logf("%s (the VIP's holder) powered off in %s", victim.Name, time.Since(offAt).Round(time.Millisecond))
	var movedTo []string
	Eventually(t, time.Minute, func() (bool, string) {
		movedTo = vipHolders(t, rest)
		return len(movedTo) == 1, fmt.Sprintf("the VIP is on %v", movedTo)
	})
	moved := time.Since(offAt)
	if heldIt {
		t.Logf("the VIP moved to %v, seen %s after the power-off", movedTo, moved.Round(time.Millisecond))
	} else {
		t.Logf("the VIP stays on %v (%s did not hold it)", movedTo, victim.Name)
	}

	// A new pod is scheduled and runs while the master is off (not on it:
	// its node stays Ready in the API until the node monitor's grace).
	t0 := time.Now()
	on := []string{}
	for _, m := range c.Members {
		if m.Name != victim.Name {
			on = append(on, m.Name)
		}
	}
	where := runDeployment(t, admin, "after-poweroff", 2, on)
	t.Logf("Deployment after-poweroff: 2 replicas scheduled and Ready on %v in %s", where, time.Since(t0).Round(time.Millisecond))
	var up []string
	for _, m := range masters {
		if m.Name != victim.Name {
			up = append(up, m.Name)
		}
	}
	// On a master render made, `bootlet master status` reads its asset
	// dir; on a promoted one, the member's pod its daemon runs, and the
	// API through the administrator's kubeconfig.
	var statusOn nodes.Member
	var statusArgs []string
	for _, m := range firstBoot {
		if m.Name != victim.Name {
			statusOn = m
			break
		}
	}
	if statusOn.Name == "" {
		for _, m := range masters {
			if m.Name != victim.Name {
				statusOn, statusArgs = m, []string{"--kubeconfig", copyAdminConf(t, m)}
				break
			}
		}
	}
	checkMasterStatus(t, statusOn, append(up, victim.Name), victim.Name, statusArgs...)
	// At least 20 s, and at least 10 kubectl calls begun after the power-off:
	// the call in flight at the power-off may wait out a 30 s timeout.
	Eventually(t, 2*time.Minute, func() (bool, string) {
		n := doneAfterOff.Load()
		return time.Since(offAt) >= 20*time.Second && n >= 10, fmt.Sprintf("%d kubectl calls begun after the power-off have ended", n)
	})
	close(stop)
	res := prober.Stop()
	// The call in flight when the power went (begun before the power-off
	// returned, ended after it began) may be lost with its server: nothing
	// answers it, and it learns so only from its own timeout (docs/cluster.md
	// lists it among the failure modes seen). Every other call must succeed.
	var kfail, klost []string
	n := 0
	for k := range calls {
		n++
		if k.err == nil {
			continue
		}
		line := fmt.Sprintf("%s (%+dms from the power-off, took %s): %v", k.at.Format("15:04:05.000"), k.at.Sub(offAt).Milliseconds(), k.took.Round(time.Millisecond), k.err)
		if k.at.Before(offDone) && k.at.Add(k.took).After(offAt) {
			klost = append(klost, line)
		} else {
			kfail = append(kfail, line)
		}
	}
	if len(klost) > 0 {
		t.Logf("kubectl: the call in flight at the power-off was lost with its server:\n%s", strings.Join(klost, "\n"))
	}
	if len(klost) > 1 {
		t.Errorf("kubectl: %d calls lost at the power-off, but calls run one after the other", len(klost))
	}
	var ws []string
	for _, w := range res.Windows {
		ws = append(ws, fmt.Sprintf("+%s..+%s (%s, %d failed)", w.Start.Sub(offAt).Round(time.Millisecond), w.End.Sub(offAt).Round(time.Millisecond), w.Took().Round(time.Millisecond), w.Failed))
	}
	total := TotalFailureTime(res.Windows)
	t.Logf("the keep-alive probe client on the VIP: %d requests, %d failed (HTTP/2 %d, %d connections) in %d windows, %s in total: %v%s",
		res.Requests, res.Failed, res.HTTP2, res.NewConns, len(res.Windows), total.Round(time.Millisecond), ws, failuresSuffix(res))
	// A master's loss may cost a client at most 2 s of failed requests in
	// total (windows.go: how the windows are measured).
	if total > 2*time.Second {
		t.Errorf("the probe client's failures with %s off fell in windows of %s in total, more than 2 s", victim.Name, total.Round(time.Millisecond))
	}
	t.Logf("kubectl: %d calls (%d begun after the power-off), %d failed, %d lost at the power-off", n, doneAfterOff.Load(), len(kfail), len(klost))
	if len(kfail) > 0 {
		t.Errorf("kubectl (default retries) failed while %s was off:\n%s", victim.Name, strings.Join(kfail, "\n"))
	}
	if res.Requests < 200 {
		t.Errorf("the probe client sent only %d requests", res.Requests)
	}

	// Powered on again, the master rejoins: Ready, its control plane back,
	// etcd whole again.
	onAt := time.Now()
	if _, err := nodes.PowerOn(victim); err != nil {
		t.Fatalf("powering on %s: %v", victim.Name, err)
	}
	// Ready from a heartbeat after the power-on: the Node may still say
	// Ready from before the power-off (the node monitor's grace).
	Eventually(t, 10*time.Minute, func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(context.Background(), victim.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue && c.LastHeartbeatTime.After(onAt),
					fmt.Sprintf("%s Ready=%s, last heartbeat %s (power-on %s)", victim.Name, c.Status, c.LastHeartbeatTime.Format(time.RFC3339), onAt.Format(time.RFC3339))
			}
		}
		return false, victim.Name + " has no Ready condition"
	})
	t.Logf("%s Ready again %s after power-on (load %s)", victim.Name, time.Since(onAt).Round(time.Millisecond), nodes.Load1())
	waitSelfHosted(t, admin, nodeBootlet(t, victim.Node().PID1(), victim.Name), victim.Name, onAt, false, "", 10*time.Minute)
	checkOnePerMaster(t, admin, masters)
	checkEtcdMembers(t, masters)
	t.Logf("%s rejoined: self-hosted, one pod per component per master, etcd whole, %s after power-on (load %s); the VIP on %v",
		victim.Name, time.Since(onAt).Round(time.Millisecond), nodes.Load1(), vipHolders(t, masters))
}
