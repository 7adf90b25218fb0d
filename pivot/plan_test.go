package pivot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	btypes "github.com/bootlet/bootlet/types"
)

func TestDecidePivot(t *testing.T) {
	api, cm := DefaultComponents[0], DefaultComponents[1]
	adopted := &BootstrapFacts{UID: "u1", Owner: btypes.OwnerKubeletStatic}
	ready := SelfHostedFacts{Name: "x-1", Running: true, Ready: true}
	serving := ready
	serving.ServesReadyz = true
	notReady := SelfHostedFacts{Name: "x-0", Running: true}
	deleting := serving
	deleting.Deleting = true

	cases := []struct {
		name      string
		c         ComponentFacts
		endpoints bool
		withdraw  bool
		done      bool
		pod       string
		reason    string
	}{
		{"withdrawn already", ComponentFacts{Component: cm}, false, false, true, "", "no bootstrap pod"},
		{"being withdrawn", ComponentFacts{Component: cm, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerReleased, Terminating: true}, SelfHosted: []SelfHostedFacts{ready}}, true, false, false, "", "stopping"},
		{"not adopted", ComponentFacts{Component: cm, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerBootlet}, SelfHosted: []SelfHostedFacts{ready}}, true, false, false, "", "not adopted"},
		{"no self-hosted pod", ComponentFacts{Component: cm, Bootstrap: adopted}, true, false, false, "", "no self-hosted pod on this node"},
		{"self-hosted pod not ready", ComponentFacts{Component: cm, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{notReady}}, true, false, false, "", "x-0(running=true ready=false"},
		{"controller-manager ready", ComponentFacts{Component: cm, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{notReady, ready}}, false, true, false, "x-1", "Running and Ready"},
		{"deleting pod does not count", ComponentFacts{Component: cm, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{deleting}}, true, false, false, "", "deleting=true"},
		{"apiserver Ready by the kubelet only", ComponentFacts{Component: api, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{ready}}, true, false, false, "", "own process"},
		{"apiserver serving, endpoints not yet", ComponentFacts{Component: api, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{serving}}, false, false, false, "", "endpoints"},
		{"apiserver serving, endpoints listed", ComponentFacts{Component: api, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{serving}}, true, true, false, "x-1", "answers /readyz"},
		{"apiserver deleting", ComponentFacts{Component: api, Bootstrap: adopted, SelfHosted: []SelfHostedFacts{deleting}}, true, false, false, "", "no self-hosted pod Running and Ready"},
	}
	for _, tc := range cases {
		steps := Decide(Facts{Components: []ComponentFacts{tc.c}, EndpointsListNode: tc.endpoints})
		if len(steps) != 1 {
			t.Fatalf("%s: %d steps", tc.name, len(steps))
		}
		s := steps[0]
		if s.Withdraw != tc.withdraw || s.Done != tc.done || s.Pod != tc.pod || !strings.Contains(s.Reason, tc.reason) {
			t.Errorf("%s: got %+v, want withdraw=%v done=%v pod=%q reason containing %q", tc.name, s, tc.withdraw, tc.done, tc.pod, tc.reason)
		}
		if s.Component != tc.c.Component.Name {
			t.Errorf("%s: component %q", tc.name, s.Component)
		}
	}
}

func TestPivotComponentsIndependentAndDone(t *testing.T) {
	adopted := &BootstrapFacts{Owner: btypes.OwnerKubeletStatic}
	ready := SelfHostedFacts{Name: "p", Running: true, Ready: true}
	f := Facts{Components: []ComponentFacts{
		{Component: DefaultComponents[0], Bootstrap: adopted, SelfHosted: []SelfHostedFacts{ready}}, // apiserver: not verified
		{Component: DefaultComponents[1], Bootstrap: adopted, SelfHosted: []SelfHostedFacts{ready}},
		{Component: DefaultComponents[2]},
	}}
	steps := Decide(f)
	if steps[0].Withdraw || !steps[1].Withdraw || !steps[2].Done || Done(steps) {
		t.Errorf("steps %+v", steps)
	}
	if !Done(Decide(Facts{Components: []ComponentFacts{{Component: DefaultComponents[0]}}})) {
		t.Error("no bootstrap pod left: want done")
	}
	for _, c := range DefaultComponents {
		if c.Name == "etcd" || c.Bootstrap.Name == "etcd" {
			t.Error("etcd stays pinned: it must not be a pivot component")
		}
	}
}

