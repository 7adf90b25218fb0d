package upgrade

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

var (
	v136 = Versions{Kubernetes: "v1.36.3", Etcd: "3.6.8", CoreDNS: "v1.12.1"}
	v137 = Versions{Kubernetes: "v1.37.2", Etcd: "3.6.16", CoreDNS: "v1.12.4"}
)

// master is a Ready master running v at every component.
func master(name string, v Versions) Node {
	return Node{Name: name, Master: true, Ready: true, Running: map[Component]string{
		Etcd: v.Etcd, APIServer: v.Kubernetes, ControllerManager: v.Kubernetes, Scheduler: v.Kubernetes, Kubelet: v.Kubernetes}}
}

func worker(name string, v Versions) Node {
	return Node{Name: name, Ready: true, Running: map[Component]string{Kubelet: v.Kubernetes}}
}

func cluster(v Versions, nodes ...Node) Cluster {
	c := Cluster{Nodes: nodes, EtcdLeader: true, Addons: map[Component]string{KubeProxy: v.Kubernetes, CoreDNS: v.CoreDNS}}
	for _, n := range nodes {
		if n.Master {
			c.EtcdMembers = append(c.EtcdMembers, EtcdMember{Name: n.Name, Version: n.Running[Etcd], Healthy: true})
		}
	}
	return c
}

func reasons(rs []Refusal) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Reason)
	}
	return out
}

func TestPreflight(t *testing.T) {
	healthy := cluster(v136, master("m1", v136), worker("w1", v136))
	tests := []struct {
		name    string
		c       Cluster
		to      string
		want    []string
		message string
	}{
		{"one minor up", healthy, "v1.37.2", nil, ""},
		{"a patch up", healthy, "v1.36.5", nil, ""},
		{"two minors", healthy, "v1.38.0", []string{ReasonNotOneMinor}, "to v1.37 first"},
		{"down", healthy, "v1.35.4", []string{ReasonNotOneMinor}, "goes down"},
		{"a patch down", healthy, "v1.36.1", []string{ReasonNotOneMinor}, "goes down"},
		{"same", healthy, "v1.36.3", []string{ReasonAlreadyRuns}, "already runs"},
		{"not a version", healthy, "latest", []string{ReasonInvalidVersion}, "latest"},
		{"a node not Ready", func() Cluster {
			c := cluster(v136, master("m1", v136), worker("w1", v136))
			c.Nodes[1].Ready = false
			return c
		}(), "v1.37.2",
			[]string{ReasonNodeNotReady}, "node w1"},
		{"images missing", func() Cluster {
			c := cluster(v136, master("m1", v136), worker("w1", v136))
			c.Nodes[1].MissingImages = []string{"kubelet:v1.37.2"}
			return c
		}(), "v1.37.2", []string{ReasonImagesMissing}, "kubelet:v1.37.2"},
		{"etcd member unhealthy and no leader", func() Cluster {
			c := cluster(v136, master("m1", v136), master("m2", v136), master("m3", v136))
			c.EtcdMembers[1].Healthy, c.EtcdLeader = false, false
			return c
		}(), "v1.37.2", []string{ReasonEtcdUnhealthy, ReasonEtcdUnhealthy}, "m2"},
		{"a master without a member", func() Cluster {
			c := cluster(v136, master("m1", v136), master("m2", v136))
			c.EtcdMembers = c.EtcdMembers[:1]
			return c
		}(), "v1.37.2", []string{ReasonEtcdMemberAbsent}, "m2"},
		{"a learner", func() Cluster {
			c := cluster(v136, master("m1", v136), master("m2", v136))
			c.EtcdMembers[1].Learner = true
			return c
		}(), "v1.37.2", []string{ReasonEtcdUnhealthy}, "learner"},
		{"a kubelet too old", cluster(v136, master("m1", v136), worker("w1", Versions{Kubernetes: "v1.33.9"})), "v1.37.2",
			[]string{ReasonKubeletTooOld}, "w1"},
		{"every reason at once", func() Cluster {
			c := cluster(v136, master("m1", v136), worker("w1", v136))
			c.Nodes[1].Ready, c.Nodes[1].MissingImages, c.EtcdLeader = false, []string{"x"}, false
			return c
		}(), "v1.37.2", []string{ReasonNodeNotReady, ReasonImagesMissing, ReasonEtcdUnhealthy}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Preflight(tc.c, v136, Versions{Kubernetes: tc.to})
			if !reflect.DeepEqual(reasons(got), tc.want) {
				t.Fatalf("refusals %v, want %v: %+v", reasons(got), tc.want, got)
			}
			if tc.message != "" && !strings.Contains(got[0].Message, tc.message) {
				t.Errorf("message %q does not say %q", got[0].Message, tc.message)
			}
		})
	}
}

