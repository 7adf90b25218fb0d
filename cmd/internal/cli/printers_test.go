package cli

import (
	"bytes"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	btypes "github.com/bootlet/bootlet/types"
)

// TestGetPodsMarksCheckpointPods: the OWNER column says which component a
// checkpoint pod stands in for.
func TestGetPodsMarksCheckpointPods(t *testing.T) {
	pods := &v1.PodList{Items: []v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "kube-system"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-checkpoint", Namespace: "kube-system",
			Annotations: map[string]string{btypes.AnnotationCheckpointOf: "kube-system/kube-apiserver", btypes.AnnotationOwner: string(btypes.OwnerKubeletStatic)}}},
	}}
	var out bytes.Buffer
	if err := PrintTable(pods, &GetOptions{}, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasSuffix(strings.TrimSpace(lines[1]), " bootlet") ||
		!strings.HasSuffix(strings.TrimSpace(lines[2]), " kubelet-static,checkpoint-of=kube-system/kube-apiserver") {
		t.Fatalf("bootlet get pods:\n%s", out.String())
	}
}
