package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/bootlet/bootlet/internal/kubeclient"
	"github.com/bootlet/bootlet/masters"
	masterscontroller "github.com/bootlet/bootlet/masters/controller"
	btypes "github.com/bootlet/bootlet/types"
)

// WithdrawnFileName is the file's name in the daemon's runtime directory
// (beside its API socket: /run/bootlet/api-address-withdrawn).
const WithdrawnFileName = "api-address-withdrawn"

// Member is this node's etcd member in bootlet's store.
type Member interface {
	// HasMember: its pod is stored, or set aside; learner is the learner
	// the stored pod was started as (0: none, or a first boot's member).
	HasMember() (stored, aside bool, learner uint64)
	// SetAside keeps the pod aside, deletes it from the store and renames
	// its data; it returns where the data went.
	SetAside(now time.Time) (string, error)
	// StartLearner stores the set-aside pod again, joining as learner id.
	StartLearner(initialCluster string, id uint64, now time.Time) error
	// Prepare keeps aside a member's pod for this node, named node at
	// ip, made from another master's pod (template).
	Prepare(template *v1.Pod, node string, ip netip.Addr) error
}

// Config configures the agent.
type Config struct {
	NodeName string
	// Kubeconfig may read its Node and the controller's record, and
	// annotate its Node (the pivot's on a master).
	Kubeconfig string
	Member     Member
	// WithdrawnFile is the file keepalived's check reads.
	WithdrawnFile string
	// Interval between rounds (default 2 s: keepalived's check reads the
	// file every second).
	Interval time.Duration
	// Addrs are the node's own addresses (default net.InterfaceAddrs).
	Addrs func() ([]net.Addr, error)
	// CanLead: this daemon runs a candidate of the masters' controller;
	// the agent labels its Node so (masters.LabelLeader), which
	// Kubeconfig must be allowed to (a kubelet's identity is not).
	CanLead bool
}

// Agent is one node's side of the masters' operations.
type Agent struct {
	cfg  Config
	said string
}

// New is an agent of cfg.
func New(cfg Config) *Agent {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Addrs == nil {
		cfg.Addrs = net.InterfaceAddrs
	}
	return &Agent{cfg: cfg}
}

// Run takes rounds until ctx ends.
func (a *Agent) Run(ctx context.Context) {
	kubeclient.RunWithConfig(ctx, a.cfg.Kubeconfig, "bootlet-masters-agent", func(err error) {
		klog.V(4).InfoS("Masters agent: kubeconfig not loadable yet", "path", a.cfg.Kubeconfig, "err", err)
	}, func(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface) {
		address := apiAddress(cfg.Host)
		kubeclient.Rounds(ctx, kubeclient.NewWake(), a.cfg.Interval, func() { a.round(ctx, cs, address) })
	})
}

// apiAddress is the IP of the API address the kubeconfig names; invalid
// when it names a host name (then this node never counts as holding it).
func apiAddress(host string) netip.Addr {
	u, err := url.Parse(host)
	if err != nil {
		return netip.Addr{}
	}
	ip, _ := netip.ParseAddr(u.Hostname())
	return ip
}

func (a *Agent) round(ctx context.Context, cs kubernetes.Interface, address netip.Addr) {
	f, err := a.observe(ctx, cs, address)
	if err != nil {
		klog.V(2).InfoS("Masters agent: observing", "err", err)
		return
	}
	d := Decide(f)
	if d.Why != a.said && d.Why != "" {
		klog.InfoS("Masters agent", "node", a.cfg.NodeName, "why", d.Why)
	}
	a.said = d.Why
	if err := a.act(ctx, cs, f, d); err != nil {
		klog.ErrorS(err, "Masters agent: acting", "node", a.cfg.NodeName, "why", d.Why)
	}
}

