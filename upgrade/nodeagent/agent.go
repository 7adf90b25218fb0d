package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/cri"
	"github.com/bootlet/bootlet/internal/etcdapi"
	"github.com/bootlet/bootlet/internal/kubeclient"
	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade"
	"github.com/bootlet/bootlet/upgrade/cvclient"
)

// kubeletInImage is where the kubelet image (hack/images.sh) carries its
// binary.
const kubeletInImage = "/usr/local/bin/kubelet"

// Config configures the agent.
type Config struct {
	// NodeName is this node's name in the API.
	NodeName string
	// Kubeconfig of an identity that may read the ClusterVersion and this
	// Node (a master's pivot identity; a worker's kubelet.conf).
	Kubeconfig string
	// Client and Dynamic replace Kubeconfig (tests).
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// RuntimeAddress is the containerd socket the images are in.
	RuntimeAddress string
	// KubeletBinary is the file the kubelet's unit runs; KubeletBinary
	// + ".previous" keeps the one it replaced. "": this agent takes its
	// etcd member's steps only, as on a promoted master, whose kubelet's
	// steps the `bootlet upgrade agent` it ran as a worker takes.
	KubeletBinary string
	// RestartCommand restarts the kubelet through its unit (and so its
	// start gate).
	RestartCommand []string
	// Interval between rounds (default 3 s).
	Interval time.Duration
	// Etcd is this node's etcd pod in bootlet's store, on a master whose
	// daemon runs one; nil elsewhere.
	Etcd EtcdPod
}

// EtcdPod is this node's etcd pod as bootlet's store holds it.
type EtcdPod interface {
	// SetEtcdImage changes that image (a pod update, as the API's).
	SetEtcdImage(image string) error
	// MemberPod is the member's stored pod (a copy); nil when it has none
	// (a demoted master).
	MemberPod() (*v1.Pod, error)
	// HelperPods are the stored helper pods of an etcd step with helpers
	// (helper.go), by name.
	HelperPods() (map[string]*v1.Pod, error)
	// CreateHelper stores a helper's pod; DeleteHelper deletes one.
	CreateHelper(pod *v1.Pod) error
	DeleteHelper(name string) error
}

// Agent takes this node's kubelet steps.
type Agent struct {
	cfg         Config
	restartedAt time.Time
	said        string
}

// New is an agent of cfg.
func New(cfg Config) *Agent {
	if cfg.Interval <= 0 {
		cfg.Interval = 3 * time.Second
	}
	return &Agent{cfg: cfg}
}

// Run takes rounds until ctx ends.
func (a *Agent) Run(ctx context.Context) {
	klog.InfoS("Upgrade node agent started", "node", a.cfg.NodeName, "kubelet", a.cfg.KubeletBinary)
	if a.cfg.Client != nil {
		a.loop(ctx, a.cfg.Client, a.cfg.Dynamic)
		return
	}
	cvclient.Run(ctx, a.cfg.Kubeconfig, "bootlet-upgrade-agent", a.loop)
}

func (a *Agent) loop(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) {
	kubeclient.Rounds(ctx, kubeclient.NewWake(), a.cfg.Interval, func() {
		if err := a.Round(ctx, cs, dyn); err != nil {
			klog.ErrorS(err, "Upgrade node agent")
		}
	})
}