func TestSkewViolations(t *testing.T) {
	mixed := func(f func(c *Cluster)) Cluster {
		c := cluster(v136, master("m1", v136), master("m2", v136), worker("w1", v136))
		f(&c)
		return c
	}
	tests := []struct {
		name string
		c    Cluster
		want string
	}{
		{"one version", mixed(func(*Cluster) {}), ""},
		{"an apiserver ahead", mixed(func(c *Cluster) { c.Nodes[0].Running[APIServer] = "v1.37.2" }), ""},
		{"apiservers two minors apart", mixed(func(c *Cluster) { c.Nodes[0].Running[APIServer] = "v1.38.0" }), "more than one minor apart"},
		{"a controller-manager ahead of an apiserver", mixed(func(c *Cluster) {
			c.Nodes[0].Running[APIServer], c.Nodes[0].Running[ControllerManager] = "v1.37.2", "v1.37.2"
		}), "kube-controller-manager on m1 runs 1.37.2, newer than the apiserver on m2"},
		{"a kubelet ahead of an apiserver", mixed(func(c *Cluster) { c.Nodes[2].Running[Kubelet] = "v1.37.2" }), "kubelet on w1"},
		{"kube-proxy ahead", mixed(func(c *Cluster) { c.Addons[KubeProxy] = "v1.37.2" }), "kube-proxy runs"},
		{"a kubelet four minors behind", mixed(func(c *Cluster) { c.Nodes[2].Running[Kubelet] = "v1.32.0" }), "more than 3 minors older"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Join(SkewViolations(tc.c), "; ")
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("violations %q, want %q", got, tc.want)
			}
		})
	}
}

func stepNames(steps []Step) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.String())
	}
	return out
}

