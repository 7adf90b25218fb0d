package pivot

import (
	"context"
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// recordingPods is the registry of bootstrap pods, recording the calls of
// the port hand-over and of the withdrawals in one sequence.
type recordingPods struct{ calls *[]string }

func (r recordingPods) GetPod(ns, name string) (*v1.Pod, error) {
	return nil, fmt.Errorf("not used")
}

func (r recordingPods) DeletePod(ns, name string, opts *metav1.DeleteOptions) (*v1.Pod, error) {
	*r.calls = append(*r.calls, "withdraw "+name+" uid "+string(*opts.Preconditions.UID))
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, nil
}

// TestActHandsThePortOverBeforeWithdrawingTheAPIServer: the bootstrap
// apiserver is withdrawn only after the hand-over from it to the
// self-hosted pod that takes over; the other components are withdrawn
// without one.
func TestActHandsThePortOverBeforeWithdrawingTheAPIServer(t *testing.T) {
	var calls []string
	p := &pivot{last: map[string]string{}, cfg: Config{
		Components: DefaultComponents,
		Pods:       recordingPods{&calls},
		Handover: func(_ context.Context, incoming, outgoing types.UID) {
			calls = append(calls, "hand over "+string(outgoing)+" -> "+string(incoming))
		},
	}}
	facts := Facts{Components: []ComponentFacts{
		{Component: DefaultComponents[0], Bootstrap: &BootstrapFacts{UID: "boot-api"},
			SelfHosted: []SelfHostedFacts{{Name: "kube-apiserver-old", UID: "sh-old"}, {Name: "kube-apiserver-x", UID: "sh-api"}}},
		{Component: DefaultComponents[1], Bootstrap: &BootstrapFacts{UID: "boot-kcm"},
			SelfHosted: []SelfHostedFacts{{Name: "kube-controller-manager-y", UID: "sh-kcm"}}},
	}}
	p.act(context.Background(), facts, Decision{
		{Component: "kube-apiserver", Withdraw: true, Pod: "kube-apiserver-x"},
		{Component: "kube-controller-manager", Withdraw: true, Pod: "kube-controller-manager-y"},
	})
	want := []string{
		"hand over boot-api -> sh-api",
		"withdraw kube-apiserver uid boot-api",
		"withdraw kube-controller-manager uid boot-kcm",
	}
	if !slices.Equal(calls, want) {
		t.Errorf("calls:\n%v\nwant:\n%v", calls, want)
	}
}
