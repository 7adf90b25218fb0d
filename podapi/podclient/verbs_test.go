package podclient

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

func TestGet(t *testing.T) {
	cs := fake.NewSimpleClientset(
		pod("default", "a", "i", map[string]string{"app": "x"}),
		pod("default", "b", "i", nil),
		pod("kube-system", "c", "i", nil),
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}},
	)
	names := func(obj runtime.Object) []string {
		switch o := obj.(type) {
		case *v1.Pod:
			return []string{o.Namespace + "/" + o.Name}
		case *v1.PodList:
			var out []string
			for _, p := range o.Items {
				out = append(out, p.Namespace+"/"+p.Name)
			}
			return out
		case *v1.Node:
			return []string{o.Name}
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		q    Query
		want []string
		err  string
	}{
		{"one namespace's pods", Query{Resource: "pods", Namespace: "default"}, []string{"default/a", "default/b"}, ""},
		{"all namespaces", Query{Resource: "pods"}, []string{"default/a", "default/b", "kube-system/c"}, ""},
		{"by selector", Query{Resource: "pods", Selector: "app=x"}, []string{"default/a"}, ""},
		{"a named pod without a namespace is default's", Query{Resource: "pods", Name: "b"}, []string{"default/b"}, ""},
		{"a named pod elsewhere", Query{Resource: "pods", Name: "c", Namespace: "kube-system"}, []string{"kube-system/c"}, ""},
		{"a node", Query{Resource: "nodes", Name: "node1"}, []string{"node1"}, ""},
		{"not found", Query{Resource: "pods", Name: "c"}, nil, "not found"},
		{"unknown resource", Query{Resource: "services"}, nil, `the server doesn't have a resource type "services"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := Get(context.Background(), cs, tc.q)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(obj); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDelete(t *testing.T) {
	grace := int64(0)
	for _, tc := range []struct {
		name     string
		resource string
		names    []string
		wantErr  string
		deleted  []string
		left     int // pods left in default
	}{
		{"pods, waiting", "pods", []string{"a", "b"}, "", []string{"pod/a", "pod/b"}, 0},
		{"stops at the first missing", "pods", []string{"a", "nope", "b"}, "not found", []string{"pod/a"}, 1},
		{"a configmap", "configmaps", []string{"cm"}, "", []string{"configmap/cm"}, 2},
		{"unknown resource", "services", []string{"a"}, `cannot delete "services"`, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewSimpleClientset(pod("default", "a", "i", nil), pod("default", "b", "i", nil),
				&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm"}})
			var deleted []string
			err := Delete(context.Background(), cs, tc.resource, "default", tc.names, DeleteOptions{
				GracePeriodSeconds: &grace, Wait: true,
				Deleted: func(kind, name string) { deleted = append(deleted, kind+"/"+name) },
			})
			if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			if !reflect.DeepEqual(deleted, tc.deleted) {
				t.Errorf("deleted %v, want %v", deleted, tc.deleted)
			}
			pods, _ := cs.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
			if len(pods.Items) != tc.left {
				t.Errorf("%d pods left, want %d", len(pods.Items), tc.left)
			}
		})
	}
}

// TestDeleteWaitsUntilGone: the daemon answers a pod's delete at once and
// removes it once its containers stopped; Delete returns only then.
func TestDeleteWaitsUntilGone(t *testing.T) {
	cs := fake.NewSimpleClientset(pod("default", "a", "i", nil))
	gets := 0
	cs.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil // accepted, still there
	})
	cs.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		if gets == 3 {
			_ = cs.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), "default", "a")
		}
		return false, nil, nil
	})
	start := time.Now()
	if err := Delete(context.Background(), cs, "pods", "default", []string{"a"}, DeleteOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
	if gets != 3 || time.Since(start) < 2*pollGone {
		t.Fatalf("returned after %d gets in %s", gets, time.Since(start))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*pollGone)
	defer cancel()
	cs = fake.NewSimpleClientset(pod("default", "a", "i", nil))
	cs.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, nil })
	if err := Delete(ctx, cs, "pods", "default", []string{"a"}, DeleteOptions{Wait: true}); err != context.DeadlineExceeded {
		t.Fatalf("a pod that stays: %v, want the context's deadline", err)
	}
}

func TestLogs(t *testing.T) {
	cs := fake.NewSimpleClientset(pod("default", "a", "i", nil))
	var out strings.Builder
	if err := Logs(context.Background(), cs, "default", "a", &v1.PodLogOptions{Container: "c"}, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "fake logs" { // what client-go's fake streams
		t.Fatalf("got %q", out.String())
	}
}

func TestKubeconfig(t *testing.T) {
	var got *http.Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		_, _ = io.WriteString(w, "apiVersion: v1\nkind: Config\n")
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  KubeconfigRequest
		want string
	}{
		{"defaults left to the daemon", KubeconfigRequest{User: "u"}, "user=u"},
		{"every field", KubeconfigRequest{User: "u", Groups: []string{"g1", "g2"}, Server: "https://10.0.0.1:6443", Validity: "1h"},
			"group=g1&group=g2&server=https%3A%2F%2F10.0.0.1%3A6443&user=u&validity=1h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Kubeconfig(context.Background(), cs, tc.req)
			if err != nil || string(b) != "apiVersion: v1\nkind: Config\n" {
				t.Fatalf("%q, %v", b, err)
			}
			if got.Method != http.MethodPost || got.URL.Path != kubeconfigPath || got.URL.Query().Encode() != tc.want {
				t.Fatalf("%s %s, want POST %s?%s", got.Method, got.URL, kubeconfigPath, tc.want)
			}
		})
	}
}
