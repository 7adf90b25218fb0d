package node

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootlet/bootlet/internal/etcdapi"
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
type etcdPod struct{ reg *podapi.Registry }

const etcdContainer = "etcd"

// find is the member's stored pod (a copy, as the store lists it; not a
// helper's) and its etcd container.
func (e etcdPod) find() (*v1.Pod, *v1.Container, error) {
	pods, _ := e.reg.ListPods(metav1.NamespaceSystem)
	for i := range pods {
		p := &pods[i]
		if btypes.IsEtcdUpgradeHelper(p) {
			continue
		}
		for j := range p.Spec.Containers {
			if p.Spec.Containers[j].Name == etcdContainer {
				return p, &p.Spec.Containers[j], nil
			}
		}
	}
	return nil, nil, fmt.Errorf("bootlet's store holds no pod with an %q container in %s", etcdContainer, metav1.NamespaceSystem)
}

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

// MemberPod is the member's stored pod (a copy).
func (e etcdPod) MemberPod() (*v1.Pod, error) {
	p, _, err := e.find()
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
func (e etcdPod) Access() (etcdapi.Access, error) {
	p, _, err := e.find()
	if err != nil {
		return etcdapi.Access{}, err
	}
	m, err := nodeagent.ReadMemberPod(p)
	if err != nil {
		return etcdapi.Access{}, err
	}
	return etcdapi.Access{Endpoint: m.ClientURL, CAFile: m.CAFile, CertFile: m.CertFile, KeyFile: m.KeyFile}, nil
}
