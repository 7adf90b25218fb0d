package nodeagent

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	btypes "github.com/bootlet/bootlet/types"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	drained := metav1.NewTime(now.Add(-time.Minute))
	step := func(node string, isDrained bool) *btypes.UpgradeStep {
		s := &btypes.UpgradeStep{Component: "kubelet", Node: node, From: "v1.36.3", To: "v1.37.2"}
		if isDrained {
			s.Drained = &drained
		}
		return s
	}
	apiserver := &btypes.UpgradeStep{Component: "kube-apiserver", Node: "m1", From: "v1.36.3", To: "v1.37.2"}
	tests := []struct {
		name string
		f    Facts
		want ActKind
		ver  string
	}{
		{"nothing in flight", Facts{Binary: "v1.36.3", Running: "v1.36.3"}, Nothing, ""},
		{"another component's step", Facts{InFlight: apiserver, Binary: "v1.36.3", Running: "v1.36.3"}, Nothing, ""},
		{"another node's kubelet", Facts{InFlight: step("m2", true), Binary: "v1.36.3", Running: "v1.36.3"}, Nothing, ""},
		{"not drained yet", Facts{InFlight: step("m1", false), Binary: "v1.36.3", Running: "v1.36.3"}, Nothing, ""},
		{"drained: install", Facts{InFlight: step("m1", true), Binary: "v1.36.3", Running: "v1.36.3"}, Install, "v1.37.2"},
		{"in place, never restarted (the agent restarted before it could)", Facts{InFlight: step("m1", true), Binary: "v1.37.2", Running: "v1.36.3"}, Restart, "v1.37.2"},
		{"in place, just restarted", Facts{InFlight: step("m1", true), Binary: "v1.37.2", Running: "v1.36.3", RestartedAt: now.Add(-10 * time.Second)}, Nothing, "v1.37.2"},
		{"restarted a while ago, still old", Facts{InFlight: step("m1", true), Binary: "v1.37.2", Running: "v1.36.3", RestartedAt: now.Add(-2 * RestartSettle)}, Restart, "v1.37.2"},
		{"runs the target", Facts{InFlight: step("m1", true), Binary: "v1.37.2", Running: "v1.37.2"}, Nothing, "v1.37.2"},
		{"rollback: restore the kept one", Facts{RollingBack: step("m1", true), Binary: "v1.37.2", Kept: "v1.36.3", Running: "v1.37.2"}, Restore, "v1.36.3"},
		{"rollback with nothing kept: install the old one", Facts{RollingBack: step("m1", true), Binary: "v1.37.2", Running: "v1.37.2"}, Install, "v1.36.3"},
		{"rollback, not drained: still restored", Facts{RollingBack: step("m1", false), Binary: "v1.37.2", Kept: "v1.36.3"}, Restore, "v1.36.3"},
		{"rollback done", Facts{RollingBack: step("m1", true), Binary: "v1.36.3", Running: "v1.36.3"}, Nothing, "v1.36.3"},
	}
	for _, tt := range tests {
		tt.f.Node, tt.f.Now = "m1", now
		got := Decide(tt.f)
		if got.Kind != tt.want || got.Version != tt.ver {
			t.Errorf("%s: %s %q (%s), want %s %q", tt.name, got.Kind, got.Version, got.Why, tt.want, tt.ver)
		}
	}
}

func TestDecideEtcd(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	step := func(node string) *btypes.UpgradeStep {
		return &btypes.UpgradeStep{Component: "etcd", Node: node, From: "3.6.8", To: "3.7.0"}
	}
	member := func(stored, running, mirror string) *EtcdFacts {
		return &EtcdFacts{Stored: stored, Running: running, Mirror: mirror}
	}
	tests := []struct {
		name string
		f    Facts
		want ActKind
		ver  string
	}{
		{"another node's member", Facts{InFlight: step("m2"), Etcd: member("3.6.8", "3.6.8", "3.6.8")}, Nothing, ""},
		{"no member here (a worker)", Facts{InFlight: step("m1")}, Nothing, ""},
		{"in flight: set the stored pod", Facts{InFlight: step("m1"), Etcd: member("3.6.8", "3.6.8", "3.6.8")}, SetEtcd, "3.7.0"},
		{"set, the kubelet not there yet", Facts{InFlight: step("m1"), Etcd: member("3.7.0", "3.6.8", "3.6.8")}, Nothing, "3.7.0"},
		{"set, no container runs (restarting)", Facts{InFlight: step("m1"), Etcd: member("3.7.0", "", "3.6.8")}, Nothing, "3.7.0"},
		{"runs the target, the mirror lags: refresh it", Facts{InFlight: step("m1"), Etcd: member("3.7.0", "3.7.0", "3.6.8")}, RefreshMirror, "3.7.0"},
		{"mirror pod gone, the kubelet creates it", Facts{InFlight: step("m1"), Etcd: member("3.7.0", "", "")}, Nothing, "3.7.0"},
		{"all three at the target", Facts{InFlight: step("m1"), Etcd: member("3.7.0", "3.7.0", "3.7.0")}, Nothing, "3.7.0"},
		{"rollback: the stored pod back", Facts{RollingBack: step("m1"), Etcd: member("3.7.0", "", "3.6.8")}, SetEtcd, "3.6.8"},
		{"rollback: the mirror lags", Facts{RollingBack: step("m1"), Etcd: member("3.6.8", "3.6.8", "3.7.0")}, RefreshMirror, "3.6.8"},
		{"rollback before a new step of the same node", Facts{RollingBack: step("m1"), InFlight: step("m1"), Etcd: member("3.7.0", "3.7.0", "3.7.0")}, SetEtcd, "3.6.8"},
	}
	for _, tt := range tests {
		tt.f.Node, tt.f.Now = "m1", now
		got := Decide(tt.f)
		if got.Kind != tt.want || got.Version != tt.ver {
			t.Errorf("%s: %s %q (%s), want %s %q", tt.name, got.Kind, got.Version, got.Why, tt.want, tt.ver)
		}
	}
}
