package checkpointer

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestUngatedBy(t *testing.T) {
	pod := func(container, image string) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "sidecar", Image: "busybox:v1.37.2"}, {Name: container, Image: image}}}}
	}
	apiserver := UngatedStep{Component: "kube-apiserver", Node: "n1", To: "v1.37.2"}
	for _, tc := range []struct {
		name  string
		comp  string
		steps []UngatedStep
		pod   *v1.Pod
		want  string
	}{
		{"the step's version on its node", "kube-apiserver", []UngatedStep{apiserver}, pod("kube-apiserver", "registry.k8s.io/kube-apiserver:v1.37.2"), "kube-apiserver's step on n1 to v1.37.2"},
		{"the version the step leaves", "kube-apiserver", []UngatedStep{apiserver}, pod("kube-apiserver", "registry.k8s.io/kube-apiserver:v1.36.3"), ""},
		{"another node's step", "kube-apiserver", []UngatedStep{{Component: "kube-apiserver", Node: "n2", To: "v1.37.2"}}, pod("kube-apiserver", "registry.k8s.io/kube-apiserver:v1.37.2"), ""},
		{"another component's step", "kube-apiserver", []UngatedStep{{Component: "kube-scheduler", Node: "n1", To: "v1.37.2"}}, pod("kube-apiserver", "registry.k8s.io/kube-apiserver:v1.37.2"), ""},
		{"a cluster-wide step", "coredns", []UngatedStep{{Component: "coredns", To: "v1.14.6"}}, pod("coredns", "registry.k8s.io/coredns/coredns:v1.14.6"), "coredns's step to v1.14.6"},
		{"a container of another name at the version", "kube-apiserver", []UngatedStep{apiserver}, pod("other", "registry.k8s.io/kube-apiserver:v1.37.2"), ""},
		{"none in flight", "kube-apiserver", nil, pod("kube-apiserver", "registry.k8s.io/kube-apiserver:v1.37.2"), ""},
	} {
		if got := ungatedBy(tc.steps, tc.comp, "n1", tc.pod); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestReadUngatedSteps(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   []UngatedStep
		err    bool
	}{
		{"a step in flight", http.StatusOK, `{"apiVersion":"bootlet.dev/v1alpha1","kind":"ClusterVersion","metadata":{"name":"cluster"},"spec":{"desiredVersion":"v1.37.2"},
			"status":{"inFlight":{"component":"kube-apiserver","node":"n1","from":"v1.36.3","to":"v1.37.2"}}}`,
			[]UngatedStep{{Component: "kube-apiserver", Node: "n1", To: "v1.37.2"}}, false},
		{"a step being put back", http.StatusOK, `{"apiVersion":"bootlet.dev/v1alpha1","kind":"ClusterVersion","metadata":{"name":"cluster"},"spec":{"desiredVersion":"v1.37.2"},
			"status":{"rollingBack":{"component":"kube-scheduler","node":"n1","from":"v1.36.3","to":"v1.37.2"}}}`,
			[]UngatedStep{{Component: "kube-scheduler", Node: "n1", To: "v1.37.2"}}, false},
		{"no upgrade under way", http.StatusOK, `{"apiVersion":"bootlet.dev/v1alpha1","kind":"ClusterVersion","metadata":{"name":"cluster"},"spec":{"desiredVersion":"v1.37.2"}}`, nil, false},
		{"no ClusterVersion", http.StatusNotFound, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, nil, false},
		{"forbidden", http.StatusForbidden, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/apis/bootlet.dev/v1alpha1/clusterversions/cluster" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			got, err := readUngatedSteps(context.Background(), cs)
			if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
				t.Errorf("got %+v, %v; want %+v, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}