// Round observes, decides and acts once.
func (a *Agent) Round(ctx context.Context, cs kubernetes.Interface, dyn dynamic.Interface) error {
	cv, err := cvclient.Get(ctx, dyn)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the ClusterVersion: %w", err)
	}
	f := Facts{Node: a.cfg.NodeName, InFlight: cv.Status.InFlight, RollingBack: cv.Status.RollingBack, RestartedAt: a.restartedAt, Now: time.Now(),
		EtcdOnly: a.cfg.KubeletBinary == ""}
	var helperPods map[string]*v1.Pod
	if a.cfg.Etcd != nil {
		if helperPods, err = a.cfg.Etcd.HelperPods(); err != nil {
			return err
		}
	}
	helpersLeft := len(helperPods) > 0 || a.helperDataLeft()
	if !mine(f, a.cfg.Etcd != nil) && !helpersLeft {
		return nil // the common case: no exec, no call to etcd
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", a.cfg.NodeName, err)
	}
	f.Running = n.Status.NodeInfo.KubeletVersion
	var er etcdRound
	if etcdStep(f) != nil || helpersLeft {
		if f.Etcd, er, err = a.etcdFacts(ctx, cs, helperPods); err != nil {
			return err
		}
		if er.api != nil {
			defer er.api.Close()
		}
	} else if !f.EtcdOnly {
		if f.Binary, err = binaryVersion(ctx, a.cfg.KubeletBinary); err != nil {
			return err
		}
		f.Kept, _ = binaryVersion(ctx, a.cfg.KubeletBinary+".previous")
	}
	act := Decide(f)
	if msg := string(act.Kind) + " " + act.Version + ": " + act.Why; msg != a.said {
		klog.InfoS("Upgrade node agent", "act", act.Kind, "version", act.Version, "why", act.Why, "binary", f.Binary, "running", f.Running)
		a.said = msg
	}
	switch act.Kind {
	case Install:
		if err := a.install(ctx, act.Version, f.Binary); err != nil {
			return err
		}
	case Restore:
		if err := copyFile(a.cfg.KubeletBinary+".previous", a.cfg.KubeletBinary); err != nil {
			return fmt.Errorf("putting back the kept kubelet: %w", err)
		}
	case Restart:
	case SetEtcd:
		image := upgrade.ImageOf(upgrade.Etcd, act.Version)
		if err := a.cfg.Etcd.SetEtcdImage(image); err != nil {
			return fmt.Errorf("setting this node's etcd pod to %s: %w", image, err)
		}
		klog.InfoS("Upgrade node agent: etcd pod set", "image", image)
		return nil
	case RefreshMirror:
		mirror := er.mirror
		uid := mirror.UID
		err := cs.CoreV1().Pods(mirror.Namespace).Delete(ctx, mirror.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting the mirror pod %s/%s: %w", mirror.Namespace, mirror.Name, err)
		}
		klog.InfoS("Upgrade node agent: etcd's mirror pod deleted for the kubelet to create it again", "pod", klog.KObj(mirror))
		return nil
	case AddHelper, StartHelper, PromoteHelper, RemoveHelper, MoveLeader, DeleteHelperPod, StopHelper, ShareHelper:
		return a.actOnHelper(ctx, act, f.Etcd, er)
	default:
		return nil
	}
	return a.restart(ctx)
}

// helperDataLeft reports whether a helper's data directory is left on this
// master: a helper stopped and not yet removed (whose step's gate, which
// sees pods, may have passed), or one removed whose data is not yet
// deleted. Its agent goes on until nothing of it is left.
func (a *Agent) helperDataLeft() bool {
	if a.cfg.Etcd == nil {
		return false
	}
	pod, err := a.cfg.Etcd.MemberPod()
	if err != nil || pod == nil {
		return false
	}
	mp, err := ReadMemberPod(pod)
	if err != nil {
		return false
	}
	helpers, err := HelpersOf(mp)
	if err != nil {
		return false
	}
	for _, h := range helpers {
		if _, err := os.Stat(h.DataDir); err == nil {
			return true
		}
	}
	return false
}

// etcdRound is what a round read of this node's etcd member besides its
// facts, for the acts: its mirror pod (RefreshMirror), its stored pod (a
// helper's is a copy of it) and the client to etcd.
type etcdRound struct {
	mirror, member *v1.Pod
	api            *etcdapi.Client
}