func (a *Agent) observe(ctx context.Context, cs kubernetes.Interface, address netip.Addr) (Facts, error) {
	var f Facts
	n, err := cs.CoreV1().Nodes().Get(ctx, a.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return f, err
	}
	_, f.Labelled = n.Labels[masters.Label]
	_, f.LeaderLabelled = n.Labels[masters.LabelLeader]
	f.CanLead = a.cfg.CanLead
	f.Annotations = n.Annotations
	rec, err := masterscontroller.ReadRecord(ctx, cs)
	if err != nil {
		return f, err
	}
	if rec.Op != nil && rec.Op.Node == a.cfg.NodeName {
		f.Op = rec.Op
	}
	f.Stored, f.Aside, f.StoredLearner = a.cfg.Member.HasMember()
	f.InternalIP = internalIP(n)
	if _, err := os.Stat(a.cfg.WithdrawnFile); err == nil {
		f.Withdrawn = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	if address.IsValid() {
		addrs, err := a.cfg.Addrs()
		if err != nil {
			return f, err
		}
		for _, ad := range addrs {
			if p, err := netip.ParsePrefix(ad.String()); err == nil && p.Addr() == address {
				f.HoldsAddress = true
			}
		}
	}
	return f, nil
}

func (a *Agent) act(ctx context.Context, cs kubernetes.Interface, f Facts, d Decision) error {
	if d.Withdraw != nil {
		if *d.Withdraw {
			if err := os.MkdirAll(filepath.Dir(a.cfg.WithdrawnFile), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(a.cfg.WithdrawnFile, []byte("withdrawn by the masters' controller's demotion of "+a.cfg.NodeName+"\n"), 0o644); err != nil {
				return err
			}
			klog.InfoS("Masters agent: withdrawing this node from the API address", "file", a.cfg.WithdrawnFile)
		} else {
			if err := os.Remove(a.cfg.WithdrawnFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			klog.InfoS("Masters agent: this node may hold the API address again", "file", a.cfg.WithdrawnFile)
		}
	}
	now := time.Now()
	if d.Prepare {
		if err := a.prepare(ctx, cs, f.InternalIP); err != nil {
			return fmt.Errorf("preparing this node's member: %w", err)
		}
	}
	if d.SetAside {
		moved, err := a.cfg.Member.SetAside(now)
		if err != nil {
			return err
		}
		klog.InfoS("Masters agent: the etcd member is set aside", "data", moved)
	}
	if d.StartLearner != "" {
		if err := a.cfg.Member.StartLearner(d.StartLearner, d.Learner, now); err != nil {
			return err
		}
		klog.InfoS("Masters agent: the etcd member starts as a learner", "initialCluster", d.StartLearner)
	}
	if d.LabelLeader {
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:""}}}`, masters.LabelLeader)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, a.cfg.NodeName, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "bootlet-masters-agent"}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("labelling this node %s: %w", masters.LabelLeader, err)
		}
		klog.InfoS("Masters agent: this node can lead the masters' controller", "label", masters.LabelLeader)
	}
	if len(d.Annotate) == 0 {
		return nil
	}
	ann := map[string]any{}
	for k, v := range d.Annotate {
		if v {
			ann[k] = "true"
		} else {
			ann[k] = nil
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Nodes().Patch(ctx, a.cfg.NodeName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "bootlet-masters-agent"})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// internalIP is the Node's first InternalIP: the address the masters'
// controller gives its member's peer URL.
func internalIP(n *v1.Node) netip.Addr {
	for _, ad := range n.Status.Addresses {
		if ad.Type != v1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(ad.Address); err == nil {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// prepare makes this node's member's pod from a master's: the etcd pod of
// a master that runs and is Ready, first by name, as the apiserver mirrors
// it (its kubelet runs it as a static pod).
func (a *Agent) prepare(ctx context.Context, cs kubernetes.Interface, ip netip.Addr) error {
	pods, err := cs.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "component=etcd"})
	if err != nil {
		return err
	}
	template := TemplateOf(pods.Items, a.cfg.NodeName)
	if template == nil {
		return fmt.Errorf("no Ready etcd pod of another master in %s to make this node's from", metav1.NamespaceSystem)
	}
	if err := a.cfg.Member.Prepare(template, a.cfg.NodeName, ip); err != nil {
		return err
	}
	klog.InfoS("Masters agent: this node's member's pod is prepared", "from", template.Name, "address", ip)
	return nil
}

// TemplateOf is the member pod a node named self makes its own from: a
// mirror pod (the kubelet's copy of a master's static pod) of another
// node, Ready, not an upgrade helper's, first by name; nil when none is.
func TemplateOf(pods []v1.Pod, self string) *v1.Pod {
	var best *v1.Pod
	for i := range pods {
		p := &pods[i]
		if _, mirror := p.Annotations[v1.MirrorPodAnnotationKey]; !mirror || p.Spec.NodeName == self || p.DeletionTimestamp != nil || btypes.IsEtcdUpgradeHelper(p) || !podutil.IsPodReady(p) {
			continue
		}
		if best == nil || p.Name < best.Name {
			best = p
		}
	}
	return best
}
