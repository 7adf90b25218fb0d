package upgrade

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	btypes "github.com/bootlet/bootlet/types"
)

func TestVersionOfImage(t *testing.T) {
	for ref, want := range map[string]string{
		"registry.k8s.io/kube-apiserver:v1.36.3":              "v1.36.3",
		"registry.k8s.io/etcd:3.6.8-0":                        "3.6.8",
		"registry.k8s.io/etcd:3.7.0":                          "3.7.0",
		"registry.k8s.io/coredns/coredns:v1.14.2":             "v1.14.2",
		"localhost:5000/kube-apiserver:v1.37.2":               "v1.37.2",
		"localhost:5000/kube-apiserver":                       "",
		"registry.k8s.io/kube-proxy:v1.36.3@sha256:0123abcd":  "v1.36.3",
		"registry.k8s.io/kube-proxy@sha256:0123abcd":          "",
		"bootlet.dev/kubelet:v1.37.2":                         "v1.37.2",
		"registry.k8s.io/kube-apiserver:v1.36.3-bootlet.rc-1": "v1.36.3-bootlet.rc-1",
		"registry.k8s.io/etcd:v3.6.0-rc.1":                    "v3.6.0-rc.1",
		"sha256:0123abcd":                                     "",
	} {
		if got := VersionOfImage(ref); got != want {
			t.Errorf("VersionOfImage(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestReleaseImages(t *testing.T) {
	v, err := Release("v1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	for comp, ref := range Images(v) {
		if got := VersionOfImage(ref); got != v.Of(comp) {
			t.Errorf("%s's image %s reads as %q, want %q", comp, ref, got, v.Of(comp))
		}
	}
	if n := len(NodeImages(v, true)); n != 7 {
		t.Errorf("a master needs %d images, want 7", n)
	}
	if got := NodeImages(v, false); !reflect.DeepEqual(got, []string{"bootlet.dev/kubelet:v1.37.2", "registry.k8s.io/coredns/coredns:v1.14.6", "registry.k8s.io/kube-proxy:v1.37.2"}) {
		t.Errorf("a worker needs %v", got)
	}
	if _, err := Release("v1.38.0"); err == nil || !contains(err.Error(), "v1.36.3, v1.37.2") {
		t.Errorf("Release(v1.38.0) = %v, want an error listing the releases", err)
	}
	if got := EtcdReleases(); !reflect.DeepEqual(got, []string{"3.6.8", "3.7.0"}) {
		t.Errorf("EtcdReleases() = %v", got)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func node(name string, master, ready bool, kubelet string, images ...string) v1.Node {
	n := v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if master {
		n.Labels[btypes.LabelControlPlane] = ""
	}
	st := v1.ConditionFalse
	if ready {
		st = v1.ConditionTrue
	}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: st}}
	n.Status.NodeInfo.KubeletVersion = kubelet
	if len(images) > 0 {
		n.Status.Images = []v1.ContainerImage{{Names: images}}
	}
	return n
}

func pod(name, nodeName string, images map[string]string, running map[string]string) v1.Pod {
	p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"}, Spec: v1.PodSpec{NodeName: nodeName}}
	for c, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: img})
	}
	for c, img := range running {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, v1.ContainerStatus{Name: c, Image: img, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}})
	}
	p.Status.Phase = v1.PodRunning
	return p
}

func TestObserve(t *testing.T) {
	target := Releases["v1.37.2"]
	all := NodeImages(target, true)
	obs := Observed{
		Nodes: []v1.Node{
			node("w1", false, true, "v1.36.3", "registry.k8s.io/kube-proxy:v1.37.2"),
			node("m1", true, true, "v1.36.3", all...),
		},
		Pods: []v1.Pod{
			pod("etcd-m1", "m1", map[string]string{"etcd": "registry.k8s.io/etcd:3.6.8-0"}, map[string]string{"etcd": "registry.k8s.io/etcd:3.6.8-0"}),
			// A surge: the new pod's spec is the target, but it does not
			// run yet; the old one runs v1.36.3.
			pod("kube-apiserver-new", "m1", map[string]string{"kube-apiserver": "registry.k8s.io/kube-apiserver:v1.37.2"}, map[string]string{"kube-apiserver": "registry.k8s.io/kube-apiserver:v1.37.2"}),
			pod("kube-apiserver-old", "m1", map[string]string{"kube-apiserver": "registry.k8s.io/kube-apiserver:v1.36.3"}, map[string]string{"kube-apiserver": "registry.k8s.io/kube-apiserver:v1.36.3"}),
			pod("kube-controller-manager-x", "m1", map[string]string{"kube-controller-manager": "registry.k8s.io/kube-controller-manager:v1.36.3"}, nil),
			pod("kube-scheduler-x", "m1", map[string]string{"kube-scheduler": "registry.k8s.io/kube-scheduler:v1.36.3"}, nil),
			pod("kube-proxy-w1", "w1", map[string]string{"kube-proxy": "registry.k8s.io/kube-proxy:v1.36.3"}, nil),
			pod("unscheduled", "", map[string]string{"kube-apiserver": "registry.k8s.io/kube-apiserver:v1.35.0"}, nil),
			pod("other", "w1", map[string]string{"web": "bootlet.dev/testserver:1"}, nil),
		},
		DaemonSets:  []appsv1.DaemonSet{{Spec: appsv1.DaemonSetSpec{Template: v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.36.3"}}}}}}},
		Deployments: []appsv1.Deployment{{Spec: appsv1.DeploymentSpec{Template: v1.PodTemplateSpec{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "coredns", Image: "registry.k8s.io/coredns/coredns:v1.14.2"}}}}}}},
		EtcdMembers: []EtcdMember{{Name: "m1", Version: "3.6.8", Healthy: true}},
		EtcdLeader:  true,
	}
	got := Observe(obs, target)
	want := Cluster{
		Nodes: []Node{
			{Name: "m1", Master: true, Ready: true, Running: map[Component]string{Etcd: "3.6.8", APIServer: "v1.36.3", ControllerManager: "v1.36.3", Scheduler: "v1.36.3", Kubelet: "v1.36.3"}},
			{Name: "w1", Ready: true, Running: map[Component]string{Kubelet: "v1.36.3", KubeProxy: "v1.36.3"}, MissingImages: []string{"bootlet.dev/kubelet:v1.37.2", "registry.k8s.io/coredns/coredns:v1.14.6"}},
		},
		EtcdMembers: obs.EtcdMembers,
		EtcdLeader:  true,
		Addons:      map[Component]string{KubeProxy: "v1.36.3", CoreDNS: "v1.14.2"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Observe:\n got %+v\nwant %+v", got, want)
	}
	// The observed cluster plans the whole upgrade, and preflight refuses
	// only the worker's missing images.
	refusals := Preflight(got, Releases["v1.36.3"], target)
	if r := reasons(refusals); !reflect.DeepEqual(r, []string{ReasonImagesMissing}) {
		t.Errorf("Preflight: %v", refusals)
	}
	steps, err := Plan(got, target, EtcdReleases())
	if err != nil {
		t.Fatal(err)
	}
	var order []Component
	for _, s := range steps {
		order = append(order, s.Component)
	}
	wantOrder := []Component{Etcd, APIServer, ControllerManager, Scheduler, KubeProxy, CoreDNS, Kubelet, Kubelet}
	if !reflect.DeepEqual(order, wantOrder) {
		t.Errorf("plan %v, want %v", steps, wantOrder)
	}
}
