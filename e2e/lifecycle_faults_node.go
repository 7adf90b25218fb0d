//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/bootlet/bootlet/pivot"
)

// faultNode is a trial's node and what the trial knows of it.
type faultNode struct {
	t      testing.TB
	c      *Containerd
	b      *Bootlet
	k      *Kubelet
	assets string
	admin  *kubernetes.Clientset
	image  string // the apiserver image the node must end on
	// kubeletUp: the kubelet has been started in this lifecycle (the
	// supervisor restarts it only then).
	kubeletUp bool
	// downSince: when supervise first saw a service down; restarts: the
	// services it started again.
	downSince map[string]time.Time
	restarts  []string
	// restartSec is each service's RestartSec, from the shipped units.
	restartSec map[string]time.Duration
}

// kill SIGKILLs the victim and returns what it killed and, for a
// container, its ID.
func (n *faultNode) kill(rng *rand.Rand, victim string) (target, containerID string) {
	switch victim {
	case VictimBootlet:
		pid := n.b.PID()
		n.b.Kill9()
		n.b.WaitExit(n.t)
		return fmt.Sprintf("bootlet pid %d", pid), ""
	case VictimKubelet:
		pid := n.k.PID()
		n.k.Kill9()
		return fmt.Sprintf("kubelet pid %d", pid), ""
	case VictimContainerd:
		pid := n.c.PID()
		n.c.KillContainerd(n.t, syscall.SIGKILL)
		return fmt.Sprintf("containerd pid %d", pid), ""
	}
	// A running control-plane container, its process SIGKILLed (the
	// container's init: the component itself).
	var cands []*runtimeapi.Container
	for _, c := range runningNow(n.c) {
		if slices.Contains(ControlPlanePods, c.Metadata.GetName()) {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return "no control-plane container was running", ""
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Id < cands[j].Id })
	c := cands[rng.Intn(len(cands))]
	pid := containerPID(n.c, c.Id)
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return fmt.Sprintf("%s/%s container %s pid %d", c.Labels["io.kubernetes.pod.name"], c.Metadata.GetName(), c.Id[:12], pid), c.Id
}

// restart is the supervisor: it starts the killed service again (a killed
// container is its runner's business: bootlet's or the kubelet's).
func (n *faultNode) restart(victim string) {
	switch victim {
	case VictimBootlet:
		n.b.Spawn(n.t)
	case VictimKubelet:
		if n.kubeletUp {
			n.k.Spawn(n.t)
		}
	case VictimContainerd:
		n.c.Restart(n.t)
	}
}

// supervise is the node's supervisor after the fault (systemd's
// Restart=always): a service whose process has ended since is started
// again once it has been down for its unit's RestartSec, whichever the
// cause (a kubelet that could not reach the killed containerd at its start
// exits).
func (n *faultNode) supervise() {
	down := map[string]bool{
		VictimContainerd: n.c.PID() == 0,
		VictimBootlet:    n.b.Exited(),
		VictimKubelet:    n.kubeletUp && n.k.Exited(),
	}
	for _, svc := range []string{VictimContainerd, VictimBootlet, VictimKubelet} { // boot order
		if !down[svc] {
			delete(n.downSince, svc)
			continue
		}
		if n.downSince == nil {
			n.downSince = map[string]time.Time{}
		}
		since, seen := n.downSince[svc]
		if !seen {
			n.downSince[svc] = time.Now()
			continue
		}
		if time.Since(since) >= n.restartSec[svc] {
			n.t.Logf("supervisor: %s has exited; starting it again", svc)
			n.restarts = append(n.restarts, svc)
			n.restart(svc)
			delete(n.downSince, svc)
		}
	}
}

