package pivot

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	btypes "github.com/bootlet/bootlet/types"
)

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

// A second master's pivot: the apiserver refuses an existing Service with a
// fixed clusterIP as Invalid (its IP is allocated) before AlreadyExists.
// It exists, so it counts as existing; an Invalid object that does not
// exist is still an error.
func TestCreateObjectsServiceIPTaken(t *testing.T) {
	svcGVK := schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(svcGVK, meta.RESTScopeNamespace)
	svc := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(svcGVK)
		u.SetNamespace("kube-system")
		u.SetName(name)
		return u
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Version: "v1", Resource: "services"}: "ServiceList",
	}, svc("kube-dns"))
	dyn.PrependReactor("create", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "kube-dns",
			field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs"), []string{"10.96.0.10"}, "failed to allocate IP 10.96.0.10: provided IP is already allocated")})
	})
	created, existed, err := createObjects(context.Background(), dyn, mapper, []*unstructured.Unstructured{svc("kube-dns")})
	if err != nil || created != 0 || existed != 1 {
		t.Errorf("created %d existed %d err %v, want 0 1 nil", created, existed, err)
	}
	if _, _, err := createObjects(context.Background(), dyn, mapper, []*unstructured.Unstructured{svc("other")}); err == nil || !strings.Contains(err.Error(), "Service kube-system/other") {
		t.Errorf("an Invalid Service that does not exist: err %v", err)
	}
}

// TestWaitNodeLabelledWaitsForItsOwnAPIServer: the label that lets the
// self-hosted apiserver start on this node is set only once this node's
// own bootstrap apiserver serves, though the API answered (through another
// master) long before; a node labelled already is not asked about.
func TestWaitNodeLabelledWaitsForItsOwnAPIServer(t *testing.T) {
	ctx := context.Background()
	kube := kubefake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-2"}})
	asked := 0
	ownServes := func(context.Context) (string, bool, string) {
		asked++
		// Is the node labelled before its apiserver served? It must not be.
		if n, _ := kube.CoreV1().Nodes().Get(ctx, "master-2", metav1.GetOptions{}); n.Labels[btypes.LabelControlPlane] == "" && len(n.Labels) > 0 {
			t.Errorf("labels %v before the own apiserver served", n.Labels)
		}
		if asked < 3 {
			return "192.0.2.12:6443", false, "connection refused"
		}
		return "192.0.2.12:6443", true, ""
	}
	if !waitNodeLabelled(ctx, kube, "master-2", ownServes) {
		t.Fatal("waitNodeLabelled returned false")
	}
	n, err := kube.CoreV1().Nodes().Get(ctx, "master-2", metav1.GetOptions{})
	_, pods := n.Labels[btypes.LabelControlPlanePods]
	if _, ok := n.Labels[btypes.LabelControlPlane]; err != nil || !ok || !pods || asked != 3 {
		t.Fatalf("labels %v (err %v) after asking %d times; want labelled on the third, the first that served", n.Labels, err, asked)
	}
	patches := 0
	for _, a := range kube.Actions() {
		if a.GetVerb() == "patch" {
			patches++
		}
	}
	if patches != 1 {
		t.Errorf("%d patches, want 1", patches)
	}
	// Labelled already: returns at once, asks nothing, patches nothing.
	kube.ClearActions()
	if !waitNodeLabelled(ctx, kube, "master-2", func(context.Context) (string, bool, string) {
		t.Error("asked the own apiserver of a labelled node")
		return "", false, ""
	}) {
		t.Fatal("waitNodeLabelled returned false")
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("a labelled node: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	// No bootstrap apiserver known: labelled without waiting.
	kube = kubefake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "master-3"}})
	if !waitNodeLabelled(ctx, kube, "master-3", func(context.Context) (string, bool, string) { return "", false, "" }) {
		t.Fatal("waitNodeLabelled returned false")
	}
	if n, _ := kube.CoreV1().Nodes().Get(ctx, "master-3", metav1.GetOptions{}); n.Labels[btypes.LabelControlPlane] != "" || len(n.Labels) != 2 {
		t.Errorf("labels %v, want the control-plane label and its pods'", n.Labels)
	}
}

// registryPods is bootlet's registry with the pods it holds by name.
type registryPods map[string]*v1.Pod

func (r registryPods) GetPod(ns, name string) (*v1.Pod, error) {
	if p, ok := r[ns+"/"+name]; ok {
		return p, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, name)
}

func (r registryPods) DeletePod(string, string, *metav1.DeleteOptions) (*v1.Pod, error) {
	return nil, fmt.Errorf("not used")
}

// TestOwnAPIServer asks the bootstrap apiserver of bootlet's registry at
// its advertise address and secure port, with the pivot's TLS settings,
// not the kubeconfig's host (another master's VIP).
func TestOwnAPIServer(t *testing.T) {
	ready := "[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\nreadyz check failed"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if ready != "ok" {
			http.Error(w, ready, http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	rc := &rest.Config{Host: "https://192.0.2.10:6443", TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}
	pods := registryPods{}
	check := ownAPIServer(rc, pods, DefaultComponents)
	ctx := context.Background()
	if own, _, _ := check(ctx); own != "" {
		t.Errorf("no bootstrap apiserver in the registry: address %q, want none", own)
	}
	pods["kube-system/kube-apiserver"] = &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{
		Command: []string{"kube-apiserver", "--advertise-address=" + host, "--secure-port=" + port}}}}}
	own, serves, why := check(ctx)
	if own != srv.Listener.Addr().String() || serves || !strings.Contains(why, "rbac/bootstrap-roles") {
		t.Errorf("starting: %q %v %q, want its address, not serving, why naming the failed check", own, serves, why)
	}
	ready = "ok"
	if own, serves, why = check(ctx); !serves {
		t.Errorf("serving: %q %v %q, want serving", own, serves, why)
	}
}
