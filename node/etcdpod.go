package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootlet/bootlet/checkpoint"
	"github.com/bootlet/bootlet/internal/etcdapi"
	"github.com/bootlet/bootlet/masters/nodekeys"
	"github.com/bootlet/bootlet/podapi"
	btypes "github.com/bootlet/bootlet/types"
	"github.com/bootlet/bootlet/upgrade/nodeagent"
)

// etcdPod is this master's etcd member in bootlet's store, for the upgrade
// node agent's etcd step (nodeagent.EtcdPod): render's bootstrap pod with
// an "etcd" container in kube-system, which the handoff keeps as the
// kubelet's static copy. Changing its image here is what changes the
// member: the handoff rewrites the copy and the kubelet replaces the
// container; bootlet itself makes no CRI call for a pod the kubelet owns.
type etcdPod struct {
	reg  *podapi.Registry
	root string // bootlet's root dir
}

const etcdContainer = "etcd"

// find is the member's stored pod (a copy, as the store lists it; not a
// helper's) and its etcd container.
func (e etcdPod) find() (*v1.Pod, *v1.Container, error) {
	pods, _ := e.reg.ListPods(metav1.NamespaceSystem)
	for i := range pods {
		p := &pods[i]
		if btypes.IsEtcdUpgradeHelper(p) || p.DeletionTimestamp != nil {
			// A helper is no member, nor is a member set aside and
			// stopping.
			continue
		}
		if c := nodeagent.EtcdContainer(p); c != nil {
			return p, c, nil
		}
	}
	return nil, nil, errNoMember
}

// errNoMember: the store holds no member's pod (a worker's, or a master's
// set aside by its demotion).
var errNoMember = fmt.Errorf("bootlet's store holds no pod with an %q container in %s", etcdContainer, metav1.NamespaceSystem)

// SetEtcdImage updates the stored pod under the resourceVersion it was
// read at, so a concurrent write is refused rather than overwritten.
func (e etcdPod) SetEtcdImage(image string) error {
	p, c, err := e.find()
	if err != nil {
		return err
	}
	c.Image = image
	_, err = e.reg.UpdatePod(p)
	return err
}

// MemberPod is the member's stored pod (a copy); nil and no error when
// there is none.
func (e etcdPod) MemberPod() (*v1.Pod, error) {
	p, _, err := e.find()
	if errors.Is(err, errNoMember) {
		return nil, nil
	}
	return p, err
}

// HelperPods are the stored pods an etcd step added (nodeagent's
// helpers), by name (copies).
func (e etcdPod) HelperPods() (map[string]*v1.Pod, error) {
	pods, _ := e.reg.ListPods(metav1.NamespaceSystem)
	out := map[string]*v1.Pod{}
	for i := range pods {
		if p := &pods[i]; btypes.IsEtcdUpgradeHelper(p) && p.DeletionTimestamp == nil {
			out[p.Name] = p
		}
	}
	return out, nil
}

// CreateHelper stores a helper's pod, which bootlet starts and hands to
// the kubelet as it does every pod; only a helper's (labelled) pod.
func (e etcdPod) CreateHelper(pod *v1.Pod) error {
	if !btypes.IsEtcdUpgradeHelper(pod) {
		return fmt.Errorf("pod %s is not an etcd upgrade helper's (no %s label)", pod.Name, btypes.LabelEtcdUpgradeHelper)
	}
	_, err := e.reg.CreatePod(pod, false)
	return err
}