func TestPlanOrder(t *testing.T) {
	three := cluster(v136, master("m1", v136), master("m2", v136), master("m3", v136), worker("w1", v136))
	steps, err := Plan(three, v137, []string{"3.6.16"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"etcd on m1: 3.6.8 -> 3.6.16", "etcd on m2: 3.6.8 -> 3.6.16", "etcd on m3: 3.6.8 -> 3.6.16",
		"kube-apiserver on m1: v1.36.3 -> v1.37.2", "kube-apiserver on m2: v1.36.3 -> v1.37.2", "kube-apiserver on m3: v1.36.3 -> v1.37.2",
		"kube-controller-manager on m1: v1.36.3 -> v1.37.2", "kube-controller-manager on m2: v1.36.3 -> v1.37.2", "kube-controller-manager on m3: v1.36.3 -> v1.37.2",
		"kube-scheduler on m1: v1.36.3 -> v1.37.2", "kube-scheduler on m2: v1.36.3 -> v1.37.2", "kube-scheduler on m3: v1.36.3 -> v1.37.2",
		"kube-proxy on cluster: v1.36.3 -> v1.37.2", "coredns on cluster: v1.12.1 -> v1.12.4",
		"kubelet on m1: v1.36.3 -> v1.37.2", "kubelet on m2: v1.36.3 -> v1.37.2", "kubelet on m3: v1.36.3 -> v1.37.2", "kubelet on w1: v1.36.3 -> v1.37.2",
	}
	if got := stepNames(steps); !reflect.DeepEqual(got, want) {
		t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range steps {
		if s.Component == Kubelet && !s.Drain {
			t.Errorf("%s: a minor kubelet upgrade drains first", s)
		}
	}
	// Every prefix of the plan, applied, breaks no skew rule.
	c := three
	for i, s := range steps {
		apply(&c, s)
		if v := SkewViolations(c); len(v) > 0 {
			t.Errorf("after step %d (%s): %v", i, s, v)
		}
	}
}

// apply records s as done in c.
func apply(c *Cluster, s Step) {
	if s.Node == "" {
		c.Addons[s.Component] = s.To
		return
	}
	for i := range c.Nodes {
		if c.Nodes[i].Name == s.Node {
			c.Nodes[i].Running[s.Component] = s.To
		}
	}
	if s.Component == Etcd {
		for i := range c.EtcdMembers {
			if c.EtcdMembers[i].Name == s.Node {
				c.EtcdMembers[i].Version = s.To
			}
		}
	}
}

func TestPlanResumesFromWhatRuns(t *testing.T) {
	c := cluster(v136, master("m1", v136), master("m2", v136), worker("w1", v136))
	full, err := Plan(c, v137, nil)
	if err != nil {
		t.Fatal(err)
	}
	for done := 0; done <= len(full); done++ {
		half := cluster(v136, master("m1", v136), master("m2", v136), worker("w1", v136))
		for _, s := range full[:done] {
			apply(&half, s)
		}
		rest, err := Plan(half, v137, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(stepNames(rest), stepNames(full[done:])) {
			t.Errorf("after %d steps the plan is\n%v\nwant the rest\n%v", done, stepNames(rest), stepNames(full[done:]))
		}
	}
	// A patch upgrade drains no node.
	patch, _ := Plan(c, Versions{Kubernetes: "v1.36.5", Etcd: v136.Etcd}, nil)
	for _, s := range patch {
		if s.Drain {
			t.Errorf("%s drains for a patch", s)
		}
	}
}

func TestEtcdPath(t *testing.T) {
	tests := []struct {
		from, to string
		known    []string
		want     []string
		err      string
	}{
		{"3.6.8", "3.6.16", nil, []string{"3.6.16"}, ""},
		{"3.6.8", "3.7.3", []string{"3.6.16", "3.6.12"}, []string{"3.6.16", "3.7.3"}, ""},
		{"3.6.16", "3.7.3", []string{"3.6.16"}, []string{"3.7.3"}, ""},
		{"3.5.21", "3.7.3", []string{"3.5.24", "3.6.16", "3.6.2"}, []string{"3.5.24", "3.6.16", "3.7.3"}, ""},
		{"v3.6.8", "v3.7.0", []string{"v3.6.16"}, []string{"v3.6.16", "v3.7.0"}, ""},
		{"3.5.21", "3.7.3", nil, nil, "no known 3.6 release"},
		{"3.7.3", "3.6.16", nil, nil, "goes down"},
		{"3.6.8", "4.0.0", nil, nil, "major"},
	}
	for _, tc := range tests {
		got, err := EtcdPath(tc.from, tc.to, tc.known)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s -> %s: err %v, want %q", tc.from, tc.to, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s -> %s via %v: %v %v, want %v", tc.from, tc.to, tc.known, got, err, tc.want)
		}
	}
}

func TestDecideGate(t *testing.T) {
	api := Step{Component: APIServer, Node: "m1", From: "v1.36.3", To: "v1.37.2"}
	patch := Step{Component: Etcd, Node: "m1", From: "3.6.8", To: "3.6.16"}
	etcd := Step{Component: Etcd, Node: "m1", From: "3.6.16", To: "3.7.0"}
	oneMember := []EtcdMember{{Name: "m1", Version: "3.7.0"}}
	threeMembers := []EtcdMember{{Name: "m1", Version: "3.7.0"}, {Name: "m2", Version: "3.6.16"}, {Name: "m3", Version: "3.6.8"}}
	othersMoved := []EtcdMember{{Name: "m1", Version: "3.7.0"}, {Name: "m2", Version: "3.7.0"}, {Name: "m3", Version: "3.7.0"}}
	tests := []struct {
		name    string
		s       Step
		g       Gate
		members []EtcdMember
		want    Verdict
		says    string
	}{
		{"passed", api, Gate{Passed: true, Elapsed: 20 * time.Second}, nil, Next, "passed"},
		{"not yet", api, Gate{Why: "/readyz: 503", Elapsed: time.Minute}, nil, Wait, "/readyz: 503"},
		{"timed out", api, Gate{Why: "container exited 1", Elapsed: GateTimeout}, nil, RollBack, "putting it back to v1.36.3"},
		{"etcd with a member of the old minor left", etcd, Gate{Why: "unhealthy", Elapsed: GateTimeout}, threeMembers, RollBack, "back to 3.6.16"},
		{"etcd with no member of the old minor left", etcd, Gate{Why: "unhealthy", Elapsed: GateTimeout}, othersMoved, Hold, "cannot go back"},
		{"a single member's minor step", etcd, Gate{Why: "unhealthy", Elapsed: GateTimeout}, oneMember, Hold, "set the desired version again"},
		{"a single member's patch step goes back", patch, Gate{Why: "unhealthy", Elapsed: GateTimeout}, []EtcdMember{{Name: "m1", Version: "3.6.16"}}, RollBack, "back to 3.6.8"},
	}
	for _, tc := range tests {
		d := DecideGate(tc.s, tc.g, tc.members)
		if d.Verdict != tc.want || !strings.Contains(d.Message, tc.says) {
			t.Errorf("%s: %+v, want %s saying %q", tc.name, d, tc.want, tc.says)
		}
	}
}
