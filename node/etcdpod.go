package node

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bootlet/bootlet/podapi"
)

// etcdPod is this master's etcd member in bootlet's store, for the upgrade
// node agent's etcd step (nodeagent.EtcdPod): render's bootstrap pod with
// an "etcd" container in kube-system, which the handoff keeps as the
// kubelet's static copy. Changing its image here is what changes the
// member: the handoff rewrites the copy and the kubelet replaces the
// container; bootlet itself makes no CRI call for a pod the kubelet owns.
type etcdPod struct{ reg *podapi.Registry }

const etcdContainer = "etcd"

// find is the stored pod (a copy, as the store lists it) and its etcd
// container.
func (e etcdPod) find() (*v1.Pod, *v1.Container, error) {
	pods, _ := e.reg.ListPods(metav1.NamespaceSystem)
	for i := range pods {
		p := &pods[i]
		for j := range p.Spec.Containers {
			if p.Spec.Containers[j].Name == etcdContainer {
				return p, &p.Spec.Containers[j], nil
			}
		}
	}
	return nil, nil, fmt.Errorf("bootlet's store holds no pod with an %q container in %s", etcdContainer, metav1.NamespaceSystem)
}

func (e etcdPod) EtcdImage() (string, error) {
	_, c, err := e.find()
	if err != nil {
		return "", err
	}
	return c.Image, nil
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