func TestServingCandidate(t *testing.T) {
	api := DefaultComponents[0]
	ready := SelfHostedFacts{Name: "a", UID: "ua", Running: true, Ready: true}
	cases := []struct {
		name string
		c    ComponentFacts
		want string
	}{
		{"ready pod, adopted bootstrap", ComponentFacts{Component: api, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerKubeletStatic}, SelfHosted: []SelfHostedFacts{{Name: "n", Running: true}, ready}}, "a"},
		{"not an apiserver", ComponentFacts{Component: DefaultComponents[1], Bootstrap: &BootstrapFacts{Owner: btypes.OwnerKubeletStatic}, SelfHosted: []SelfHostedFacts{ready}}, ""},
		{"bootstrap gone", ComponentFacts{Component: api, SelfHosted: []SelfHostedFacts{ready}}, ""},
		{"bootstrap terminating", ComponentFacts{Component: api, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerReleased, Terminating: true}, SelfHosted: []SelfHostedFacts{ready}}, ""},
		{"bootstrap not adopted", ComponentFacts{Component: api, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerBootlet}, SelfHosted: []SelfHostedFacts{ready}}, ""},
		{"nothing ready", ComponentFacts{Component: api, Bootstrap: &BootstrapFacts{Owner: btypes.OwnerKubeletStatic}, SelfHosted: []SelfHostedFacts{{Name: "n", Running: true}}}, ""},
	}
	for _, tc := range cases {
		got := ""
		if p := servingCandidate(tc.c); p != nil {
			got = p.Name
		}
		if got != tc.want {
			t.Errorf("%s: candidate %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestSelfHostedFacts(t *testing.T) {
	now := metav1.Now()
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "u"}, Status: v1.PodStatus{Phase: v1.PodRunning,
		Conditions: []v1.PodCondition{{Type: v1.ContainersReady, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionTrue}}}}
	if f := selfHostedFacts(p); !f.Running || !f.Ready || f.Deleting || f.Name != "a" || f.UID != "u" {
		t.Errorf("%+v", f)
	}
	p.DeletionTimestamp = &now
	p.Status.Conditions[1].Status = v1.ConditionFalse
	p.Status.Phase = v1.PodPending
	if f := selfHostedFacts(p); f.Running || f.Ready || !f.Deleting {
		t.Errorf("%+v", f)
	}
	if bootstrapFacts(nil) != nil {
		t.Error("nil pod: want nil facts")
	}
	b := bootstrapFacts(&v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "b", DeletionTimestamp: &now, Annotations: map[string]string{btypes.AnnotationOwner: "kubelet-static"}}})
	if b.UID != "b" || !b.Terminating || b.Owner != btypes.OwnerKubeletStatic {
		t.Errorf("%+v", b)
	}
}

func TestAdvertiseAddressAndEndpoints(t *testing.T) {
	p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Command: []string{"kube-apiserver", "--advertise-address=10.0.0.7", "--secure-port=6443"}}}}}
	if got := advertiseAddress(p); got != "10.0.0.7" {
		t.Errorf("advertiseAddress %q", got)
	}
	if got := advertiseAddress(&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Args: []string{"--advertise-address=::1"}}}}}); got != "::1" {
		t.Errorf("advertiseAddress from args %q", got)
	}
	if got := advertiseAddress(&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Command: []string{"kube-apiserver"}}}}}); got != "" {
		t.Errorf("no flag: %q", got)
	}
	//lint:ignore SA1019 default/kubernetes is still written as Endpoints by the apiserver
	ep := &v1.Endpoints{Subsets: []v1.EndpointSubset{{Addresses: []v1.EndpointAddress{{IP: "10.0.0.8"}, {IP: "10.0.0.7"}}, NotReadyAddresses: []v1.EndpointAddress{{IP: "10.0.0.9"}}}}}
	for ip, want := range map[string]bool{"10.0.0.7": true, "10.0.0.9": false, "10.0.0.1": false} {
		if endpointsList(ep, ip) != want {
			t.Errorf("endpointsList(%s) != %v", ip, want)
		}
	}
	//lint:ignore SA1019 default/kubernetes is still written as Endpoints by the apiserver
	if endpointsList(nil, "10.0.0.7") || endpointsList(&v1.Endpoints{}, "10.0.0.7") {
		t.Error("empty endpoints list nothing")
	}
}

