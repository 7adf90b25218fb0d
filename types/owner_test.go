package types

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestOwnerOf(t *testing.T) {
	for ann, want := range map[string]Owner{"": OwnerBootlet, "bootlet": OwnerBootlet, "kubelet-static": OwnerKubeletStatic,
		"released": OwnerReleased, "garbage": OwnerBootlet} {
		p := &v1.Pod{}
		if ann != "" {
			p.Annotations = map[string]string{AnnotationOwner: ann}
		}
		if got := OwnerOf(p); got != want {
			t.Errorf("OwnerOf(%q) = %s, want %s", ann, got, want)
		}
	}
}