// DeleteHelper deletes a helper's stored pod; its static copy is withdrawn
// and the kubelet stops it. Only a helper's pod: the member's is never
// deleted here. A pod already gone is no error.
func (e etcdPod) DeleteHelper(name string) error {
	p, err := e.reg.GetPod(metav1.NamespaceSystem, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !btypes.IsEtcdUpgradeHelper(p) {
		return fmt.Errorf("pod %s is not an etcd upgrade helper's", name)
	}
	_, err = e.reg.DeletePod(metav1.NamespaceSystem, name, nil)
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Access is how to reach etcd through the member's pod: its loopback
// client URL and the healthcheck client's pair (the masters' controller).
// A master whose member is set aside (demoted) still has the pair: the
// set-aside pod names it, with no endpoint of its own.
func (e etcdPod) Access() (etcdapi.Access, error) {
	p, _, err := e.find()
	if errors.Is(err, errNoMember) {
		aside, aerr := e.aside()
		if aerr != nil {
			return etcdapi.Access{}, err
		}
		m, err := nodeagent.ReadMemberPod(aside)
		if err != nil {
			return etcdapi.Access{}, err
		}
		a := clientAccess(m)
		a.Endpoint = ""
		return a, nil
	}
	if err != nil {
		return etcdapi.Access{}, err
	}
	m, err := nodeagent.ReadMemberPod(p)
	if err != nil {
		return etcdapi.Access{}, err
	}
	return clientAccess(m), nil
}

// clientAccess is the member's client URL and its client pair
// (MemberPod.ClientPair: a node labelled a master has no healthcheck
// client; its pod was made from a first-boot master's).
func clientAccess(m nodeagent.MemberPod) etcdapi.Access {
	cert, key := m.ClientPair()
	return etcdapi.Access{Endpoint: m.ClientURL, CAFile: m.CAFile, CertFile: cert, KeyFile: key}
}

// asidePath is where a demotion sets the member's pod aside, for the
// node's next promotion to start it again.
func (e etcdPod) asidePath() string { return filepath.Join(e.root, "masters", "etcd-member.json") }

func (e etcdPod) aside() (*v1.Pod, error) {
	data, err := os.ReadFile(e.asidePath())
	if err != nil {
		return nil, err
	}
	var p v1.Pod
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", e.asidePath(), err)
	}
	return &p, nil
}

// HasMember: the store holds the member's pod, or a demotion set it
// aside: either way this node has what a member needs (its pod and its
// certificates), so its next promotion can start one. learner is the
// learner the stored pod was started as (0: a first boot's member, or
// none).
func (e etcdPod) HasMember() (stored, aside bool, learner uint64) {
	p, _, err := e.find()
	if err == nil {
		learner, _ = strconv.ParseUint(p.Annotations[annotationLearner], 16, 64)
	}
	_, aerr := os.Stat(e.asidePath())
	return err == nil, aerr == nil, learner
}

// SetAside is a demotion's cleanup: the member's pod is kept in the
// aside file and deleted from the store (the handoff withdraws its static
// copy and the kubelet stops it), and its data directory is renamed, not
// deleted: a person may still need it. etcd has already removed the
// member; a removed member's process exits by itself.
func (e etcdPod) SetAside(now time.Time) (string, error) {
	p, _, err := e.find()
	if errors.Is(err, errNoMember) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	m, err := nodeagent.ReadMemberPod(p)
	if err != nil {
		return "", err
	}
	if err := e.writeAside(p); err != nil {
		return "", err
	}
	if _, err := e.reg.DeletePod(p.Namespace, p.Name, nil); err != nil && !apierrors.IsNotFound(err) {
		return "", err
	}
	return moveAside(m.DataDir, now)
}

// writeAside keeps p in the aside file, durably.
func (e etcdPod) writeAside(p *v1.Pod) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(e.asidePath()), 0o700); err != nil {
		return err
	}
	_, err = checkpoint.WriteFileAtomic(e.asidePath(), data)
	return err
}

// Prepare is a labelled node's first member: its pod made from another
// master's (template, nodeagent.MemberPodOf) with this node's name and
// address, kept aside as a demoted master's is, for its promotion's
// learner to start (StartLearner). It refuses while the node holds a
// member, stored or aside, and while the member certificate the pod
// names is not on this node's disk yet (masters/nodekeys writes it once
// the node is labelled): a member started without it would only fail.
func (e etcdPod) Prepare(template *v1.Pod, node string, ip netip.Addr) error {
	if stored, aside, _ := e.HasMember(); stored || aside {
		return fmt.Errorf("this node has a member's pod already (stored %v, aside %v)", stored, aside)
	}
	p, err := nodeagent.MemberPodOf(template, node, ip)
	if err != nil {
		return err
	}
	m, err := nodeagent.ReadMemberPod(p)
	if err != nil {
		return err
	}
	dir := filepath.Dir(m.CAFile)
	pair, err := nodekeys.Read(dir)
	switch {
	case err != nil:
		return fmt.Errorf("the member certificate in %s: %w", dir, err)
	case pair == nil || pair.CA == nil:
		return fmt.Errorf("no member certificate and etcd CA in %s yet (this node's agent asks for them once it is labelled)", dir)
	}
	return e.writeAside(p)
}

// moveAside renames dir to dir.removed-TIME; "" if there was none.
func moveAside(dir string, now time.Time) (string, error) {
	if dir == "" {
		return "", nil
	}
	to := fmt.Sprintf("%s.removed-%s", dir, now.UTC().Format("20060102T150405Z"))
	if err := os.Rename(dir, to); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		return "", err
	}
	return to, nil
}

// StartLearner stores the set-aside member's pod again, joining the
// cluster as the learner etcd has added for it: --initial-cluster as the
// controller recorded it and --initial-cluster-state=existing, on an
// empty data directory (any left there is moved aside first, never
// reused: it is the data of a member etcd has removed).
func (e etcdPod) StartLearner(initialCluster string, id uint64, now time.Time) error {
	p, err := e.aside()
	if err != nil {
		return fmt.Errorf("the set-aside member's pod: %w", err)
	}
	m, err := nodeagent.ReadMemberPod(p)
	if err != nil {
		return err
	}
	if _, err := moveAside(m.DataDir, now); err != nil {
		return err
	}
	// ReadMemberPod above found its etcd container.
	ctr := nodeagent.EtcdContainer(p)
	ctr.Command = nodeagent.SetFlags(ctr.Command, map[string]string{"initial-cluster": initialCluster, "initial-cluster-state": "existing"})
	annotations := maps.Clone(p.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[annotationLearner] = strconv.FormatUint(id, 16)
	fresh := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, Annotations: annotations}, Spec: p.Spec}
	if _, err := e.reg.CreatePod(fresh, false); err != nil {
		return err
	}
	return os.Remove(e.asidePath())
}

// annotationLearner names, on a member's pod the masters' agent started,
// the learner it joined as: a stored member that is not the learner a
// promotion added is set aside before the learner starts.
const annotationLearner = "bootlet.dev/etcd-learner-id"