// etcdFacts reads this node's etcd member: its stored pod's version, and
// its mirror pod with the versions it names and runs; and what a
// step with helpers needs: etcd's own member list, the helpers' pods
// (helperPods, as the round read them), and the apiservers' etcd
// endpoints. Without an EtcdPod (a worker) there is nothing to read. etcd
// that does not answer is no error: the facts say so (Members nil), and
// the decision waits.
func (a *Agent) etcdFacts(ctx context.Context, cs kubernetes.Interface, helperPods map[string]*v1.Pod) (*EtcdFacts, etcdRound, error) {
	var er etcdRound
	if a.cfg.Etcd == nil {
		return nil, er, nil
	}
	pod, err := a.cfg.Etcd.MemberPod()
	if err != nil {
		return nil, er, fmt.Errorf("reading this node's etcd pod: %w", err)
	}
	if pod == nil {
		// A master demoted: no member of its own, as on a worker.
		return nil, er, nil
	}
	mp, err := ReadMemberPod(pod)
	if err != nil {
		return nil, er, err
	}
	er.member = pod
	e := &EtcdFacts{Stored: upgrade.VersionOfImage(EtcdContainer(pod).Image), Self: mp.Name,
		SharesAddress: upgrade.EtcdSharesAddress(EtcdContainer(pod).Command),
		HelperPods:    map[string]bool{}, HelperShares: map[string]bool{}, HelperListens: map[string]bool{}, HelperData: map[string]bool{}}
	for name, p := range helperPods {
		e.HelperPods[name] = true
		e.HelperShares[name] = SharesClientAddress(p, mp.ClientURL)
	}
	if er.mirror, err = a.mirrorFacts(ctx, cs, e); err != nil {
		return nil, er, err
	}
	if e.SharesAddress {
		// The controller's rule, so that both count the same helpers:
		// every member's pod in the API shares, not only this one's.
		members, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "component=etcd"})
		if err != nil {
			return nil, er, fmt.Errorf("listing etcd's pods: %w", err)
		}
		e.SharesAddress = upgrade.EtcdSharesClientAddress(members.Items)
	}
	endpoints := []string{mp.ClientURL}
	if e.Helpers, err = HelpersOf(mp); err != nil {
		return nil, er, err
	}
	for _, h := range e.Helpers {
		endpoints = append(endpoints, h.ClientURL)
		if e.HelperListens[h.Pod], err = listensOn(h.ClientURL, h.PeerURL); err != nil {
			return nil, er, err
		}
		if _, err := os.Stat(h.DataDir); err == nil {
			e.HelperData[h.Pod] = true
		}
	}
	e.APIServerEtcd, e.APIServerRolledOut = "", true
	ds, err := cs.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, string(upgrade.APIServer), metav1.GetOptions{})
	switch {
	case err == nil:
		for _, c := range ds.Spec.Template.Spec.Containers {
			if c.Name == string(upgrade.APIServer) {
				e.APIServerEtcd = upgrade.EtcdServersOf(c.Command)
			}
		}
		e.APIServerRolledOut = upgrade.DaemonSetRolledOut(ds)
	case !apierrors.IsNotFound(err):
		return nil, er, fmt.Errorf("reading the apiserver DaemonSet: %w", err)
	}
	cert, key := mp.ClientPair()
	if er.api, err = etcdapi.New(mp.CAFile, cert, key); err != nil {
		return nil, er, err
	}
	members, leader, err := er.api.Observe(ctx, endpoints)
	if err != nil {
		klog.V(2).InfoS("Upgrade node agent: etcd", "err", err)
		return e, er, nil
	}
	e.Members, e.LeaderID = members, leader
	return e, er, nil
}

// mirrorFacts reads the member's mirror pod into e: the version its spec
// names and the one its container runs.
func (a *Agent) mirrorFacts(ctx context.Context, cs kubernetes.Interface, e *EtcdFacts) (*v1.Pod, error) {
	pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + a.cfg.NodeName})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of node %s: %w", a.cfg.NodeName, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if _, isMirror := p.Annotations[v1.MirrorPodAnnotationKey]; !isMirror || p.DeletionTimestamp != nil {
			continue
		}
		if btypes.IsEtcdUpgradeHelper(p) {
			continue
		}
		for _, c := range p.Spec.Containers {
			if c.Name != etcd {
				continue
			}
			e.Mirror = upgrade.VersionOfImage(c.Image)
			for _, st := range p.Status.ContainerStatuses {
				if st.Name == etcd && st.State.Running != nil {
					e.Running = upgrade.VersionOfImage(st.Image)
				}
			}
			return p, nil
		}
	}
	return nil, nil
}

// actOnHelper carries out an act on a helper of an etcd step.
func (a *Agent) actOnHelper(ctx context.Context, act Act, e *EtcdFacts, er etcdRound) error {
	if act.Helper < 1 || act.Helper > len(e.Helpers) {
		return fmt.Errorf("%s: no helper %d", act.Kind, act.Helper)
	}
	h, api := e.Helpers[act.Helper-1], er.api
	self := memberNamed(e, e.Self)
	switch act.Kind {
	case StartHelper, DeleteHelperPod, StopHelper, ShareHelper:
	default:
		if api == nil || self == nil || api.EndpointOf(self.ID) == "" {
			return fmt.Errorf("%s %s: this node's member %s does not answer", act.Kind, h.Name, e.Self)
		}
	}
	var err error
	switch act.Kind {
	case AddHelper:
		_, err = api.AddLearner(ctx, api.EndpointOf(self.ID), h.PeerURL)
	case StartHelper:
		err = a.startHelper(er.member, h, e)
	case PromoteHelper:
		err = api.Promote(ctx, api.EndpointOf(self.ID), memberWithPeer(e, h.PeerURL).ID)
	case MoveLeader:
		leader := api.EndpointOf(e.LeaderID)
		if leader == "" {
			return fmt.Errorf("moving etcd's leadership from %s: the leader does not answer", h.Name)
		}
		err = api.MoveLeader(ctx, leader, self.ID)
	case RemoveHelper:
		err = api.Remove(ctx, api.EndpointOf(self.ID), memberWithPeer(e, h.PeerURL).ID)
	case DeleteHelperPod:
		if err = a.cfg.Etcd.DeleteHelper(h.Pod); err == nil {
			err = removeData(h.DataDir)
		}
	case StopHelper:
		err = a.cfg.Etcd.DeleteHelper(h.Pod)
	case ShareHelper:
		// Its data is its membership: kept, not emptied as a new
		// member's is.
		var hp *v1.Pod
		if hp, err = HelperPod(er.member, h, InitialCluster(e.Members, e.Helpers), true); err == nil {
			err = a.cfg.Etcd.CreateHelper(hp)
		}
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", act.Kind, h.Name, err)
	}
	klog.InfoS("Upgrade node agent: etcd helper", "act", act.Kind, "helper", h.Name, "peer", h.PeerURL, "client", h.ClientURL)
	return nil
}

