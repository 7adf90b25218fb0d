package upgrade

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	btypes "github.com/bootlet/bootlet/types"
)

// TestProgressSurvivesTheObject: the progress Decide returns, written into
// the object's status and read back by a new leader, is the same
// progress, for every state of the machine.
func TestProgressSurvivesTheObject(t *testing.T) {
	from, to := Releases["v1.36.3"], Releases["v1.37.2"]
	c := cluster(from, master("m1", from))
	began := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	api := Step{Component: APIServer, Node: "m1", From: "v1.36.3", To: "v1.37.2"}
	rolled := Decision{RollBack, "kube-apiserver on m1 was put back to v1.36.3: ..."}
	held := Decision{Hold, "etcd cannot go back"}
	for name, p := range map[string]Progress{
		"idle":         {},
		"in flight":    {InFlight: &api, Began: began},
		"rolling back": {RollingBack: &api, Began: began, Stopped: &Decision{RollBack, "failed its gate"}},
		"rolled back":  {Stopped: &rolled, StoppedFor: 3},
		"held":         {Stopped: &held, StoppedFor: 4},
	} {
		var last *Decision
		if p.Stopped != nil {
			last = p.Stopped
		}
		s := Summarize(c, to, nil, nil, nil, last)
		st := ObjectStatus(btypes.ClusterVersionStatus{}, s, from, p, 7, began)
		if got := ProgressOf(st); !reflect.DeepEqual(got, p) {
			t.Errorf("%s: read back %+v, want %+v", name, got, p)
		}
	}
}

func TestObjectStatusKeepsTransitionTimes(t *testing.T) {
	from, to := Releases["v1.36.3"], Releases["v1.37.2"]
	c := cluster(from, master("m1", from))
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	steps, _ := Plan(c, to, EtcdReleases())
	st := ObjectStatus(btypes.ClusterVersionStatus{}, Summarize(c, to, steps, nil, nil, nil), from, Progress{}, 1, t0)
	st2 := ObjectStatus(st, Summarize(c, to, steps[1:], nil, nil, nil), from, Progress{}, 1, t0.Add(time.Minute))
	p := meta.FindStatusCondition(st2.Conditions, Progressing)
	if p == nil || p.Status != metav1.ConditionTrue || !p.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("Progressing after a second round: %+v, want True since %s", p, t0)
	}
	if st2.Step != steps[1].String() || len(st2.Components) == 0 || st2.Current.Kubernetes != "v1.36.3" {
		t.Errorf("status: %+v", st2)
	}
}
