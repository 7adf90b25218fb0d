package cvclient

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	btypes "github.com/bootlet/bootlet/types"
)

func fakeDynamic() *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{Resource: btypes.ClusterVersionKind + "List"})
}

func TestSetDesiredCreatesThenUpdatesAndRetries(t *testing.T) {
	ctx := context.Background()
	dyn := fakeDynamic()
	if _, err := Get(ctx, dyn); !apierrors.IsNotFound(err) {
		t.Fatalf("Get before any desired version: %v, want NotFound", err)
	}
	cv, err := SetDesired(ctx, dyn, "v1.37.2", true)
	if err != nil {
		t.Fatal(err)
	}
	if cv.Name != btypes.ClusterVersionName || cv.Spec.DesiredVersion != "v1.37.2" || cv.Spec.Retry != 0 {
		t.Fatalf("created %+v", cv)
	}
	cv.Status.Step = "kube-apiserver on m1: v1.36.3 -> v1.37.2"
	if _, err := UpdateStatus(ctx, dyn, cv); err != nil {
		t.Fatal(err)
	}
	again, err := SetDesired(ctx, dyn, "v1.37.2", true)
	if err != nil {
		t.Fatal(err)
	}
	if again.Spec.Retry != 1 {
		t.Errorf("the same version set again: retry %d, want 1 (a new generation for a stopped upgrade)", again.Spec.Retry)
	}
	if again.Status.Step != cv.Status.Step {
		t.Errorf("setting the desired version lost the status: %q", again.Status.Step)
	}
	other, err := SetDesired(ctx, dyn, "v1.38.0", true)
	if err != nil {
		t.Fatal(err)
	}
	if other.Spec.DesiredVersion != "v1.38.0" || other.Spec.Retry != 1 {
		t.Errorf("another version: %+v", other.Spec)
	}
}