func TestReadObjects(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: kube-system}\n---\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d, namespace: kube-system}\n")
	write("b.json", `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"c"}}`)
	write(".hidden.yaml", "not: [yaml")
	write("notes.txt", "ignored")
	objs, err := readObjects(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	if strings.Join(got, " ") != "Secret/s DaemonSet/d ClusterRoleBinding/c" {
		t.Errorf("objects %v", got)
	}
	write("c.yaml", "kind: Secret\nmetadata: {name: x}\n")
	if _, err := readObjects(dir); err == nil || !strings.Contains(err.Error(), "c.yaml: document 0") {
		t.Errorf("an object without apiVersion: err %v", err)
	}
	if _, err := readObjects(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing dir: want an error")
	}
}

func TestEnsureTCPMigrateReq(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tcp_migrate_req")
	if v, err := EnsureTCPMigrateReq(p, true); v != "" || err != nil {
		t.Errorf("absent: %q %v", v, err)
	}
	if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := EnsureTCPMigrateReq(p, false); v != "0" || err != nil {
		t.Errorf("off: %q %v", v, err)
	}
	if v, err := EnsureTCPMigrateReq(p, true); v != "1" || err != nil {
		t.Errorf("on: %q %v", v, err)
	}
	if data, _ := os.ReadFile(p); strings.TrimSpace(string(data)) != "1" {
		t.Errorf("file holds %q", data)
	}
}

func TestCreateObjects(t *testing.T) {
	secretGVK := schema.GroupVersionKind{Version: "v1", Kind: "Secret"}
	dsGVK := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}
	crbGVK := schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(secretGVK, meta.RESTScopeNamespace)
	mapper.Add(dsGVK, meta.RESTScopeNamespace)
	mapper.Add(crbGVK, meta.RESTScopeRoot)
	obj := func(gvk schema.GroupVersionKind, ns, name, marker string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(map[string]string{"marker": marker})
		return u
	}
	// The DaemonSet exists already, changed since (an upgrade): it must be
	// left as it is.
	existing := obj(dsGVK, "kube-system", "kube-apiserver", "upgraded")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "secrets"}:                                                 "SecretList",
		{Group: "apps", Version: "v1", Resource: "daemonsets"}:                               "DaemonSetList",
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}: "ClusterRoleBindingList",
	}, existing)
	objs := []*unstructured.Unstructured{
		obj(secretGVK, "kube-system", "kube-apiserver", "rendered"),
		obj(dsGVK, "kube-system", "kube-apiserver", "rendered"),
		obj(crbGVK, "", "kubeadm:apiserver-kubelet-client", "rendered"),
	}
	created, existed, err := createObjects(context.Background(), dyn, mapper, objs)
	if err != nil || created != 2 || existed != 1 {
		t.Fatalf("created %d existed %d err %v, want 2 1 nil", created, existed, err)
	}
	ds, err := dyn.Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}).Namespace("kube-system").Get(context.Background(), "kube-apiserver", metav1.GetOptions{})
	if err != nil || ds.GetLabels()["marker"] != "upgraded" {
		t.Errorf("the existing DaemonSet was changed: %v %v", ds, err)
	}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}).Get(context.Background(), "kubeadm:apiserver-kubelet-client", metav1.GetOptions{}); err != nil {
		t.Errorf("cluster-scoped binding not created: %v", err)
	}
	// Again: everything exists, nothing changes.
	if created, existed, err := createObjects(context.Background(), dyn, mapper, objs); err != nil || created != 0 || existed != 3 {
		t.Errorf("second pass: created %d existed %d err %v, want 0 3 nil", created, existed, err)
	}
	// An unknown kind is an error that names the object.
	bad := obj(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "kube-system", "w", "x")
	if _, _, err := createObjects(context.Background(), dyn, mapper, []*unstructured.Unstructured{bad}); err == nil || !strings.Contains(err.Error(), "Widget kube-system/w") {
		t.Errorf("unknown kind: err %v", err)
	}
}
