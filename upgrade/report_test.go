package upgrade

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func TestPlanSkew(t *testing.T) {
	from, to := Releases["v1.36.3"], Releases["v1.37.2"]
	c := cluster(from, master("m1", from), master("m2", from), master("m3", from), worker("w1", from))
	steps, err := Plan(c, to, EtcdReleases())
	if err != nil {
		t.Fatal(err)
	}
	if v := PlanSkew(c, steps); len(v) != 0 {
		t.Errorf("the planner's order breaks the policy: %v", v)
	}
	tests := []struct {
		name  string
		steps []Step
		want  string
	}{
		{"a controller-manager before an apiserver",
			[]Step{{Component: ControllerManager, Node: "m1", From: "v1.36.3", To: "v1.37.2"}},
			"kube-controller-manager on m1 runs 1.37.2, newer than the apiserver"},
		{"a kubelet first",
			[]Step{{Component: Kubelet, Node: "w1", From: "v1.36.3", To: "v1.37.2"}},
			"kubelet on w1 runs 1.37.2, newer"},
		{"kube-proxy first",
			[]Step{{Component: KubeProxy, From: "v1.36.3", To: "v1.37.2"}},
			"kube-proxy runs 1.37.2, newer"},
		{"apiservers two minors apart",
			[]Step{{Component: APIServer, Node: "m1", From: "v1.36.3", To: "v1.38.0"}},
			"more than one minor apart"},
	}
	for _, tt := range tests {
		v := PlanSkew(c, tt.steps)
		if len(v) == 0 || !strings.Contains(strings.Join(v, "\n"), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, v, tt.want)
		}
	}
	// Apply leaves its input alone.
	_ = Apply(c, steps[0])
	if c.Nodes[0].Running[Etcd] != from.Etcd {
		t.Errorf("Apply changed its input: %v", c.Nodes[0].Running)
	}
}

func TestCurrent(t *testing.T) {
	from, to := Releases["v1.36.3"], Releases["v1.37.2"]
	half := cluster(from, master("m1", to), master("m2", from))
	if got, err := Current(half); err != nil || got != from {
		t.Errorf("Current of a half-upgraded cluster = %v, %v; want %v", got, err, from)
	}
	// Every apiserver through, etcd not yet: the release of the
	// apiservers, with the etcd that runs.
	rest := cluster(to, master("m1", Versions{Kubernetes: to.Kubernetes, Etcd: from.Etcd}))
	if got, err := Current(rest); err != nil || got.Kubernetes != to.Kubernetes || got.Etcd != from.Etcd || got.CoreDNS != to.CoreDNS {
		t.Errorf("Current with etcd behind = %v, %v", got, err)
	}
	if _, err := Current(cluster(from, worker("w1", from))); err == nil {
		t.Error("Current with no apiserver: no error")
	}
	odd := cluster(from, master("m1", Versions{Kubernetes: "v1.35.0", Etcd: "3.6.8"}))
	if _, err := Current(odd); err == nil || !strings.Contains(err.Error(), "v1.35.0") {
		t.Errorf("Current of a release bootlet has no images for: %v", err)
	}
}

func TestPlanReport(t *testing.T) {
	from, to := Releases["v1.36.3"], Releases["v1.37.2"]
	w := worker("w1", from)
	w.Ready = false
	w.MissingImages = []string{"bootlet.dev/kubelet:v1.37.2"}
	c := cluster(from, master("m1", from), w)
	r, err := MakePlanReport(c, to)
	if err != nil {
		t.Fatal(err)
	}
	if got := reasons(r.Refusals); strings.Join(got, ",") != ReasonNodeNotReady+","+ReasonImagesMissing {
		t.Errorf("refusals %v", r.Refusals)
	}
	var out bytes.Buffer
	if err := r.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Upgrade from v1.36.3 (etcd 3.6.8, CoreDNS v1.14.2) to v1.37.2 (etcd 3.7.0, CoreDNS v1.14.6): refused (2 reasons)",
		"NodeNotReady: node w1 is not Ready",
		"etcd", "3.6.8", "3.7.0",
		"cordon and drain first",
		"every step keeps the policy",
		"w1: missing bootlet.dev/kubelet:v1.37.2",
		"m1: all present",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	if !regexp.MustCompile(`(?m)^\s+8\s+kubelet\s+w1\s+v1\.36\.3\s+v1\.37\.2\s+cordon`).MatchString(out.String()) {
		t.Errorf("the worker's kubelet is not the last step:\n%s", out.String())
	}
	for masters, want := range map[int]string{1: "etcd has 1 member(s): 2 helper member(s)", 2: "etcd has 2 member(s): 1 helper member(s)", 3: ""} {
		var ns []Node
		for i := range masters {
			ns = append(ns, master(fmt.Sprintf("m%d", i+1), from))
		}
		r, _ := MakePlanReport(cluster(from, ns...), to)
		out.Reset()
		r.Write(&out)
		if len(r.Refusals) > 0 || want != "" && strings.Count(out.String(), want) != masters || want == "" && strings.Contains(out.String(), "helper") {
			t.Errorf("%d masters: refusals %v, want every etcd step noted %q:\n%s", masters, r.Refusals, want, out.String())
		}
	}
	down := cluster(from, master("m1", from))
	down.Nodes[0].Running[Etcd] = "3.8.0"
	r, _ = MakePlanReport(down, to)
	out.Reset()
	r.Write(&out)
	if !strings.Contains(out.String(), "No plan: etcd on m1: etcd 3.8.0 to 3.7.0 goes down") || strings.Contains(out.String(), "No step") {
		t.Errorf("a plan that cannot be made:\n%s", out.String())
	}
	done, err := MakePlanReport(cluster(to, master("m1", to)), to)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	done.Write(&out)
	if !strings.Contains(out.String(), "No step") || !strings.Contains(out.String(), "refused (1 reason)\n  AlreadyRuns: the cluster already runs v1.37.2") {
		t.Errorf("a cluster at the target:\n%s", out.String())
	}
}