// converge drives the rest of the lifecycle (the kubelet's start after a
// first boot) and waits until the node is self-hosted: every pivoted
// component's DaemonSet or Deployment pod Running and Ready on the node
// (the apiserver's on the trial's image), no bootstrap or checkpoint pod
// left in bootlet, etcd running, the pivot recorded, /readyz ok. It
// returns false and the last unmet condition at the deadline.
func (n *faultNode) converge(deadline time.Time) (bool, string) {
	ctx := context.Background()
	why := ""
	until := func(cond func() (bool, string)) bool {
		for {
			n.supervise()
			ok, w := cond()
			if ok {
				return true
			}
			why = w
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	if !n.kubeletUp {
		// A first boot: the kubelet starts once the control plane runs,
		// as RunLifecycle starts it.
		if !until(func() (bool, string) {
			for _, name := range ControlPlanePods {
				p, err := n.b.Client.CoreV1().Pods("kube-system").Get(ctx, name, metav1.GetOptions{})
				if err != nil || !Running(p) || !Ready(p) {
					return false, fmt.Sprintf("first boot: %s not Running and Ready in bootlet: %v", name, err)
				}
			}
			return true, ""
		}) {
			return false, why
		}
		n.k.Spawn(n.t)
		n.kubeletUp = true
	}
	ok := until(func() (bool, string) {
		body, err := n.admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil || string(body) != "ok" {
			return false, fmt.Sprintf("/readyz: %v %s", err, body)
		}
		// Any Ready pod counts (a Ready transition after the zero time).
		if why, err := selfHostedMissing(ctx, n.admin, n.k.NodeName, time.Time{}, true, n.image); err != nil || len(why) > 0 {
			return false, fmt.Sprintf("%v %s", err, strings.Join(why, "\n"))
		}
		l, err := n.b.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "bootlet: " + err.Error()
		}
		etcd := false
		for i := range l.Items {
			p := &l.Items[i]
			switch {
			case p.Name == "etcd":
				etcd = Running(p)
			case slices.Contains(pivoted, p.Name) || strings.HasSuffix(p.Name, "-checkpoint"):
				return false, "bootlet still runs " + p.Name + ": " + statusSummary(p)
			}
		}
		if !etcd {
			return false, "etcd is not running in bootlet"
		}
		if r, err := pivot.ReadDone(pivot.RecordPath(n.b.Dir)); err != nil || r == nil {
			return false, fmt.Sprintf("no pivot record: %v", err)
		}
		return true, ""
	})
	return ok, why
}

// restartedSince lists the containers of before that are not running any
// more although their pod still runs on the node (the kubelet's /pods or
// bootlet's registry hold its UID): a restart the fault caused. The
// victim's own container is expected to restart; a pod the lifecycle
// stopped (a withdrawn bootstrap pod or checkpoint, an upgraded
// DaemonSet's old pod) is gone from both.
func (n *faultNode) restartedSince(before []*runtimeapi.Container, victimID string) []string {
	now := map[string]bool{}
	for _, c := range runningNow(n.c) {
		now[c.Id] = true
	}
	live := map[string]bool{}
	if pods, msg := kubeletPods(n.t, n.k); msg == "" {
		for uid := range pods {
			live[uid] = true
		}
	}
	if l, err := n.b.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, p := range l.Items {
			live[string(p.UID)] = true
		}
	}
	var out []string
	for _, c := range before {
		uid := c.Labels["io.kubernetes.pod.uid"]
		if c.Id == victimID || now[c.Id] || !live[uid] {
			continue
		}
		out = append(out, fmt.Sprintf("%s/%s (%s)", c.Labels["io.kubernetes.pod.name"], c.Metadata.GetName(), c.Id[:12]))
	}
	return out
}

// runningNow lists the runtime's running containers (none while
// containerd does not answer).
func runningNow(c *Containerd) []*runtimeapi.Container {
	cs, _ := listRunning(c)
	return cs
}

// listRunning is the CRI's list of running containers.
func listRunning(c *Containerd) ([]*runtimeapi.Container, error) {
	return c.RT.ListContainers(context.Background(), &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}})
}

// containerPID is the host pid of a container's init process, from
// containerd's verbose CRI status (0 when unknown).
func containerPID(c *Containerd, id string) int {
	st, err := c.RT.ContainerStatus(context.Background(), id, true)
	if err != nil {
		return 0
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil {
		return 0
	}
	return info.Pid
}
