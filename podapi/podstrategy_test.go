package podapi

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	btypes "github.com/bootlet/bootlet/types"
)

func TestDefaultPod(t *testing.T) {
	in := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd", UID: "0b3e2f4e-1111-2222-3333-444455556666"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox"}}}}
	p, err := DefaultPod(in, "node1")
	if err != nil {
		t.Fatal(err)
	}
	c := p.Spec.Containers[0]
	switch {
	case p.UID != "0b3e2f4e-1111-2222-3333-444455556666":
		t.Error("a client-supplied uid must be honoured, as the kubelet does for static pods")
	case p.Namespace != "default" || p.Spec.NodeName != "node1":
		t.Errorf("namespace %q nodeName %q", p.Namespace, p.Spec.NodeName)
	case p.Annotations["kubernetes.io/config.hash"] != "0b3e2f4e-1111-2222-3333-444455556666" || p.Annotations[btypes.AnnotationManagedBy] != btypes.ManagedByValue:
		t.Errorf("annotations %v", p.Annotations)
	case c.ImagePullPolicy != v1.PullAlways || c.TerminationMessagePath != "/dev/termination-log" || p.Spec.DNSPolicy != v1.DNSClusterFirst:
		t.Errorf("legacyscheme defaults missing: %+v", c)
	case len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0].Effect != v1.TaintEffectNoExecute:
		t.Errorf("static pods tolerate NoExecute: %v", p.Spec.Tolerations)
	case btypes.RuntimePod(p, "node1").Name != "etcd-node1":
		t.Error("runtime name must be NAME-NODENAME")
	}
	generated, err := DefaultPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: in.Spec}, "node1")
	if err != nil || generated.UID == "" {
		t.Fatalf("a missing uid must be generated: %v", err)
	}
}

func TestDefaultPodRejects(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	tests := map[string]v1.PodSpec{
		"no image":              {Containers: []v1.Container{{Name: "c"}}},
		"sidecar":               {InitContainers: []v1.Container{{Name: "s", Image: "i", RestartPolicy: &always}}, Containers: []v1.Container{{Name: "c", Image: "i"}}},
		"persistent volume":     {Containers: []v1.Container{{Name: "c", Image: "i"}}, Volumes: []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "x"}}}}},
		"service account token": {Containers: []v1.Container{{Name: "c", Image: "i"}}, Volumes: []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "t"}}}}}}}},
	}
	for name, spec := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := DefaultPod(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: spec}, "n")
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want 422 Invalid, got %v", err)
			}
		})
	}
}

// FuzzDefaultPod: defaulting and validation never panic on any pod that
// decodes.
func FuzzDefaultPod(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}}`))
	f.Add([]byte(`{"metadata":{"name":"p"},"spec":{"initContainers":[{"name":"i","image":"i"}],"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"1"}}}],"volumes":[{"name":"v","hostPath":{"path":"/x"}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := &v1.Pod{}
		if json.Unmarshal(data, p) != nil {
			return
		}
		out, err := DefaultPod(p, "node1")
		if err == nil && (out.UID == "" || out.Spec.NodeName != "node1") {
			t.Fatalf("accepted pod without identity: %+v", out.ObjectMeta)
		}
	})
}