// startHelper stores helper h's pod, a copy of the member's pod, joining
// the cluster etcd lists, with an empty data directory: a new member must
// start from none.
func (a *Agent) startHelper(member *v1.Pod, h Helper, e *EtcdFacts) error {
	hp, err := HelperPod(member, h, InitialCluster(e.Members, e.Helpers), false)
	if err != nil {
		return err
	}
	if err := removeData(h.DataDir); err != nil {
		return fmt.Errorf("emptying %s: %w", h.DataDir, err)
	}
	return a.cfg.Etcd.CreateHelper(hp)
}

// removeData removes a helper's data directory: renamed first, so that
// what an agent killed halfway leaves is never taken for the data a
// stopped helper restarts on (HelperData), then removed, with what an
// earlier removal left.
func removeData(dir string) error {
	trash := dir + ".deleting"
	if err := os.RemoveAll(trash); err != nil {
		return err
	}
	if err := os.Rename(dir, trash); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.RemoveAll(trash)
}

// mine reports whether the status holds a step of this node that this
// agent takes: its kubelet's unless the agent is f.EtcdOnly, its etcd
// member's where it has the member (takesEtcd).
func mine(f Facts, takesEtcd bool) bool {
	for _, s := range []*btypes.UpgradeStep{f.InFlight, f.RollingBack} {
		if s != nil && (s.Component == etcd && takesEtcd || s.Component == kubelet && !f.EtcdOnly) && s.Node == f.Node {
			return true
		}
	}
	return false
}

// install takes version's kubelet out of its image next to the binary in
// place, checks it says so, keeps the running one as .previous (unless it
// is already version's), and renames the new one into place: the unit's
// next start runs it, whatever happens to this agent in between.
func (a *Agent) install(ctx context.Context, version, current string) error {
	ref := upgrade.ImageOf(upgrade.Kubelet, version)
	staged := a.cfg.KubeletBinary + ".new"
	if err := atIdlePriority(func() error { return cri.ExtractFile(ctx, a.cfg.RuntimeAddress, ref, kubeletInImage, staged) }); err != nil {
		return fmt.Errorf("taking %s out of %s: %w", kubeletInImage, ref, err)
	}
	if v, err := binaryVersion(ctx, staged); err != nil || v != version {
		return fmt.Errorf("the kubelet taken out of %s reports %q (%v), not %s", ref, v, err, version)
	}
	if current != "" && current != version {
		if err := copyFile(a.cfg.KubeletBinary, a.cfg.KubeletBinary+".previous"); err != nil {
			return fmt.Errorf("keeping the kubelet %s: %w", current, err)
		}
	}
	if err := os.Rename(staged, a.cfg.KubeletBinary); err != nil {
		return err
	}
	klog.InfoS("Upgrade node agent: kubelet binary in place", "version", version, "path", a.cfg.KubeletBinary, "kept", current)
	return nil
}

func (a *Agent) restart(ctx context.Context) error {
	if len(a.cfg.RestartCommand) == 0 {
		return errors.New("no kubelet restart command")
	}
	a.restartedAt = time.Now()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, a.cfg.RestartCommand[0], a.cfg.RestartCommand[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("restarting the kubelet (%s): %w: %s", strings.Join(a.cfg.RestartCommand, " "), err, out)
	}
	klog.InfoS("Upgrade node agent: kubelet restarted", "command", strings.Join(a.cfg.RestartCommand, " "))
	return nil
}

// binaryVersion is what `path --version` says ("Kubernetes v1.37.2" is
// v1.37.2); "" and no error when there is no file.
func binaryVersion(ctx context.Context, path string) (string, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", path, err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes "), nil
}

// copyFile writes src's bytes and mode to dst atomically and durably.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	return checkpoint.WriteFilesAtomic([]checkpoint.AtomicFile{{Path: dst, Data: data, Mode: st.Mode().Perm()}})
}
