package node

import (
	"fmt"

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

func (e etcdPod) find() (ns, name string, err error) {
	pods, _ := e.reg.ListPods(metav1.NamespaceSystem)
	for _, p := range pods {
		for _, c := range p.Spec.Containers {
			if c.Name == etcdContainer {
				return p.Namespace, p.Name, nil
			}
		}
	}
	return "", "", fmt.Errorf("bootlet's store holds no pod with an %q container in %s", etcdContainer, metav1.NamespaceSystem)
}

func (e etcdPod) EtcdImage() (string, error) {
	ns, name, err := e.find()
	if err != nil {
		return "", err
	}
	p, err := e.reg.GetPod(ns, name)
	if err != nil {
		return "", err
	}
	for _, c := range p.Spec.Containers {
		if c.Name == etcdContainer {
			return c.Image, nil
		}
	}
	return "", fmt.Errorf("pod %s/%s lost its %q container", ns, name, etcdContainer)
}

// SetEtcdImage updates the stored pod under its resourceVersion, so a
// concurrent write is refused rather than overwritten.
func (e etcdPod) SetEtcdImage(image string) error {
	ns, name, err := e.find()
	if err != nil {
		return err
	}
	p, err := e.reg.GetPod(ns, name)
	if err != nil {
		return err
	}
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == etcdContainer {
			p.Spec.Containers[i].Image = image
		}
	}
	_, err = e.reg.UpdatePod(p)
	return err
}
